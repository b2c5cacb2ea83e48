"""Small builders for GPU pool profiles and values, so each test states only what it is about."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components.gpu_operator_values import GpuPoolProfile, gpu_operator_values
from config.gpu_operator import GpuOperatorConfig
from config.kubernetes import GPU_TAINT, Taint

SYSTEM_SELECTOR = {"eks.amazonaws.com/nodegroup": "system"}
SYSTEM_TOLERATIONS = ({"key": "CriticalAddonsOnly", "operator": "Exists"},)


def pool(name: str, ami_family: str = "al2023", **fields: Any) -> GpuPoolProfile:
    """A pool profile; GPU pools carry the GPU taint unless `taints` says otherwise."""
    fields.setdefault("taints", (GPU_TAINT,))
    return GpuPoolProfile.model_validate({"name": name, "ami_family": ami_family, **fields})


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> Taint:
    return Taint.model_validate({"key": key, "value": value, "effect": effect})


def config(**raw: Any) -> GpuOperatorConfig:
    """A config from camelCase keys, as the stack YAML has them."""
    return GpuOperatorConfig.model_validate(raw)


def values(
    pools: Iterable[GpuPoolProfile] = (),
    *,
    kubernetes_version: str = "1.35",
    operator_config: GpuOperatorConfig | None = None,
    system_node_selector: Mapping[str, str] = SYSTEM_SELECTOR,
    system_tolerations: Sequence[Mapping[str, Any]] = SYSTEM_TOLERATIONS,
    scraped: bool = False,
) -> dict[str, Any]:
    return gpu_operator_values(
        pools,
        kubernetes_version=kubernetes_version,
        config=operator_config or GpuOperatorConfig(),
        system_node_selector=system_node_selector,
        system_tolerations=system_tolerations,
        scraped=scraped,
    )
