"""NodeOverlays for GPU-sharing pools: what Karpenter is told each candidate instance type offers, checked
against the instance-type table and the real NodeOverlay CRD; and the pool's limits and contract in slices."""

from typing import Any

import pytest

from components.karpenter_api import NodeOverlay, to_manifest
from components.node_overlays import OVERLAY_WEIGHT, pool_overlays
from components.node_pools import pool_objects
from config.errors import ConfigError
from config.stack import StackConfig, parse_stack_config
from facts.instance_types import GpuInstanceType, gpu_instance_types
from facts.mig import MIG_PROFILE_INSTANCES, balanced_mig_devices
from pools.sharing import gpu_limits, pool_gpu_resource, slices_per_gpu
from synth.runner import ProgramRun, stack_config
from tests.helpers import config, run, run_failing
from tests.support.crd_check import validate

OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"
MIG_POOL: dict[str, Any] = {
    "name": "gpu-mig",
    "instanceFamilies": ["p4d", "p5"],
    "limits": {"nvidia.com/gpu": "112"},
    "mig": {"profile": "all-1g.10gb"},
}
ONE_G_TEN_GB_PER_GPU = {("a100", 40960): 4, ("h100", 81920): 7}
"""`all-1g.10gb` in mig-parted v0.15.0 config-default.yaml: 4 per A100-40GB (device-filter 0x20B010DE...),
7 per H100-80GB."""


def stack(*pools: dict[str, Any], **sections: Any) -> StackConfig:
    return parse_stack_config(config(nodePools=list(pools), **sections))


def _labels(pool: str, it: GpuInstanceType) -> dict[str, str]:
    """The labels Karpenter's scheduling simulation matches an overlay's requirements against."""
    return {
        "karpenter.sh/nodepool": pool,
        "node.kubernetes.io/instance-type": it.name,
        "karpenter.k8s.aws/instance-gpu-name": it.gpu_name,
        "karpenter.k8s.aws/instance-gpu-memory": str(it.gpu_memory_mib),
        "karpenter.k8s.aws/instance-gpu-count": str(it.gpu_count),
        "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
    }


def _matches(overlay: dict[str, Any], labels: dict[str, str]) -> bool:
    for requirement in overlay["spec"]["requirements"]:
        assert requirement["operator"] == "In", "the derived overlays only use In"
        if labels.get(requirement["key"]) not in requirement["values"]:
            return False
    return True


