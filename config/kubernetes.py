"""Kubernetes shapes that several config sections share."""

from typing import Annotated, Literal

from pydantic import Field

from config.base import ConfigModel
from config.types import described

_QUALIFIED_NAME = (
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
QualifiedName = Annotated[
    str,
    Field(max_length=316),
    described(
        _QUALIFIED_NAME,
        "a Kubernetes key such as nvidia.com/gpu or team: an optional DNS prefix and '/', then letters, "
        "digits, '-', '_' or '.', starting and ending with a letter or digit",
    ),
]
"""A label or taint key (`prefix/name`)."""
LabelValue = Annotated[
    str,
    Field(max_length=63),
    described(
        _LABEL_VALUE,
        "a Kubernetes label value: up to 63 letters, digits, '-', '_' or '.', starting and ending with a "
        "letter or digit",
    ),
]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(ConfigModel):
    """A node taint, as Karpenter puts it on the nodes of a pool."""

    key: QualifiedName
    """Taint key, e.g. `nvidia.com/gpu`."""
    value: LabelValue | None = None
    """Taint value (tolerated with `Equal`); without one, tolerations use `Exists`."""
    effect: TaintEffect = "NoSchedule"
    """What happens to pods that do not tolerate it."""

    def toleration(self) -> dict[str, str]:
        """The pod toleration (Kubernetes API shape) that tolerates exactly this taint."""
        if self.value is None:
            return {"key": self.key, "operator": "Exists", "effect": self.effect}
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


GPU_TAINT = Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule")
"""The taint every GPU pool carries unless its config says otherwise."""

MIG_PENDING_TAINT = Taint(key="gpu-eks.io/mig-pending", value="true", effect="NoSchedule")
"""Startup taint of every MIG pool: no workload lands before the MIG manager has partitioned the GPUs. The GPU
node guard (`components/gpu_node_guard/`) removes it once the node reports
`nvidia.com/mig.config.state=success`."""
