"""What a pool's nodes may cost at once, solved exactly (pure; the standard library only).

A pool may hold any multiset of its candidate nodes whose summed capacity stays within each of its limits
(`pools.capacity`). Its **worst case** is the most expensive such multiset at list price: the integer program

    maximize sum_i price_i * x_i  subject to  sum_i count_ri * x_i <= limit_r (each limit r), x_i >= 0 whole

and its **cheapest fill** of the GPU limit is the cheapest multiset among those that reach the most GPU units
the limits admit (which is the GPU limit itself unless the cpu or memory limit, or the node sizes, stop
short of it): what the GPUs the cap allows cost at the least, beside what they may cost at the most.

Both are solved exactly with rational arithmetic by depth-first branch and bound whose bounds are the linear
relaxation (a small simplex: one row per limit), so a figure is the optimum, never an estimate; the tests
check it against scipy's `milp` (HiGHS) and against enumeration. A pool where some candidate counts against
none of the limits set is unbounded. The standard library only: the policy pack, which runs in its own
virtualenv, computes the same figures through `pools.declared`.
"""

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from math import ceil, floor, gcd, lcm
from typing import Protocol, TypeVar

from facts.pricing import HOURS_PER_MONTH

__all__ = ["Counted", "NodeMix", "PoolSpend", "maximize", "pool_spend"]

GPU = "nvidia.com/gpu"


class Counted(Protocol):
    """A node a pool may launch and what it counts against each of the pool's limits
    (`pools.capacity.NodeCapacity`, `pools.declared.DeclaredNode`)."""

    @property
    def instance_type(self) -> str: ...

    @property
    def counts(self) -> Mapping[str, Decimal]: ...


@dataclass(frozen=True)
class NodeMix:
    """A multiset of nodes and what it costs and counts."""

    nodes: Mapping[str, int]
    """Instance type -> how many, by name."""
    usd_per_hour: Decimal
    """Its on-demand list price per hour, exact."""
    totals: Mapping[str, Decimal]
    """Limited resource -> what the nodes count against it together."""

    @property
    def usd_per_month(self) -> Decimal:
        """Per 730-hour month (`facts.pricing.HOURS_PER_MONTH`)."""
        return self.usd_per_hour * HOURS_PER_MONTH

    def __str__(self) -> str:
        """`8 x p5.48xlarge, 2 x p4d.24xlarge` (`no node` for none)."""
        return ", ".join(f"{count} x {name}" for name, count in self.nodes.items()) or "no node"


@dataclass(frozen=True)
class PoolSpend:
    """A pool's worst case and its cheapest fill of the GPU limit."""

    pool: str
    limits: Mapping[str, Decimal]
    """The limits the pool sets (resource -> amount), in the units the counts use."""
    worst_case: NodeMix | None
    """The most expensive set of nodes the limits admit; None when unbounded or nothing is priced."""
    cheapest_fill: NodeMix | None
    """The cheapest set reaching the most GPU units the limits admit; None without a GPU limit."""
    worst_case_bound: Decimal | None = None
    """The most the pool may cost per hour: the worst case's price when `proven`, else a proven bound."""
    proven: bool = True
    """Whether the search proved both figures optimal (it stops after `STEPS` relaxations)."""
    unbounded_by: tuple[str, ...] = ()
    """Candidates that count against none of the limits set: the pool may hold any number of them."""
    unpriced: tuple[str, ...] = ()
    """Candidates the price table has no price for: left out, so the figures are a lower bound."""

    @property
    def bounded(self) -> bool:
        return not self.unbounded_by

    @property
    def exact(self) -> bool:
        """Whether the worst case is the pool's true worst case: bounded, every candidate priced, proven."""
        return self.bounded and not self.unpriced and self.worst_case is not None and self.proven