def capacity_by_instance_type(pool: str, overlays: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """For every NVIDIA instance type of the table: the capacity of the one overlay that applies to it in
    `pool` (an instance type two overlays of equal weight both set would be a conflict)."""
    result = {}
    for it in gpu_instance_types().values():
        matching = [o for o in overlays if _matches(o, _labels(pool, it))]
        assert len(matching) <= 1, f"{it.name}: {[o['metadata']['name'] for o in matching]}"
        if matching:
            result[it.name] = matching[0]["spec"]["capacity"]
    return result


def _overlays(run_: ProgramRun) -> list[dict[str, Any]]:
    """The declared NodeOverlays as manifests."""
    keys = ("apiVersion", "kind", "metadata", "spec")
    return [{key: r.inputs[key] for key in keys} for r in run_.of_type(OVERLAY)]


# --------------------------------------------------------------------------------------------------------
# dev: the time-sliced pool
# --------------------------------------------------------------------------------------------------------
def test_devs_time_sliced_pool_offers_four_slices_per_gpu_on_every_candidate(dev: ProgramRun) -> None:
    overlays = _overlays(dev)
    assert [o["metadata"]["name"] for o in overlays] == ["gpu-inference-1gpu"]
    (pool,) = parse_stack_config(stack_config("dev")).gpu_pools
    capacity = capacity_by_instance_type("gpu-inference", overlays)
    candidates = {it.name: it for it in pool.candidates()}
    assert set(candidates) == {
        f"{family}.{size}"
        for family in ("g5", "g6")
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
    }
    # Every candidate gets 1 GPU x 4 slices; what else the overlay selects has one GPU too (and the
    # NodePool's requirements keep those types out anyway).
    assert set(capacity) >= set(candidates)
    for name in capacity:
        assert gpu_instance_types()[name].gpu_count == 1
        assert capacity[name] == {"nvidia.com/gpu": "4"}
    assert overlays[0]["spec"]["weight"] == OVERLAY_WEIGHT


def test_devs_overlay_passes_the_crd_and_its_cel_rules(dev: ProgramRun) -> None:
    for manifest in _overlays(dev):
        assert validate(manifest) == []
        NodeOverlay.model_validate(manifest)


def test_the_feature_gate_is_on_in_dev_and_stays_at_the_chart_default_in_prod(
    dev: ProgramRun, prod: ProgramRun
) -> None:
    def gate(run_: ProgramRun) -> bool:
        release = run_.one("kubernetes:helm.sh/v3:Release", "karpenter-controller")
        return bool(release.inputs["values"]["settings"]["featureGates"]["nodeOverlay"])

    assert gate(dev) is True
    assert gate(prod) is False
    assert prod.of_type(OVERLAY) == []


def test_devs_pool_caps_and_tells_consumers_in_slices(dev: ProgramRun) -> None:
    node_pool = dev.one("kubernetes:karpenter.sh/v1:NodePool")
    assert node_pool.inputs["spec"]["limits"]["nvidia.com/gpu"] == "16"  # 16 slices: 4 GPUs
    (pool,) = dev.outputs["gpuPools"]
    assert (pool["gpuLimit"], pool["gpuResource"], pool["slicesPerGpu"]) == ("16", "nvidia.com/gpu", 4)


# --------------------------------------------------------------------------------------------------------
# A MIG pool in a test stack
# --------------------------------------------------------------------------------------------------------
def test_a_mig_pool_offers_gpus_times_mig_devices_per_candidate() -> None:
    result = run(nodePools=[MIG_POOL])
    overlays = _overlays(result)
    assert sorted(o["metadata"]["name"] for o in overlays) == [
        "gpu-mig-a100-40960mib-8gpu",
        "gpu-mig-h100-81920mib-1gpu",
        "gpu-mig-h100-81920mib-8gpu",
    ]
    capacity = capacity_by_instance_type("gpu-mig", overlays)
    assert set(capacity) == {"p4d.24xlarge", "p5.4xlarge", "p5.48xlarge"}
    for name, value in capacity.items():
        it = gpu_instance_types()[name]
        per_gpu = ONE_G_TEN_GB_PER_GPU[it.gpu_name, it.gpu_memory_mib]
        assert value == {"nvidia.com/gpu": str(it.gpu_count * per_gpu)}
    assert capacity["p4d.24xlarge"] == {"nvidia.com/gpu": "32"}
    assert capacity["p5.48xlarge"] == {"nvidia.com/gpu": "56"}
    for manifest in overlays:
        assert validate(manifest) == []
        NodeOverlay.model_validate(manifest)
    release = result.one("kubernetes:helm.sh/v3:Release", "karpenter-controller")
    assert release.inputs["values"]["settings"]["featureGates"]["nodeOverlay"] is True
    (pool,) = result.outputs["gpuPools"]
    assert pool["gpuResource"] == "nvidia.com/gpu"
    assert "slicesPerGpu" not in pool  # None (4 on p4d, 7 on p5): the SDK drops it


def test_overlays_do_not_reach_other_pools() -> None:
    other = {"name": "gpu-whole", "instanceFamilies": ["p5"], "limits": {"nvidia.com/gpu": "16"}}
    overlays = [to_manifest(o) for o in stack(MIG_POOL, other).node_overlays]
    assert capacity_by_instance_type("gpu-whole", overlays) == {}
    assert all(o["spec"]["requirements"][0]["key"] == "karpenter.sh/nodepool" for o in overlays)


def test_mixed_strategy_adds_the_mig_resource_and_takes_whole_gpus_away() -> None:
    parsed = stack(MIG_POOL, gpuOperator={"mig": {"strategy": "mixed"}})
    capacity = capacity_by_instance_type("gpu-mig", [to_manifest(o) for o in parsed.node_overlays])
    assert capacity["p4d.24xlarge"] == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "32"}
    assert capacity["p5.48xlarge"] == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}
    (pool,) = parsed.node_pools
    # The cap counts MIG devices (what pods request); nvidia.com/gpu stays for the policy pack.
    assert gpu_limits(pool, parsed.gpu_operator) == {"nvidia.com/gpu": "112", "nvidia.com/mig-1g.10gb": "112"}
    (objects,) = pool_objects([pool], cluster_name="ml-test", tags={}, gpu_operator=parsed.gpu_operator)
    node_pool = objects.node_pool
    assert node_pool.spec.limits == {"nvidia.com/gpu": "112", "nvidia.com/mig-1g.10gb": "112"}
    assert pool_gpu_resource(pool, parsed.gpu_operator) == "nvidia.com/mig-1g.10gb"


