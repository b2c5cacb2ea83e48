"""What a node counts against its pool's limits (`pools.capacity`), recomputed from other facts."""

from decimal import Decimal
from typing import Any

from config.stack import StackConfig, parse_stack_config
from facts.instance_types import instance_types
from pools.capacity import NodeCapacity, minimal_nodes, node_capacities, pool_limits
from synth.runner import stack_config
from tests.helpers import config

MIB = 1024 * 1024


def stack(*pools: dict[str, Any]) -> StackConfig:
    return parse_stack_config(config(nodePools=list(pools)))


def committed(name: str) -> StackConfig:
    return parse_stack_config(stack_config(name))


def test_memory_capacity_is_allocatable_plus_what_the_al2023_kubelet_reserves() -> None:
    # The reference's allocatable memory is the capacity less kube-reserved (11 MiB a pod + 255 MiB) and the
    # 100 MiB hard eviction threshold (aws/karpenter-provider-aws@c88abbbad455
    # pkg/providers/instancetype/types.go kubeReservedResources, evictionThreshold): a second derivation of
    # the capacity Karpenter counts against limits.memory, from the allocatable column.
    wrong = [
        it.name
        for it in instance_types().values()
        if it.memory_capacity != it.memory + (11 * it.max_pods + 255 + 100) * MIB
    ]
    assert len(instance_types()) > 1000
    assert wrong == []


def test_a_time_sliced_node_counts_its_slices_against_the_gpu_limit() -> None:
    dev = committed("dev")
    (pool,) = dev.gpu_pools
    counts = {c.instance_type: c for c in node_capacities(pool, dev.gpu_operator)}
    # g6.xlarge: 4 vCPUs, 16 GiB, one L4 time-sliced 4 ways.
    assert counts["g6.xlarge"].gpus == 1
    assert counts["g6.xlarge"].counts["nvidia.com/gpu"] == 4
    assert counts["g6.xlarge"].counts["cpu"] == 4
    assert counts["g6.xlarge"].counts["memory"] == (16384 - 1229) * MIB  # 7.5 % of 16384 MiB, rounded up
    # Without the NodeOverlays Karpenter's own table counts whole GPUs.
    without = node_capacities(pool, dev.gpu_operator, overlays=False)
    assert {c.counts["nvidia.com/gpu"] for c in without} == {1}


def test_a_pool_counts_only_the_instance_types_it_may_launch() -> None:
    prod = committed("prod")
    training = next(p for p in prod.gpu_pools if p.name == "gpu-training")
    capacities = node_capacities(training, prod.gpu_operator)
    assert {c.instance_type for c in capacities} == {"p4d.24xlarge", "p5.48xlarge"}
    assert {c.counts["nvidia.com/gpu"] for c in capacities} == {8}
    assert pool_limits(training) == {
        "cpu": Decimal(1536),
        "memory": Decimal(16 * 1024**4),
        "nvidia.com/gpu": Decimal(64),
    }


def test_minimal_nodes_keep_one_of_each_shape_that_nothing_undercuts() -> None:
    def node(name: str, cpu: int, gpu: int) -> NodeCapacity:
        return NodeCapacity(
            name, gpu, {"cpu": Decimal(cpu), "memory": Decimal(0), "nvidia.com/gpu": Decimal(gpu)}
        )

    small, wide, same, large = node("a", 4, 1), node("b", 48, 4), node("c", 4, 1), node("d", 8, 2)
    assert minimal_nodes([small, wide, same, large], ["cpu", "nvidia.com/gpu"]) == (small,)
    # On cpu alone or with a resource where they trade off, more than one survives.
    many = node("e", 2, 8)
    assert minimal_nodes([small, many, large], ["cpu", "nvidia.com/gpu"]) == (small, many)


def test_a_cpu_pool_counts_no_gpus() -> None:
    config = stack({"name": "burst", "kind": "cpu", "instanceFamilies": ["m7i"], "limits": {"cpu": "64"}})
    capacities = node_capacities(config.node_pools[0], config.gpu_operator)
    assert capacities
    assert all(c.gpus == 0 and c.counts["nvidia.com/gpu"] == 0 for c in capacities)
