"""A change of `timeSlicing.replicas` never removes the device-plugin config entry that running nodes select.

Written against what the program declares in two runs (before and after), as a plan would compare them: the
NodePool's node label changes (Karpenter replaces the nodes as drifted), the GPU Operator release's values do
not change at all, so every entry old nodes still select stays until they are gone.
"""

from typing import Any

import pytest

from components.gpu_operator_values import DEVICE_PLUGIN_CONFIG_LABEL, TIME_SLICING_REPLICAS
from synth.runner import ProgramRun
from tests.helpers import run

# The cap counts time-slices: 64 lets even a 1-GPU node sliced 64 ways launch.
POOL: dict[str, Any] = {"name": "gpu-shared", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "64"}}


def _declared(replicas: int | None) -> ProgramRun:
    pool = {**POOL, **({"timeSlicing": {"replicas": replicas}} if replicas else {})}
    return run(nodePools=[pool])


def _label(result: ProgramRun) -> str | None:
    pool = result.one("kubernetes:karpenter.sh/v1:NodePool", "node-pools-gpu-shared").inputs
    labels: dict[str, str] = pool["spec"]["template"]["metadata"]["labels"]
    return labels.get(DEVICE_PLUGIN_CONFIG_LABEL)


def _device_plugin(result: ProgramRun) -> dict[str, Any]:
    release = result.one("kubernetes:helm.sh/v3:Release", "gpu-operator").inputs
    plugin: dict[str, Any] = release["values"]["devicePlugin"]
    return plugin


@pytest.mark.parametrize(("before", "after"), [(4, 2), (2, 64), (8, None), (None, 4)])
def test_a_replicas_change_keeps_the_entry_old_nodes_use(before: int | None, after: int | None) -> None:
    old, new = _declared(before), _declared(after)
    assert _label(old) != _label(new)  # the NodePool is updated: its nodes drift and are replaced
    assert _device_plugin(old) == _device_plugin(new)  # the operator release is not updated at all
    old_label = _label(old)
    if old_label is not None:
        assert old_label in _device_plugin(new)["config"]["data"]


def test_every_allowed_replica_count_has_an_entry() -> None:
    data = _device_plugin(_declared(None))["config"]["data"]
    assert set(data) == {"default"} | {f"time-slicing-{n}" for n in TIME_SLICING_REPLICAS}