def test_mixed_all_balanced_caps_each_mig_resource_at_the_gpus_worth() -> None:
    raw = {**MIG_POOL, "instanceFamilies": ["p5"], "limits": {"nvidia.com/gpu": "16"}}
    raw["mig"] = {"profile": "all-balanced"}
    parsed = stack(raw, gpuOperator={"mig": {"strategy": "mixed"}})
    capacity = capacity_by_instance_type("gpu-mig", [to_manifest(o) for o in parsed.node_overlays])
    assert capacity["p5.48xlarge"] == {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.10gb": "16",
        "nvidia.com/mig-2g.20gb": "8",
        "nvidia.com/mig-3g.40gb": "8",
    }
    (pool,) = parsed.node_pools
    assert gpu_limits(pool, parsed.gpu_operator) == {
        "nvidia.com/gpu": "16",
        "nvidia.com/mig-1g.10gb": "32",
        "nvidia.com/mig-2g.20gb": "16",
        "nvidia.com/mig-3g.40gb": "16",
    }
    assert (pool_gpu_resource(pool, parsed.gpu_operator), slices_per_gpu(pool, parsed.gpu_operator)) == (
        None,
        None,
    )


def test_media_extension_profiles_are_one_per_gpu() -> None:
    raw = {**MIG_POOL, "instanceFamilies": ["p5"], "mig": {"profile": "all-1g.10gb.me"}}
    parsed = stack(raw, gpuOperator={"mig": {"strategy": "mixed"}})
    capacity = capacity_by_instance_type("gpu-mig", [to_manifest(o) for o in parsed.node_overlays])
    assert capacity["p5.48xlarge"] == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb.me": "8"}


def test_a_custom_config_with_one_group_for_all_gpus_is_derived() -> None:
    custom = {"sevenths": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}
    raw = {**MIG_POOL, "instanceFamilies": ["p5"], "mig": {"profile": "sevenths"}}
    parsed = stack(raw, gpuOperator={"mig": {"config": custom}})
    capacity = capacity_by_instance_type("gpu-mig", [to_manifest(o) for o in parsed.node_overlays])
    assert capacity == {"p5.4xlarge": {"nvidia.com/gpu": "7"}, "p5.48xlarge": {"nvidia.com/gpu": "56"}}


@pytest.mark.parametrize(
    ("profile", "profile_config"),
    [(None, None), ("all-disabled", None), ("off", [{"devices": "all", "mig-enabled": False}])],
    ids=["no-mig", "all-disabled", "custom-mig-off"],
)
def test_pools_that_do_not_share_get_no_overlay(
    profile: str | None, profile_config: list[dict[str, Any]] | None
) -> None:
    raw = {**MIG_POOL, "instanceFamilies": ["p5"]}
    raw.pop("mig")
    if profile:
        raw["mig"] = {"profile": profile}
    sections = {"gpuOperator": {"mig": {"config": {profile: profile_config}}}} if profile_config else {}
    parsed = stack(raw, **sections)
    assert parsed.node_overlays == []
    assert parsed.karpenter.feature_gates.node_overlay is False
    (pool,) = parsed.node_pools
    assert slices_per_gpu(pool, parsed.gpu_operator) == 1
    assert gpu_limits(pool, parsed.gpu_operator) == {"nvidia.com/gpu": "112"}


# --------------------------------------------------------------------------------------------------------
# Refused before anything is registered
# --------------------------------------------------------------------------------------------------------
def test_the_gate_off_with_a_sharing_pool_is_refused_naming_both_keys() -> None:
    error, monitor = run_failing(nodePools=[MIG_POOL], karpenter={"featureGates": {"nodeOverlay": False}})
    assert isinstance(error, ConfigError)
    assert monitor.registrations == []
    (problem,) = error.problems
    text = str(problem)
    assert text.startswith("gpu-eks:karpenter.featureGates.nodeOverlay = false: ")
    assert "gpu-eks:nodePools[0].mig.profile (gpu-mig)" in text
    assert "gpu-eks:karpenter.gpuSharingOverlays" in text


def test_time_slicing_names_its_key_too() -> None:
    raw = {"name": "shared", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "8"}}
    with pytest.raises(ConfigError) as caught:
        stack({**raw, "timeSlicing": {"replicas": 2}}, karpenter={"featureGates": {"nodeOverlay": False}})
    assert "gpu-eks:nodePools[0].timeSlicing (shared)" in str(caught.value)


def test_overlays_can_be_turned_off_except_for_mixed_pools() -> None:
    parsed = stack(MIG_POOL, karpenter={"gpuSharingOverlays": False, "featureGates": {"nodeOverlay": False}})
    assert parsed.node_overlays == []
    assert parsed.karpenter.feature_gates.node_overlay is False
    with pytest.raises(ConfigError) as caught:
        stack(MIG_POOL, karpenter={"gpuSharingOverlays": False}, gpuOperator={"mig": {"strategy": "mixed"}})
    (problem,) = caught.value.problems
    assert str(problem).startswith("gpu-eks:karpenter.gpuSharingOverlays = false: MIG pool 'gpu-mig'")


