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
from facts.karpenter_lifecycle import DELETING_NODES_COUNT_AGAINST_LIMITS, EXPIRY_HONOURS_BUDGETS
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
    expire_after: str = "Never"
    """The pool's `expireAfter` (a duration or `Never`)."""
    termination_grace_period: str | None = None
    """The pool's `terminationGracePeriod`: the longest a node drains (None: a blocked drain never ends)."""

    @property
    def pool(self) -> str:
        return self.spend.pool

    @property
    def worst_case(self) -> NodeMix | None:
        return self.spend.worst_case

    @property
    def while_replaced_usd_per_hour(self) -> Decimal | None:
        """The most the pool bills while all its nodes are replaced at once, None where that cannot happen or
        the worst case is unknown.

        Expiry replaces nodes launched together, together (budgets do not hold it back), and Karpenter does
        not count draining nodes against the limits: so the draining generation (at most the worst case, the
        limits admitted it) and its replacements (again at most the worst case) bill side by side until the
        drain ends. Without expiry, only the disruption budgets' share drains at once (not computed here)."""
        worst = (
            self.worst_case.usd_per_hour
            if self.spend.proven and self.worst_case
            else self.spend.worst_case_bound
        )
        if worst is None or self.expire_after == "Never" or EXPIRY_HONOURS_BUDGETS:
            return None
        draining = Decimal(0) if DELETING_NODES_COUNT_AGAINST_LIMITS else worst
        return worst + draining


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

    @property
    def while_replaced_usd_per_hour(self) -> Decimal:
        """What the stack may bill at once while every pool that expires its nodes replaces them all: those
        pools' `while_replaced_usd_per_hour`, the others' worst case."""
        return sum(
            (
                p.while_replaced_usd_per_hour or (p.worst_case.usd_per_hour if p.worst_case else Decimal(0))
                for p in self.pools
            ),
            Decimal(0),
        )


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
        expire_after=pool.expire_after,
        termination_grace_period=pool.termination_grace_period,
    )


def stack_cost(
    pools: Sequence[NodePoolConfig], gpu_operator: GpuOperatorConfig, *, overlays: bool = True
) -> StackCost:
    """Every pool's spend (GPU and CPU pools alike: both are billed)."""
    return StackCost(tuple(pool_cost(p, gpu_operator, overlays=overlays) for p in pools))
