"""`python -m synth cost <stack>`: what each pool of a stack may cost at once, before `pulumi up`.

Reads the stack's configuration (validated as `pulumi up` would: a refused configuration is printed as
`pulumi preview` prints it) and reports, per pool, the worst case of `pools.cost` (the most expensive set of
nodes its limits admit, USD per hour and per 730-hour month, and the node mix reaching it), the cheapest fill
of its GPU limit beside it, what it bills while its nodes are replaced at once (Karpenter does not count
draining nodes against the limits), and the stack's total. Every figure is a us-east-1 on-demand list price
from Karpenter 1.14.1's compiled table (`facts.pricing`), which the report says wherever it shows one.
"""

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from config.stack import StackConfig
from facts.partitions import partition_of_region
from facts.pricing import HOURS_PER_MONTH, PRICE_REGION, price_table_source
from pools.cost import PoolCost, StackCost, stack_cost
from pools.spend import NodeMix

GIB = Decimal(1024**3)


def costs(config: StackConfig) -> StackCost:
    """The spend of every pool of a stack, with the NodeOverlays the stack declares."""
    return stack_cost(config.node_pools, config.gpu_operator, overlays=config.karpenter.gpu_sharing_overlays)


def usd(amount: Decimal) -> str:
    """`$1,234.57` (to the cent; the JSON carries the exact figure)."""
    return f"${amount:,.2f}"


def price_note(*regions: str) -> str:
    """Whose prices the figures are, for the stacks' regions."""
    where = "".join(
        f" In {region} they are the table Karpenter falls back to, not {region}'s own prices"
        + (
            f" (and {partition_of_region(region)} is another partition, with its own prices)."
            if partition_of_region(region) != "aws"
            else "."
        )
        for region in sorted(set(regions) - {PRICE_REGION})
    )
    return f"Prices: {price_table_source().label}.{where}"


def _totals(cost: PoolCost, mix: NodeMix) -> str:
    parts = []
    if cost.kind == "gpu":
        parts.append(f"{mix.totals.get('nvidia.com/gpu', Decimal(0)):,f} {cost.gpu_unit}")
    parts.append(f"{mix.totals.get('cpu', Decimal(0)):,f} vCPUs")
    if "memory" in mix.totals:
        parts.append(f"{mix.totals['memory'] / GIB:,.0f} GiB")
    return ", ".join(parts)


def _limits(cost: PoolCost) -> str:
    shown = {**cost.written_limits}
    if "nvidia.com/gpu" in shown and cost.gpu_unit != "GPUs":
        shown["nvidia.com/gpu"] += f" {cost.gpu_unit}"
    return ", ".join(f"{key} {value}" for key, value in shown.items()) or "none"


def pool_lines(cost: PoolCost) -> list[str]:
    """A pool's block of the text report."""
    spend = cost.spend
    kind = "GPU pool" if cost.kind == "gpu" else "CPU pool (not GPUs, billed all the same)"
    lines = [f"{cost.pool}: {kind}; {', '.join(cost.capacity_types)}; limits {_limits(cost)}"]
    if not spend.bounded:
        lines.append(
            f"  worst case     unbounded: {', '.join(spend.unbounded_by)} count against none of its limits, "
            "so the pool may launch any number of them; set a limit on cpu (and memory)"
        )
        return lines
    worst = spend.worst_case
    if worst is None:
        lines.append(f"  worst case     unknown: no candidate has a price ({', '.join(spend.unpriced)})")
        return lines
    lines.append(
        f"  worst case     {usd(worst.usd_per_hour)}/h, {usd(worst.usd_per_month)} a month: {worst} "
        f"({_totals(cost, worst)})"
    )
    if not spend.proven and spend.worst_case_bound is not None:
        lines.append(
            f"                 at most {usd(spend.worst_case_bound)}/h: the search stopped before it proved "
            "the mix above the most expensive"
        )
    if spend.cheapest_fill is not None:
        fill = spend.cheapest_fill
        lines.append(
            f"  cheapest fill  {usd(fill.usd_per_hour)}/h, {usd(fill.usd_per_month)} a month: {fill} "
            f"({_totals(cost, fill)})"
        )
    lines += _replacement_lines(cost)
    if spend.unpriced:
        lines.append(
            f"  not priced     {', '.join(spend.unpriced)}: us-east-1 has no list price for them; left out, "
            "so the figures above are a lower bound"
        )
    return lines


def _replacement_lines(cost: PoolCost) -> list[str]:
    """What the pool bills while its nodes are replaced, beside the worst case."""
    replaced = cost.while_replaced_usd_per_hour
    if replaced is None:
        return []
    grace = cost.termination_grace_period
    until = (
        f"for at most {grace} (terminationGracePeriod)"
        if grace is not None
        else "with no end in time (no terminationGracePeriod: a drain that a PodDisruptionBudget or a "
        "karpenter.sh/do-not-disrupt pod blocks never ends)"
    )
    return [
        f"  while replaced {usd(replaced)}/h {until}: expiry (expireAfter {cost.expire_after}) replaces "
        "nodes launched together at once, and draining nodes do not count against the limits, so their "
        "replacements run beside them"
    ]