def test_an_explicit_gate_without_sharing_pools_is_kept() -> None:
    whole = {"name": "gpu", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "8"}}
    assert stack(
        whole, karpenter={"featureGates": {"nodeOverlay": True}}
    ).karpenter.feature_gates.node_overlay


@pytest.mark.parametrize(
    ("groups", "fragment"),
    [
        (
            [
                {"device-filter": "0x233010DE", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            ],
            "exactly one device group with devices: all and no device-filter",
        ),
        (
            [
                {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                {"devices": [4, 5, 6, 7], "mig-enabled": False},
            ],
            "exactly one device group with devices: all and no device-filter",
        ),
        (
            [{"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 3}}],
            "compute-instance profiles (1c.3g.40gb)",
        ),
    ],
    ids=["device-filter", "gpu-indexes", "compute-instances"],
)
def test_custom_configs_whose_devices_cannot_be_known_are_refused(
    groups: list[dict[str, Any]], fragment: str
) -> None:
    raw = {**MIG_POOL, "instanceFamilies": ["p5"], "mig": {"profile": "custom"}}
    strategy = "mixed" if len(groups) > 1 else "single"
    with pytest.raises(ConfigError) as caught:
        stack(raw, gpuOperator={"mig": {"strategy": strategy, "config": {"custom": groups}}})
    (problem,) = caught.value.problems
    assert str(problem).startswith("gpu-eks:nodePools[0].mig.profile = 'custom': ")
    assert fragment in str(problem)


def test_mixed_pools_with_several_mig_resources_need_one_gpu_model() -> None:
    raw = {**MIG_POOL, "mig": {"profile": "all-balanced"}}
    with pytest.raises(ConfigError) as caught:
        stack(raw, gpuOperator={"mig": {"strategy": "mixed"}})
    assert "split the pool per GPU model" in str(caught.value)


def _generated_configs() -> list[tuple[tuple[str, ...], str, str]]:
    """(instance types of a GPU model, generated MIG config, strategy), for every GPU model with MIG facts."""
    cases = []
    for model, profiles in MIG_PROFILE_INSTANCES.items():
        table = gpu_instance_types().values()
        names = tuple(sorted(it.name for it in table if (it.gpu_name, it.gpu_memory_mib) == model))
        for profile in ("all-" + p.replace("+", ".") for p in profiles):
            cases += [(names, profile, "single"), (names, profile, "mixed")]
        cases.append((names, "all-balanced", "mixed"))
    return cases


@pytest.mark.parametrize(("names", "profile", "strategy"), _generated_configs())
def test_every_generated_mig_config_tells_karpenter_what_each_node_offers(
    names: tuple[str, ...], profile: str, strategy: str
) -> None:
    """Overlay where the table is wrong, none where it is right (`all-1g.10gb.me` under single: 1 per GPU)."""
    assert names, "every GPU model with MIG facts has instance types"
    raw = {
        "name": "p",
        "instanceTypes": list(names),
        # In MIG devices (physical GPUs for all-balanced under mixed): room for an 8-GPU node of 7 each.
        "limits": {"nvidia.com/gpu": "64"},
        "mig": {"profile": profile},
    }
    parsed = stack(raw, gpuOperator={"mig": {"strategy": strategy}})
    overlays = [to_manifest(o) for o in pool_overlays(parsed.node_pools[0], parsed.gpu_operator)]
    capacity = capacity_by_instance_type("p", overlays)
    (model_key,) = {(gpu_instance_types()[n].gpu_name, gpu_instance_types()[n].gpu_memory_mib) for n in names}
    offered = MIG_PROFILE_INSTANCES[model_key]
    for name in names:
        it = gpu_instance_types()[name]
        devices = (
            balanced_mig_devices(model_key)
            if profile == "all-balanced"
            else {p: c for p, c in offered.items() if profile == "all-" + p.replace("+", ".")}
        )
        expected = (
            {"nvidia.com/gpu": str(it.gpu_count * sum(devices.values()))}
            if strategy == "single"
            else {"nvidia.com/gpu": "0"}
            | {f"nvidia.com/mig-{p.replace('+', '.')}": str(it.gpu_count * c) for p, c in devices.items()}
        )
        assert capacity.get(name, {"nvidia.com/gpu": str(it.gpu_count)}) == expected
    for overlay in overlays:
        assert validate(overlay) == []
