"""The switch of the offline fast path: the provider SDKs' fast imports (synth/fast_imports.py) and mock calls
answered on the event loop's thread (synth/runner.py `InlineLoop`).

On unless `GPU_EKS_FAST_PATH=0`, which gives Python's own imports and the SDK's own thread pool: CI
synthesises every stack both ways and requires the same bytes (.ci/run). Nothing `pulumi up` runs reads it.
"""

import os

SWITCH = "GPU_EKS_FAST_PATH"


def fast_path() -> bool:
    """Whether the fast path is on: `GPU_EKS_FAST_PATH` unset or 1; 0 turns it off."""
    value = os.environ.get(SWITCH, "1")
    if value not in ("0", "1"):
        raise SystemExit(f"{SWITCH}={value!r}: must be 1 (the fast path, the default) or 0 (off)")
    return value == "1"
