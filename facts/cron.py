"""Disruption-budget schedules exactly as Karpenter 1.14.1 reads them (pure; no Pulumi).

What is accepted, and where that comes from:

- The NodePool CRD (`karpenter.sh_nodepools.yaml`, `spec.disruption.budgets[].schedule`) lets a value
  through when it matches `_CRD_PATTERN` below (a descriptor, or five whitespace-separated parts).
- The controller then parses it with `cron.ParseStandard("TZ=UTC " + schedule)`
  (kubernetes-sigs/karpenter v1.14.1 `pkg/apis/v1/nodepool.go`, `Budget.IsActive`), robfig/cron v3.0.1
  (`parser.go`, `spec.go` @ ccba498c): five whitespace-separated fields, minute 0-59, hour 0-23, day of month
  1-31, month 1-12 or jan-dec, day of week 0-6 or sun-sat (names in any case); each field a comma-separated
  list of `*`, `?`, `N`, `N-M`, each optionally `/step` (`N/step` means N to the maximum); or one of the
  descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`. robfig
  also knows `@every <duration>`, which the CRD pattern refuses, and time zones, which Karpenter's own
  `TZ=UTC` prefix turns into a parse error.
- A parse error makes `GetAllowedDisruptions` fail closed: the budget allows 0 disruptions, so the pool is
  never consolidated. A schedule that never fires (`0 0 30 2 *`) makes robfig's `Next` return the zero
  time, which `IsActive` reads as "active": the budget then applies all the time.
"""

import calendar
import re
from dataclasses import dataclass

DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")

_CRD_PATTERN = re.compile(
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
)
_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts (sign included)

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True)
class _Bounds:
    field: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    """Names for low, low+1, ... (months from 1, days from 0)."""

    def value(self, text: str) -> int:
        lowered = text.lower()
        if lowered in self.names:
            return self.low + self.names.index(lowered)
        if not _INT.fullmatch(text):
            named = f" or a name ({'/'.join(self.names[:3])}...)" if self.names else ""
            raise ValueError(f"{self.field} {text!r} is not a number{named}")
        number = int(text)
        if number < 0:
            raise ValueError(f"{self.field} {text!r} is negative")
        return number


_FIELDS = (
    _Bounds("minute", 0, 59),
    _Bounds("hour", 0, 23),
    _Bounds("day of month", 1, 31),
    _Bounds("month", 1, 12, _MONTHS),
    _Bounds("day of week", 0, 6, _DAYS),
)


@dataclass(frozen=True)
class _Field:
    values: frozenset[int]
    star: bool
    """Written as `*` or `?` without a step > 1 (robfig's star bit: day matching then uses AND, not OR)."""


def _parse_range(expr: str, bounds: _Bounds) -> _Field:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    star = False
    if low_high[0] in ("*", "?"):
        start, end, star = bounds.low, bounds.high, True
        if len(low_high) > 1:
            raise ValueError(f"{bounds.field} {expr!r}: a range cannot start with {low_high[0]}")
    else:
        if len(low_high) > 2:
            raise ValueError(f"{bounds.field} {expr!r} has more than one '-'")
        start = bounds.value(low_high[0])
        end = bounds.value(low_high[1]) if len(low_high) == 2 else start
    step = 1
    if len(range_and_step) == 2:
        step = bounds.value(range_and_step[1]) if _INT.fullmatch(range_and_step[1]) else -1
        if step < 0:
            raise ValueError(f"{bounds.field} {expr!r}: the step after '/' must be a number")
        if len(low_high) == 1:
            end = bounds.high  # N/step means N to the maximum
        if step > 1:
            star = False
    elif len(range_and_step) > 2:
        raise ValueError(f"{bounds.field} {expr!r} has more than one '/'")
    if start < bounds.low:
        raise ValueError(f"{bounds.field} {start} is below {bounds.low}")
    if end > bounds.high:
        raise ValueError(f"{bounds.field} {end} is above {bounds.high} (allowed: {bounds.low}-{bounds.high})")
    if start > end:
        raise ValueError(f"{bounds.field} range {expr!r} runs backwards ({start} is after {end})")
    if step == 0:
        raise ValueError(f"{bounds.field} {expr!r}: the step must be at least 1")
    return _Field(frozenset(range(start, end + 1, step)), star)


def _parse_field(text: str, bounds: _Bounds) -> _Field:
    values: set[int] = set()
    star = False
    for expr in (part for part in text.split(",") if part):
        parsed = _parse_range(expr, bounds)
        values |= parsed.values
        star = star or parsed.star
    return _Field(frozenset(values), star)


def _fires(fields: list[_Field]) -> bool:
    """Whether robfig's `Next` finds a time within its five-year search (so the schedule ever starts)."""
    minute, hour, dom, month, dow = fields
    if not (minute.values and hour.values and month.values):
        return False
    # robfig: with `*` in either day field both must match; otherwise either may.
    if dom.star or dow.star:
        if not dow.values:
            return False
        # Feb 29 counts: a leap year always falls in the five years searched.
        return any(day <= calendar.monthrange(2024, m)[1] for m in month.values for day in dom.values)
    return bool(dow.values) or any(
        day <= calendar.monthrange(2024, m)[1] for m in month.values for day in dom.values
    )


def check_schedule(schedule: str) -> str:
    """`schedule` if Karpenter 1.14.1 accepts and uses it, else `ValueError` saying what is wrong."""
    if not _CRD_PATTERN.search(schedule):
        if schedule.startswith("@every"):
            raise ValueError("@every is not accepted by Karpenter's NodePool schema; use five cron fields")
        raise ValueError(f"needs five fields (minute hour day-of-month month day-of-week), got {schedule!r}")
    spec = schedule.strip()
    if spec.startswith(("TZ=", "CRON_TZ=")):
        raise ValueError("time zones are not supported: Karpenter evaluates schedules in UTC")
    if spec.startswith("@"):
        if spec.startswith("@every "):
            raise ValueError("@every is not accepted by Karpenter's NodePool schema; use five cron fields")
        if spec not in DESCRIPTORS:
            raise ValueError(f"unknown descriptor {spec!r}; known: {', '.join(DESCRIPTORS)}")
        return schedule
    parts = spec.split()
    if len(parts) != len(_FIELDS):
        raise ValueError(
            f"needs exactly five fields (minute hour day-of-month month day-of-week), found {len(parts)}"
        )
    fields = [_parse_field(part, bounds) for part, bounds in zip(parts, _FIELDS, strict=True)]
    if not _fires(fields):
        raise ValueError(
            "never fires (no such date or time), and Karpenter then treats the budget as always active"
        )
    return schedule