def worst_cases(spends: Iterable[PoolSpend]) -> tuple[Decimal, str]:
    """What `spends` may cost per hour together (each pool's proven bound), and the pools that make it, the
    dearest first: `gpu-training up to $440.32/h (8 x p5.48xlarge); ...` (what a refused cap names)."""
    spends = sorted(spends, key=lambda s: -(s.worst_case_bound or 0))
    total = sum((s.worst_case_bound or Decimal(0) for s in spends), Decimal(0))
    listed = "; ".join(
        f"{s.pool} up to ${s.worst_case_bound:,.2f}/h ({s.worst_case})"
        for s in spends
        if s.worst_case is not None and s.worst_case_bound is not None
    )
    return total, listed


def pool_spend(
    pool: str,
    nodes: Sequence[Counted],
    limits: Mapping[str, Decimal],
    prices: Mapping[str, Decimal],
    gpu: str = GPU,
) -> PoolSpend:
    """The worst case and cheapest fill of a pool that may launch `nodes` under `limits`, at `prices`
    (instance type -> USD per hour); `gpu`: the limited resource whose units the cheapest fill reaches."""
    unbounded = tuple(sorted(n.instance_type for n in nodes if all(n.counts.get(r, 0) == 0 for r in limits)))
    unpriced = tuple(sorted({n.instance_type for n in nodes if n.instance_type not in prices}))
    priced = [n for n in nodes if n.instance_type in prices]
    if unbounded or not priced:
        return PoolSpend(pool, dict(limits), None, None, unbounded_by=unbounded, unpriced=unpriced)
    names = list(limits)
    counts = [[Fraction(n.counts.get(r, 0)) for r in names] for n in priced]
    bounds = [Fraction(limits[r]) for r in names]
    price = [Fraction(prices[n.instance_type]) for n in priced]
    worst = maximize(price, counts, bounds)
    assert worst is not None  # every candidate counts against some limit
    cheapest = None
    if gpu in limits:
        # Lexicographic: most GPU units first, then least price. GPU units are whole and any two sets
        # differ in price by less than the worst case's bound, so weighing a unit above that bound and
        # maximizing (units x weight - price) solves both at once.
        weight = worst.bound + 1
        row = names.index(gpu)
        cheapest = maximize([c[row] * weight - p for c, p in zip(counts, price, strict=True)], counts, bounds)
    return PoolSpend(
        pool,
        dict(limits),
        _mix(priced, worst.counts, prices, names),
        _mix(priced, cheapest.counts, prices, names) if cheapest is not None else None,
        worst_case_bound=_usd_up(worst.bound),
        proven=worst.proven and (cheapest is None or cheapest.proven),
        unpriced=unpriced,
    )


def _usd_up(value: Fraction) -> Decimal:
    """A USD amount rounded up to the table's precision (a millionth of a dollar)."""
    return Decimal(ceil(value * 10**6)) / 10**6


def _mix(
    nodes: Sequence[Counted], solution: Sequence[int], prices: Mapping[str, Decimal], names: Sequence[str]
) -> NodeMix:
    chosen = {n.instance_type: x for n, x in zip(nodes, solution, strict=True) if x}
    by_name = {n.instance_type: n for n in nodes}
    return NodeMix(
        nodes=dict(sorted(chosen.items())),
        usd_per_hour=sum((prices[t] * x for t, x in chosen.items()), Decimal(0)),
        totals={
            r: sum((by_name[t].counts.get(r, Decimal(0)) * x for t, x in chosen.items()), Decimal(0))
            for r in names
        },
    )


# --- The integer program ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Solution:
    """How many of each item, what they are worth, and the most any solution could be worth."""

    counts: tuple[int, ...]
    value: Fraction
    bound: Fraction
    """Equal to `value` when the search proved it optimal; above it when the search ran out of `STEPS`."""

    @property
    def proven(self) -> bool:
        return self.bound == self.value


STEPS = 20_000
"""Relaxations the search may solve (a few seconds) before it stops with the best solution found and a
proven upper bound. The committed pools need a few hundred; mixes of many families with odd limits can
need more, and a program that stalls on `pulumi up` helps nobody."""


