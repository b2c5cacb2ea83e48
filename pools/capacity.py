"""What each node a pool may launch counts against the pool's limits, as Karpenter counts it (pure).

Karpenter launches a node only if, for every resource the NodePool's `spec.limits` names, the candidate
instance type's capacity fits under what is left of that limit (kubernetes-sigs/karpenter v1.14.1
`pkg/controllers/provisioning/scheduling/scheduler.go` `filterByRemainingResources`), and what is left is the
limit less the capacity of the pool's nodes and in-flight NodeClaims (`updateRemainingResources`,
`subtractMax`). The capacity it compares is the instance type's, not what is allocatable: vCPUs, the
instance's memory less the VM overhead (`facts.instance_types.InstanceType.memory_capacity`), and the GPU
resource the cap is written on, which on a pool that shares GPUs is what the NodeOverlays say the node will
advertise (`pools.sharing.gpu_limit_units`).

So the set of nodes a pool may hold at once is every multiset of its candidates whose summed capacity stays
within each limit: the feasible region of `synth cost`'s worst case, and what the pool-at-limit alert compares
the remaining headroom with.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from config.gpu_operator import GpuOperatorConfig
from config.node_pools import GpuUnits, NodePoolConfig
from facts.quantity import parse_quantity
from pools.sharing import gpu_limit_units

__all__ = [
    "NodeCapacity",
    "capacities_counted_in",
    "minimal_nodes",
    "node_capacities",
    "pool_limits",
    "written_limits",
]


@dataclass(frozen=True)
class NodeCapacity:
    """One instance type a pool may launch, and what a node of it counts against each of the pool's limits."""

    instance_type: str
    gpus: int
    """Physical GPUs (0 on a CPU pool)."""
    counts: Mapping[str, Decimal]
    """Resource a pool may limit (`cpu`, `memory`, `nvidia.com/gpu`) -> what one node counts against it:
    vCPUs, memory in bytes, and the units of `limits.nvidia.com/gpu` (GPUs, time-slices or MIG devices; 0 on a
    CPU pool)."""


def node_capacities(
    pool: NodePoolConfig, gpu_operator: GpuOperatorConfig, *, overlays: bool = True
) -> tuple[NodeCapacity, ...]:
    """Every instance type the pool may launch whose size the Karpenter reference knows, with its counts.

    `overlays`: whether the pool's NodeOverlays are declared (`karpenter.gpuSharingOverlays`); without them
    Karpenter counts a sharing pool's in-flight nodes by physical GPUs. Raises `MigProfileError` where a MIG
    pool's devices cannot be derived (config refuses such a pool first)."""
    return capacities_counted_in(pool, gpu_limit_units(pool, gpu_operator, overlays=overlays))


def capacities_counted_in(pool: NodePoolConfig, units: GpuUnits) -> tuple[NodeCapacity, ...]:
    """`node_capacities`, with the pool's GPUs counted in `units` (`pools.sharing.gpu_limit_units`), for a
    caller that needs the units too."""
    gpus = {it.name: it.gpu_count for it in pool.candidates()} if pool.kind == "gpu" else {}
    return tuple(
        NodeCapacity(
            instance_type=it.name,
            gpus=gpus.get(it.name, 0),
            counts={
                "cpu": Decimal(it.vcpus),
                "memory": it.memory_capacity,
                "nvidia.com/gpu": Decimal(units.per_instance.get(it.name, 0)),
            },
        )
        for it in pool.launchable()
    )


def written_limits(pool: NodePoolConfig) -> dict[str, str]:
    """The limits the pool sets, resource -> quantity as the configuration writes it."""
    written = {"cpu": pool.limits.cpu, "memory": pool.limits.memory, "nvidia.com/gpu": pool.limits.nvidia_gpu}
    return {resource: value for resource, value in written.items() if value is not None}


def pool_limits(pool: NodePoolConfig) -> dict[str, Decimal]:
    """The limits the pool sets, resource -> amount (in the units `NodeCapacity.counts` uses)."""
    return {resource: parse_quantity(value) for resource, value in written_limits(pool).items()}


def minimal_nodes(capacities: Iterable[NodeCapacity], resources: Iterable[str]) -> tuple[NodeCapacity, ...]:
    """The candidates no other candidate undercuts on every one of `resources` (the Pareto-minimal ones).

    Karpenter can still launch a node for the pool exactly while one of these fits under what is left of every
    limit: any other candidate is at least as large as one of them on each limited resource. One per distinct
    shape, in the order given."""
    names = tuple(resources)
    shapes: dict[tuple[Decimal, ...], NodeCapacity] = {}
    for capacity in capacities:
        shapes.setdefault(tuple(capacity.counts[r] for r in names), capacity)

    def undercut(a: tuple[Decimal, ...], b: tuple[Decimal, ...]) -> bool:
        return a != b and all(x <= y for x, y in zip(a, b, strict=True))

    return tuple(c for shape, c in shapes.items() if not any(undercut(other, shape) for other in shapes))
