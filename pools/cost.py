"""What a configured pool, and a stack, may cost at once at list price (pure; no Pulumi).

Each pool's candidates and what one node of each counts against the pool's limits come from
`pools.capacity` (as Karpenter 1.14.1 counts them, NodeOverlays included); their prices from `facts.pricing`
(Karpenter's compiled us-east-1 on-demand table); the worst case and the cheapest fill of the GPU limit are
solved exactly by `pools.spend`.

How capacity types count: every node at its on-demand list price. A spot node is billed the spot price,
which EC2 caps at the on-demand price (the default maximum price, which Karpenter does not change), so a pool
that may use spot can still reach the worst case when spot prices rise or spot capacity runs out and
on-demand takes over. A `reserved` node runs in a capacity reservation that is billed whether or not
Karpenter uses it (On-Demand Capacity Reservations at the on-demand price; Capacity Blocks paid up front):
the worst case counts such nodes at on-demand price like any other, and the reservations themselves, which
exist apart from the pool, are not in it.

`synth cost` reports these figures, the stack's `cost.maxWorstCaseUsdPerHour` caps their total, the README's
"What it costs" is generated from them; `pools.declared` computes the same from the declared NodePools and
NodeOverlays (for `synth plan` and the policy pack), and the tests check that both agree.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from config.gpu_operator import GpuOperatorConfig
from config.node_pools import NodePoolConfig
from facts.pricing import on_demand_prices
from pools.capacity import capacities_counted_in, pool_limits, written_limits
from pools.sharing import gpu_limit_units
from pools.spend import NodeMix, PoolSpend, pool_spend

__all__ = ["PoolCost", "StackCost", "pool_cost", "stack_cost"]


@dataclass(frozen=True)
class PoolCost:
    """A pool's spend at its limits, with what a reader needs beside the figures."""

    kind: str
    """`gpu` or `cpu`."""
    capacity_types: tuple[str, ...]
    """What the pool may launch: `spot`, `on-demand`, `reserved` (all counted at on-demand price)."""
    written_limits: Mapping[str, str]
    """The limits as the configuration writes them (`cpu`, `memory`, `nvidia.com/gpu`)."""
    gpu_unit: str
    """What `limits.nvidia.com/gpu` counts: `GPUs`, `time-slices` or `MIG devices` (`GPUs` on CPU pools)."""
    spend: PoolSpend

    @property
    def pool(self) -> str:
        return self.spend.pool

    @property
    def worst_case(self) -> NodeMix | None:
        return self.spend.worst_case


@dataclass(frozen=True)
class StackCost:
    """Every pool of a stack and their total."""

    pools: tuple[PoolCost, ...]

    @property
    def bounded(self) -> bool:
        """Whether every pool has a finite worst case over its priced candidates."""
        return all(p.spend.bounded and p.worst_case is not None for p in self.pools)

    @property
    def worst_case_usd_per_hour(self) -> Decimal:
        """The sum of the pools' worst cases (each pool's limits are its own, so they add up)."""
        return sum((p.worst_case.usd_per_hour for p in self.pools if p.worst_case), Decimal(0))

    @property
    def worst_case_usd_per_month(self) -> Decimal:
        return sum((p.worst_case.usd_per_month for p in self.pools if p.worst_case), Decimal(0))


def pool_cost(pool: NodePoolConfig, gpu_operator: GpuOperatorConfig, *, overlays: bool = True) -> PoolCost:
    """The worst case and cheapest fill of one pool (`overlays`: whether its NodeOverlays are declared,
    `karpenter.gpuSharingOverlays`). Raises `MigProfileError` as `pools.capacity.node_capacities`."""
    units = gpu_limit_units(pool, gpu_operator, overlays=overlays)
    return PoolCost(
        kind=pool.kind,
        capacity_types=pool.capacity_types,
        written_limits=written_limits(pool),
        gpu_unit=units.unit,
        spend=pool_spend(
            pool.name, capacities_counted_in(pool, units), pool_limits(pool), on_demand_prices()
        ),
    )


def stack_cost(
    pools: Sequence[NodePoolConfig], gpu_operator: GpuOperatorConfig, *, overlays: bool = True
) -> StackCost:
    """Every pool's spend (GPU and CPU pools alike: both are billed)."""
    return StackCost(tuple(pool_cost(p, gpu_operator, overlays=overlays) for p in pools))
