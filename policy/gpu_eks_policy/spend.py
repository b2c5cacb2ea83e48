"""The bound on what a stack's node pools may cost at once, checked on the NodePools and NodeOverlays it
declares: a stack whose own `gpu-eks:cost.maxWorstCaseUsdPerHour` was removed or raised still cannot exceed
the cap this pack's configuration sets for it.

The worst case is the project's own computation from the declared objects (`pools.declared`: Karpenter
1.14.1's requirement and NodeOverlay semantics, the vendored us-east-1 on-demand price table, an exact
solver), which imports nothing beyond the standard library and the project's `facts/` and `pools/`: the
pack's own virtualenv (`requirements.txt`: pulumi, pulumi-policy) runs it. The pack runs from this
repository (`--policy-pack policy`), so the project root is put on the import path here.
"""

import sys
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

_PROJECT = str(Path(__file__).resolve().parents[2])
if _PROJECT not in sys.path:
    sys.path.append(_PROJECT)

from pools.declared import declared_spends  # noqa: E402
from pools.spend import worst_cases  # noqa: E402

ANY_STACK = "*"
"""A `maxWorstCaseUsdPerHour` key that caps every stack not named."""


def stack_cap(caps: Any, stack: str | None) -> Decimal | None:
    """The cap of `stack` (its name, or `org/project/stack`) in the policy config's `maxWorstCaseUsdPerHour`
    (stack name -> USD per hour, `*` for the others); None when it has none. Raises `ValueError` for a value
    that is no positive number, so a typo stops the run instead of switching the cap off."""
    if caps is None:
        return None
    if not isinstance(caps, Mapping):
        raise ValueError(
            f"policy config 'maxWorstCaseUsdPerHour' must map stack names to USD per hour, not {caps!r}"
        )
    name = (stack or "").rsplit("/", 1)[-1]
    value = caps.get(name, caps.get(ANY_STACK))
    if value is None:
        return None
    try:
        amount = Decimal(str(value)) if not isinstance(value, bool) else Decimal(-1)
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or amount <= 0:
        raise ValueError(
            f"policy config 'maxWorstCaseUsdPerHour' for {name!r} must be a positive number of USD per hour, "
            f"not {value!r}"
        )
    return amount


def worst_case_violations(manifests: Iterable[Mapping[str, Any]], cap: Decimal | None) -> list[str]:
    """Why the declared NodePools (with the NodeOverlays among `manifests`) break the bound: a pool without
    a finite worst case, or a total worst case above `cap` (USD per hour; None: no cap)."""
    spends = declared_spends(manifests)
    violations = [
        f"NodePool {s.pool} may launch any number of {', '.join(s.unbounded_by)}: they count against none of "
        "its spec.limits, so its spend has no bound; limit cpu and memory (and nvidia.com/gpu)."
        for s in spends
        if s.unbounded_by
    ]
    if cap is None or violations:
        return violations
    unpriced = [s for s in spends if s.unpriced]
    if unpriced:
        return [
            f"NodePool {s.pool} may launch {', '.join(s.unpriced)}, which the us-east-1 price table has no "
            f"price for, so its worst case cannot be held to the cap of ${cap}/h; restrict its instance "
            "types."
            for s in unpriced
        ]
    total, pools = worst_cases(spends)
    if total <= cap:
        return []
    return [
        f"The NodePools may run ${total:,.2f}/h at once at their limits (us-east-1 on-demand list price), "
        f"above this stack's cap of ${cap}/h (maxWorstCaseUsdPerHour): {pools}. Lower their spec.limits or "
        "raise the cap in the policy configuration."
    ]
