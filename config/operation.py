"""Which engine operation the program runs for: a `pulumi preview` or a `pulumi up`.

Some configurations are fine to look at but not to deploy (a documentation placeholder where a real address
or account goes): a preview warns about them, an `up` refuses them. The engine says which through
`pulumi.runtime.is_dry_run()` (true for a preview, and for the preview phase of `pulumi up`). The offline
synth (`python -m synth`) runs under mocks with `preview=False`, because only then do the mocks' outputs
resolve; it stands for a preview and says so with `OFFLINE_OPERATION`.
"""

from contextvars import ContextVar
from typing import Literal

import pulumi

Operation = Literal["preview", "up"]

OFFLINE_OPERATION: ContextVar[Operation | None] = ContextVar("gpu_eks_offline_operation", default=None)
"""Set by the offline runner (`synth.runner.run_program`) for the program it runs; unset under the engine."""


def current_operation() -> Operation:
    """The operation the program runs for: the offline runner's, else the engine's."""
    offline = OFFLINE_OPERATION.get()
    if offline is not None:
        return offline
    return "preview" if pulumi.runtime.is_dry_run() else "up"
