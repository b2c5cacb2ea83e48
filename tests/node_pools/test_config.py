"""nodePools config: mistakes that would cost money or never work are refused, naming the key."""

from typing import Any

import pytest

from config.errors import ConfigError
from config.kubernetes import GPU_TAINT
from config.node_pools import NodePoolConfig
from config.stack import parse_stack_config
from tests.helpers import config, run_failing

GPU_POOL: dict[str, Any] = {
    "name": "gpu-inference",
    "instanceFamilies": ["g5", "g6"],
    "capacityTypes": ["spot", "on-demand"],
    "limits": {"cpu": "256", "memory": "1Ti", "nvidia.com/gpu": "16"},
}


def pool(**changes: Any) -> dict[str, Any]:
    return {**GPU_POOL, **changes}


def problems(*pools: dict[str, Any], **sections: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(config(nodePools=list(pools), **sections))
    return [str(p) for p in caught.value.problems]


def test_a_gpu_pool_gets_safe_defaults() -> None:
    parsed = parse_stack_config(config(nodePools=[GPU_POOL])).node_pools[0]
    assert parsed.effective_taints == (GPU_TAINT,)
    assert parsed.ami == "al2023@v20260714"
    assert parsed.expire_after == "336h"
    assert parsed.disruption.consolidate_after == "5m"
    assert parsed.root_volume.size_gib == 200
    assert parsed.root_volume.type == "gp3"
    assert {it.family for it in parsed.candidates()} == {"g5", "g6"}


def test_a_cpu_pool_has_no_gpu_taint() -> None:
    parsed = NodePoolConfig.model_validate({"name": "burst", "kind": "cpu", "limits": {"cpu": "64"}})
    assert parsed.effective_taints == ()


@pytest.mark.parametrize(
    ("bad_pool", "expected"),
    [
        (
            pool(architecture="arm64", instanceFamilies=["p5"]),
            "gpu-eks:nodePools[0]: architecture arm64 contradicts instance families p5 (amd64 only); "
            "the only arm64 instances with NVIDIA GPUs are g5g",
        ),
        (
            pool(instanceFamilies=["g5"], gpuNames=["h100"]),
            "gpu-eks:nodePools[0]: these requirements match no NVIDIA GPU instance type",
        ),
        (
            pool(instanceFamilies=["g6"], gpuCount={"min": 16}),
            "gpu-eks:nodePools[0]: these requirements match no NVIDIA GPU instance type",
        ),
        (
            pool(instanceFamilies=["g9"]),
            "gpu-eks:nodePools[0]: g9: not NVIDIA GPU instance families, types or GPU names",
        ),
        (
            pool(limits={"cpu": "256"}),
            "gpu-eks:nodePools[0]: a GPU pool needs limits.nvidia.com/gpu: without it GPU spend has no cap",
        ),
        (
            pool(disruption={"consolidationPolicy": "WhenEmpty"}),
            "gpu-eks:nodePools[0].disruption: consolidateAfter is required in a disruption block",
        ),
        (
            pool(
                instanceFamilies=["p5"],
                mig={"profile": "all-1g.10gb"},
                taints=[{"key": "gpu-eks.io/mig-pending", "value": "true"}],
            ),
            "gpu-eks:nodePools[0]: taint gpu-eks.io/mig-pending is in both taints and startupTaints",
        ),
        (
            pool(startupTaints=[{"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"}]),
            "gpu-eks:nodePools[0].startupTaints[0].key = 'node.cilium.io/agent-not-ready': nothing in the "
            "stack removes this taint, so Karpenter would never initialize the nodes",
        ),
        (
            pool(startupTaints=[{"key": "gpu-eks.io/mig-pending", "value": "true"}]),
            "gpu-eks:nodePools[0].startupTaints[0].key = 'gpu-eks.io/mig-pending': the GPU node guard "
            "removes gpu-eks.io/mig-pending from MIG pools only, and this pool has no mig",
        ),
        (
            pool(labels={"nvidia.com/mig.config.state": "success"}),
            "gpu-eks:nodePools[0].labels: nvidia.com/mig.config.state: nvidia.com/ labels are set by gpu-eks",
        ),
        (
            pool(initializationTimeout="5m"),
            "gpu-eks:nodePools[0].initializationTimeout = '5m': must be at least 15m",
        ),
        (
            pool(disruption={"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "5m"}),
            "gpu-eks:nodePools[0].disruption.consolidationPolicy = 'WhenUnderutilized': "
            "WhenUnderutilized was renamed WhenEmptyOrUnderutilized in Karpenter v1",
        ),
        (
            pool(disruption={"consolidateAfter": "5m", "expireAfter": "720h"}),
            "gpu-eks:nodePools[0].disruption.expireAfter = '720h': moved out of disruption in Karpenter v1",
        ),
        (
            pool(nodeClassRef={"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass"}),
            "gpu-eks:nodePools[0].nodeClassRef: is derived by gpu-eks "
            "(in Karpenter v1 it is {group, kind, name})",
        ),
        (
            pool(capacityTypes=["reserved"]),
            "gpu-eks:nodePools[0]: capacityTypes has reserved but no capacityReservations",
        ),
        (
            pool(ami="al2023@v20261101x"),
            "gpu-eks:nodePools[0].ami = 'al2023@v20261101x': must be an AMI alias",
        ),
        (pool(ami="al2@latest"), "gpu-eks:nodePools[0].ami = 'al2@latest': must be an AMI alias"),
        (pool(expireAfter="14d"), "gpu-eks:nodePools[0].expireAfter = '14d': must be a duration"),
        (
            pool(disruption={"consolidateAfter": "5 minutes"}),
            "gpu-eks:nodePools[0].disruption.consolidateAfter = '5 minutes': must be a duration such as 30s, "
            "5m or 336h (units s, m, h), or Never",
        ),
        (
            pool(rootVolume={"throughput": 1000, "iops": 3000}),
            "gpu-eks:nodePools[0].rootVolume: gp3 throughput may be at most IOPS/4",
        ),
        (
            pool(disruption={"consolidateAfter": "5m", "budgets": [{"nodes": "0", "schedule": "0 9 * * *"}]}),
            "gpu-eks:nodePools[0].disruption.budgets[0]: schedule and duration must be set together",
        ),
        (
            pool(instanceFamilies=["g5"], efa=True, zone="us-west-2a", instanceTypes=["g5.xlarge"]),
            "gpu-eks:nodePools[0]: these requirements match no NVIDIA GPU instance type",
        ),
        (
            pool(mig={"profile": "all-1g.10gb"}),
            "gpu-eks:nodePools[0].mig.profile = 'all-1g.10gb': A10G GPUs (g5) and L4 GPUs (g6) do not "
            "support MIG, and GPU pool 'gpu-inference' may launch them",
        ),
        (
            {"name": "burst", "kind": "cpu", "gpuNames": ["l4"], "limits": {"cpu": "64"}},
            "gpu-eks:nodePools[0]: gpuNames: GPU-pool settings, not allowed on a CPU pool (kind: cpu)",
        ),
        ({"name": "burst", "kind": "cpu"}, "gpu-eks:nodePools[0]: a CPU pool needs limits.cpu"),
        (
            {"name": "burst", "kind": "cpu", "efa": True, "limits": {"cpu": "64"}},
            "gpu-eks:nodePools[0]: efa: GPU-pool settings, not allowed on a CPU pool (kind: cpu)",
        ),
    ],
)
def test_costly_or_impossible_pools_are_refused(bad_pool: dict[str, Any], expected: str) -> None:
    found = problems(bad_pool)
    assert len(found) == 1, found
    assert found[0].startswith(expected), found[0]


def test_duplicate_pool_names_are_refused() -> None:
    found = problems(GPU_POOL, pool(instanceFamilies=["g6e"]))
    assert found == [
        "gpu-eks:nodePools[1].name = 'gpu-inference': pool name is already used by nodePools[0]; "
        "names must be unique"
    ]


def test_g5g_is_the_arm64_gpu_family() -> None:
    parsed = parse_stack_config(config(nodePools=[pool(architecture="arm64", instanceFamilies=["g5g"])]))
    assert {it.arch for it in parsed.node_pools[0].candidates()} == {"arm64"}


def test_efa_restricts_candidates_to_efa_capable_types() -> None:
    parsed = parse_stack_config(
        config(nodePools=[pool(instanceFamilies=["p4d", "p5"], efa=True, zone="us-west-2a")])
    )
    assert all(it.efa_interfaces > 0 for it in parsed.node_pools[0].candidates())


@pytest.mark.parametrize(
    "bad_pool",
    [
        pool(architecture="arm64", instanceFamilies=["p5"]),
        pool(limits={"cpu": "1"}),
        pool(disruption={"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "5m"}),
    ],
)
def test_nothing_is_registered_for_a_bad_pool(bad_pool: dict[str, Any]) -> None:
    error, monitor = run_failing(nodePools=[bad_pool])
    assert isinstance(error, ConfigError)
    assert "gpu-eks:nodePools[0]" in str(error)
    assert monitor.registrations == []


# --- EFA: one subnet, and a placement group ---------------------------------------------------------------

EFA_POOL = pool(
    name="gpu-training",
    instanceFamilies=["p4d", "p5"],
    gpuCount={"min": 8},
    efa=True,
    limits={"nvidia.com/gpu": "16"},
)
EXISTING_VPC = {
    "existing": {
        "vpcId": "vpc-0123456789abcdef0",
        "privateSubnetIds": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
    }
}


@pytest.mark.parametrize(
    ("bad_pool", "sections", "expected"),
    [
        (
            EFA_POOL,
            {},
            "gpu-eks:nodePools[0].zone: an EFA pool needs zone: EFA traffic stays within one subnet",
        ),
        (
            EFA_POOL,
            {"network": EXISTING_VPC},
            "gpu-eks:nodePools[0].subnetId: an EFA pool needs subnetId (one of "
            "network.existing.privateSubnetIds)",
        ),
        (
            {**EFA_POOL, "zone": "us-east-1a"},
            {},
            "gpu-eks:nodePools[0].zone = 'us-east-1a': is not an availability zone of the stack's region "
            "us-west-2 (those are named us-west-2a, us-west-2b, ...",
        ),
        (
            {**EFA_POOL, "zone": "us-west-2-lax-1a"},
            {},
            "gpu-eks:nodePools[0].zone = 'us-west-2-lax-1a': must be an availability zone name such as "
            "us-west-2b",
        ),
        (
            {**EFA_POOL, "zone": "us-west-2a"},
            {"network": EXISTING_VPC},
            "gpu-eks:nodePools[0].zone = 'us-west-2a': the stack uses an existing VPC, whose subnets in that "
            "zone it does not know; set subnetId",
        ),
        (
            {**EFA_POOL, "subnetId": "subnet-0aaaaaaaaaaaaaaaa"},
            {},
            "gpu-eks:nodePools[0].subnetId = 'subnet-0aaaaaaaaaaaaaaaa': the stack creates the VPC, whose "
            "subnet ids do not exist yet; set zone instead",
        ),
        (
            {**EFA_POOL, "subnetId": "subnet-0cccccccccccccccc"},
            {"network": EXISTING_VPC},
            "gpu-eks:nodePools[0].subnetId = 'subnet-0cccccccccccccccc': is not one of "
            "network.existing.privateSubnetIds (subnet-0aaaaaaaaaaaaaaaa, subnet-0bbbbbbbbbbbbbbbb)",
        ),
        (
            {**EFA_POOL, "zone": "us-west-2a", "subnetId": "subnet-0aaaaaaaaaaaaaaaa"},
            {},
            "gpu-eks:nodePools[0].subnetId = 'subnet-0aaaaaaaaaaaaaaaa': zone is set too",
        ),
        (
            pool(placementGroup=True, zone="us-west-2a"),
            {},
            "gpu-eks:nodePools[0].placementGroup = true: needs efa: true",
        ),
    ],
)
def test_an_efa_pool_keeps_to_one_subnet_and_only_efa_pools_get_a_placement_group(
    bad_pool: dict[str, Any], sections: dict[str, Any], expected: str
) -> None:
    found = problems(bad_pool, **sections)
    assert len(found) == 1, found
    assert found[0].startswith(expected), found[0]


def test_a_zone_the_new_vpc_does_not_span_is_refused_before_any_resource() -> None:
    """The region has four zones (the mocks answer us-west-2a to d, as AWS does); a new VPC spans the first
    three. A pool pinned to the fourth would have no subnet to launch into."""
    error, monitor = run_failing(nodePools=[{**EFA_POOL, "zone": "us-west-2d"}])
    assert isinstance(error, ConfigError)
    (problem,) = error.problems
    assert str(problem) == (
        "gpu-eks:nodePools[0].zone = 'us-west-2d': the VPC this stack creates spans us-west-2a, us-west-2b, "
        "us-west-2c (network.availabilityZones: 3, the first of the region's zones in order); choose one of "
        "them"
    )
    assert monitor.registrations == []


def test_efa_pools_in_an_existing_vpc_take_a_subnet() -> None:
    parsed = parse_stack_config(
        config(
            nodePools=[{**EFA_POOL, "subnetId": "subnet-0bbbbbbbbbbbbbbbb", "placementGroup": True}],
            network=EXISTING_VPC,
        )
    )
    assert parsed.node_pools[0].subnet_id == "subnet-0bbbbbbbbbbbbbbbb"