def maximize(
    values: Sequence[Fraction], counts: Sequence[Sequence[Fraction]], limits: Sequence[Fraction]
) -> Solution | None:
    """The whole x >= 0 maximizing sum(values[i] * x[i]) with sum(counts[i][r] * x[i]) <= limits[r] for
    every r, or None when the problem is unbounded (an item of positive value that counts against no
    limit). Items of no positive value are never chosen. Exact (rational arithmetic); among several optima,
    the first the search meets (deterministic)."""
    n = len(values)
    if any(v > 0 and all(c == 0 for c in counts[i]) for i, v in enumerate(values)):
        return None
    usable = [
        i
        for i in range(n)
        if values[i] > 0
        and all(c <= b for c, b in zip(counts[i], limits, strict=True))
        and not _dominated(i, values, counts)
    ]
    solution = [0] * n
    if not usable:
        return Solution(tuple(solution), Fraction(0), Fraction(0))
    best, value, bound = _branch_and_bound([values[i] for i in usable], [counts[i] for i in usable], limits)
    for position, i in enumerate(usable):
        solution[i] = best[position]
    # Of several optima, one of a single instance type reads best (64 x g5.4xlarge, not a mix of five).
    for i in usable:
        most = min(floor(b / c) for b, c in zip(limits, counts[i], strict=True) if c > 0)
        if values[i] * most == value:
            solution = [most if j == i else 0 for j in range(n)]
            break
    return Solution(tuple(solution), value, bound)


def _dominated(i: int, values: Sequence[Fraction], counts: Sequence[Sequence[Fraction]]) -> bool:
    """Whether k >= 1 copies of another item are worth at least as much as item `i` and count no more
    against any limit (of identical items the first stays): any solution using `i` is matched by one using
    those copies instead. k > 1 takes out the larger sizes of a family priced in proportion to its smallest
    (r8i.xlarge is two r8i.large), which would otherwise make the search try every way to mix them."""
    for j in range(len(values)):
        if j == i:
            continue
        ratios = [a / b for a, b in zip(counts[i], counts[j], strict=True) if b > 0]
        copies = floor(min(ratios)) if ratios else 0
        if copies < 1 or values[j] * copies < values[i]:
            continue
        if all(b * copies <= a for a, b in zip(counts[i], counts[j], strict=True)):
            same = copies == 1 and values[j] == values[i] and list(counts[j]) == list(counts[i])
            if not same or j < i:
                return True
    return False


def _branch_and_bound(
    values: Sequence[Fraction], counts: Sequence[Sequence[Fraction]], limits: Sequence[Fraction]
) -> tuple[list[int], Fraction, Fraction]:
    """Depth-first over the items, most efficient first (at the relaxation's shadow prices): how many of
    item k, given the counts of the items before it. The bound of a count x is x of item k plus the linear
    relaxation over the items after it in what is left; it is concave in x (a linear program's value is
    concave in its right-hand side), so the search starts at its peak (found by bisection) and walks down
    both sides only while the bound beats the best whole solution found. Returns the best solution, its
    value and the proven bound (the root relaxation's value if the search ran out of steps)."""
    n = len(values)
    usable = [
        b - b % d if d else b
        for b, d in zip(limits, (_divisor([c[r] for c in counts]) for r in range(len(limits))), strict=True)
    ]
    root = _lp(values, counts, usable)
    order = sorted(range(n), key=lambda i: (-_efficiency(values[i], counts[i], root.duals), -values[i], i))
    # Every solution is worth a multiple of this: a better one beats the best by at least as much.
    step = Fraction(1, lcm(*(v.denominator for v in values)))
    search = _Search([values[i] for i in order], [counts[i] for i in order], step, best=(0,) * n)
    try:
        search.visit(0, list(limits), Fraction(0), [])
        bound = search.best_value
    except _OutOfSteps:
        bound = root.value
    best = [0] * n
    for position, i in enumerate(order):
        best[i] = search.best[position]
    return best, search.best_value, bound


class _OutOfSteps(Exception):
    pass


def _efficiency(value: Fraction, counts: Sequence[Fraction], duals: Sequence[Fraction]) -> Fraction:
    """Value per unit of what the item uses up, priced at the relaxation's shadow prices (1 for an item the
    relaxation uses, less for the others)."""
    used = _dot(duals, counts)
    return value / used if used else Fraction(0)