def render_text(stack: str, region: str, cost: StackCost) -> str:
    """The report for a terminal."""
    lines = [
        f"Worst-case spend of {stack}: the most its pools' limits let Karpenter run at once, at on-demand "
        f"list price (USD; a month is {HOURS_PER_MONTH} hours); nodes being deleted do not count against the "
        "limits, so while nodes are replaced a pool bills more ('while replaced').",
        price_note(region),
        "",
    ]
    for pool in cost.pools:
        lines += [*pool_lines(pool), ""]
    if not cost.pools:
        lines += ["no node pools: Karpenter launches nothing", ""]
    total = "unbounded" if not cost.bounded else f"{usd(cost.worst_case_usd_per_hour)}/h"
    lines.append(
        f"Total: {total}"
        + (f", {usd(cost.worst_case_usd_per_month)} a month" if cost.bounded else "")
        + " (the pools' limits are their own, so their worst cases add up)"
    )
    if cost.bounded and cost.while_replaced_usd_per_hour != cost.worst_case_usd_per_hour:
        lines.append(
            f"While every pool that expires its nodes replaces them at once: "
            f"{usd(cost.while_replaced_usd_per_hour)}/h"
        )
    lines += [
        "",
        "Spot nodes count at the on-demand price: EC2 bills spot at most that (the default maximum price, "
        "which Karpenter keeps), and a pool falls back to on-demand when spot runs out. Reserved nodes count "
        "at on-demand price too; the capacity reservations themselves are billed apart from the pool. The "
        "cheapest fill is the cheapest set of nodes that reaches the most GPU units the limits admit.",
    ]
    return "\n".join(lines) + "\n"


def _money(amount: Decimal | None) -> float | None:
    return None if amount is None else float(amount)


def pool_json(cost: PoolCost) -> dict[str, Any]:
    """One pool of `--json`: `pool`, `worstCaseUsdPerHour`, `worstCaseNodes`, `cheapestFillUsdPerHour`, ..."""
    spend = cost.spend
    worst, fill = spend.worst_case, spend.cheapest_fill

    def nodes(mix: NodeMix | None) -> Mapping[str, int] | None:
        return None if mix is None else dict(mix.nodes)

    return {
        "pool": cost.pool,
        "kind": cost.kind,
        "capacityTypes": list(cost.capacity_types),
        "limits": dict(cost.written_limits),
        "gpuUnit": cost.gpu_unit if cost.kind == "gpu" else None,
        "bounded": spend.bounded,
        "exact": spend.exact,
        "worstCaseUsdPerHour": _money(worst.usd_per_hour if worst else None),
        "worstCaseUsdPerMonth": _money(worst.usd_per_month if worst else None),
        "worstCaseNodes": nodes(worst),
        "worstCaseAtMostUsdPerHour": _money(spend.worst_case_bound),
        "whileReplacedUsdPerHour": _money(cost.while_replaced_usd_per_hour),
        "terminationGracePeriod": cost.termination_grace_period,
        "cheapestFillUsdPerHour": _money(fill.usd_per_hour if fill else None),
        "cheapestFillUsdPerMonth": _money(fill.usd_per_month if fill else None),
        "cheapestFillNodes": nodes(fill),
        "unboundedBy": list(spend.unbounded_by),
        "unpriced": list(spend.unpriced),
    }


def render_json(cost: StackCost) -> str:
    """`[{"pool": ..., "worstCaseUsdPerHour": ..., "worstCaseNodes": {type: count}, ...}, ...]`."""
    return json.dumps([pool_json(p) for p in cost.pools], indent=2) + "\n"


def _while_replaced_cell(cost: PoolCost) -> str:
    replaced = cost.while_replaced_usd_per_hour
    if replaced is None:
        return "no expiry"
    grace = cost.termination_grace_period
    return f"{usd(replaced)}/h " + (f"for <= {grace}" if grace else "with no end in time")


def render_markdown(stacks: Mapping[str, StackCost]) -> str:
    """A table of every pool of the stacks (stack -> cost), for the README."""
    lines = [
        "| stack | pool | worst case | a month | node mix at the worst case | cheapest fill of the GPU "
        "limit | while its nodes are replaced |",
        "|---|---|---|---|---|---|---|",
    ]
    for stack, cost in stacks.items():
        for pool in cost.pools:
            worst, fill = pool.spend.worst_case, pool.spend.cheapest_fill
            if not pool.spend.bounded or worst is None:
                lines.append(f"| {stack} | {pool.pool} | unbounded | | | | |")
                continue
            cheapest = f"{usd(fill.usd_per_hour)}/h ({fill})" if fill else "no GPU limit"
            lines.append(
                f"| {stack} | {pool.pool} | {usd(worst.usd_per_hour)}/h | {usd(worst.usd_per_month)} | "
                f"{worst} | {cheapest} | {_while_replaced_cell(pool)} |"
            )
        total = f"{usd(cost.worst_case_usd_per_hour)}/h" if cost.bounded else "unbounded"
        month = usd(cost.worst_case_usd_per_month) if cost.bounded else ""
        replaced = f"**{usd(cost.while_replaced_usd_per_hour)}/h**" if cost.bounded else ""
        lines.append(f"| {stack} | **total** | **{total}** | **{month}** | | | {replaced} |")
    return "\n".join(lines) + "\n"