@dataclass
class _Search:
    values: Sequence[Fraction]
    counts: Sequence[Sequence[Fraction]]
    step: Fraction
    best_value: Fraction = Fraction(0)
    best: tuple[int, ...] = ()
    steps: int = STEPS

    def __post_init__(self) -> None:
        self.float_values = [float(v) for v in self.values]
        self.float_counts = [[float(c) for c in counts] for counts in self.counts]
        # What the items from k on count against limit r is always a multiple of their counts' greatest
        # common divisor: so is what they can use of a limit (333 time-slices of 7 leave 329 usable).
        rows = range(len(self.counts[0]) if self.counts else 0)
        self.divisors = [
            [_divisor([c[r] for c in self.counts[k:]]) for r in rows] for k in range(len(self.counts) + 1)
        ]

    def beats(self, bound: float) -> bool:
        """Whether a subtree of this bound (an upper bound, see `_relaxed_bound`) may hold a solution better
        than the best one."""
        return bound >= float(self.best_value + self.step)

    def visit(self, k: int, remaining: list[Fraction], value: Fraction, chosen: list[int]) -> None:
        if k == len(self.values):
            if value > self.best_value:
                self.best_value, self.best = value, tuple(chosen)
            return
        counts = self.counts[k]
        most = min(floor(b / c) for b, c in zip(remaining, counts, strict=True) if c > 0)
        bounds: dict[int, float] = {}

        def left_after(x: int) -> list[Fraction]:
            return [b - c * x for b, c in zip(remaining, counts, strict=True)]

        def bound(x: int) -> float:
            if x not in bounds:
                self.steps -= 1
                if self.steps < 0:
                    raise _OutOfSteps
                usable = [
                    b - b % d if d else b for b, d in zip(left_after(x), self.divisors[k + 1], strict=True)
                ]
                rest = _relaxed_bound(
                    self.float_values[k + 1 :], self.float_counts[k + 1 :], [float(b) for b in usable]
                )
                bounds[x] = float(value + self.values[k] * x) * (1 + _SLACK) + rest
            return bounds[x]

        low, high = 0, most  # the peak: the least x whose successor's bound is no higher
        while low < high:
            middle = (low + high) // 2
            if bound(middle + 1) > bound(middle):
                low = middle + 1
            else:
                high = middle
        below, above = low, low + 1  # the next count to try on each side of the peak
        while True:
            down = bound(below) if below >= 0 else None
            up = bound(above) if above <= most else None
            if down is not None and self.beats(down) and (up is None or down >= up):
                x, below = below, below - 1
            elif up is not None and self.beats(up):
                x, above = above, above + 1
            else:
                return
            self.visit(k + 1, left_after(x), value + self.values[k] * x, [*chosen, x])


def _divisor(counts: Sequence[Fraction]) -> Fraction:
    """The greatest common divisor of whole counts (0 when some count is not whole, or none is given)."""
    if not counts or any(c.denominator != 1 for c in counts):
        return Fraction(0)
    return Fraction(gcd(*(c.numerator for c in counts)))


def _dot(a: Sequence[Fraction], b: Sequence[Fraction]) -> Fraction:
    return sum((x * y for x, y in zip(a, b, strict=True)), Fraction(0))


_SLACK = 1e-9
"""Relative margin added to a bound computed in floating point: far above its rounding error (about 1e-15),
far below the price step (a millionth of a dollar on a bill of at most millions), so it never prunes a
better solution and rarely keeps a subtree the exact bound would prune."""


def _relaxed_bound(values: list[float], counts: list[list[float]], limits: list[float]) -> float:
    """An upper bound on the linear relaxation's value, fast: the simplex in floating point for its shadow
    prices y, which are then made dual feasible (y >= 0, y . counts_i >= value_i for every item, by scaling
    y up) so that y . limits bounds every solution whatever the rounding (weak duality), plus `_SLACK`."""
    if not values:
        return 0.0
    # Rows scaled to their largest count: memory in bytes and vCPUs then pivot alike.
    scales = [max((c[r] for c in counts), default=0.0) or 1.0 for r in range(len(limits))]
    scaled = [[c[r] / scales[r] for r in range(len(limits))] for c in counts]
    right = [b / s for b, s in zip(limits, scales, strict=True)]
    duals = [max(y, 0.0) for y in _simplex_duals(values, scaled, right)]
    needed = 1.0
    for value, column in zip(values, scaled, strict=True):
        used = sum(y * c for y, c in zip(duals, column, strict=True))
        if used <= 0:
            return (
                float(
                    _lp(
                        [Fraction(v) for v in values],
                        [[Fraction(c) for c in col] for col in scaled],
                        [Fraction(b) for b in right],
                    ).value
                )
                * (1 + _SLACK)
                + _SLACK
            )
        needed = max(needed, value / used)
    return sum(y * b for y, b in zip(duals, right, strict=True)) * needed * (1 + _SLACK) + _SLACK


def _simplex_duals(values: list[float], counts: list[list[float]], limits: list[float]) -> list[float]:
    """The shadow prices of the linear relaxation, in floating point (`_simplex` with a small tolerance).
    Only a guide: `_relaxed_bound` makes them feasible before it trusts them."""
    _, duals = _simplex(values, counts, limits, number=float, tolerance=1e-12 * max(values))
    return duals


N = TypeVar("N", Fraction, float)


def _simplex(
    values: Sequence[N], counts: Sequence[Sequence[N]], limits: Sequence[N], *, number: type[N], tolerance: N
) -> tuple[N, list[N]]:
    """max values . x subject to counts^T x <= limits, x >= 0 real (limits >= 0, so x = 0 is feasible): the
    primal simplex on a dense tableau with Bland's rule (no cycling on degenerate limits). Returns the
    optimum and the shadow price of each limit (y >= 0 with y . counts_i >= values_i at the optimum); exact in
    rational arithmetic (`tolerance` 0), approximate in floating point (it stops after a bounded number of
    pivots)."""
    m, n = len(limits), len(values)
    zero: N = number(0)
    # Row r: the items' counts against limit r, then the slacks (identity), then the right-hand side.
    rows: list[list[N]] = [
        [counts[i][r] for i in range(n)] + [number(int(s == r)) for s in range(m)] + [limits[r]]
        for r in range(m)
    ]
    costs: list[N] = list(values) + [zero for _ in range(m)]  # reduced costs of the columns
    value: N = zero
    basis = [n + r for r in range(m)]
    # Bland's rule terminates; in floating point, rounding might still make it circle, so it stops anyway.
    pivots = itertools.count() if number is Fraction else range(50 * (n + m))
    for _ in pivots:
        entering = next((j for j, d in enumerate(costs) if d > tolerance), None)
        if entering is None:
            break
        pivot = min(
            (r for r in range(m) if rows[r][entering] > tolerance),
            key=lambda r: (rows[r][-1] / rows[r][entering], basis[r]),
            default=None,
        )
        if pivot is None:  # cannot happen: every item counts against some limit
            raise ValueError("the relaxation is unbounded")
        scale = rows[pivot][entering]
        rows[pivot] = [a / scale for a in rows[pivot]]
        for r in range(m):
            factor = rows[r][entering]
            if r != pivot and factor:
                rows[r] = [a - factor * p for a, p in zip(rows[r], rows[pivot], strict=True)]
        factor = costs[entering]
        costs = [d - factor * p for d, p in zip(costs, rows[pivot][:-1], strict=True)]
        value += factor * rows[pivot][-1]
        basis[pivot] = entering
    return value, [-costs[n + r] for r in range(m)]


@dataclass(frozen=True)
class _Relaxation:
    value: Fraction
    duals: tuple[Fraction, ...]
    """Shadow price of each limit: y >= 0 with y . counts_i >= value_i for every item."""


def _lp(
    values: Sequence[Fraction], counts: Sequence[Sequence[Fraction]], limits: Sequence[Fraction]
) -> _Relaxation:
    """The linear relaxation, exact (`_simplex` in rational arithmetic)."""
    value, duals = _simplex(values, counts, limits, number=Fraction, tolerance=Fraction(0))
    return _Relaxation(value, tuple(duals))
