"""What changed in one resource's inputs, said by meaning: the lines a reviewer reads under a plan's step.

`summarise(old, new, paths)` is a pure function of a resource's previous and new inputs and the leaf paths
the plan found changed (`synth.plan.changed_paths`, after `ignoreChanges`): it describes only what lies at or
below those paths, so what the engine ignores is not shown. How each kind of value is said:

- a scalar: `path: old -> new` (`(none)` where absent; a long string shows the part that differs);
- a map: `path: + key: value`, `- key: value`, or its changed entries one by one; more than `LISTED` entries
  added, removed or changed alike become one line with a count and the first and last names
  (`values.devicePlugin.config.data: 63 entries added (time-slicing-2 ... time-slicing-64)`);
- a list of mappings with an identity (`LIST_IDENTITY` by field name, else the first of `IDENTITY_KEYS` every
  item has and no two share): items matched by it, added and removed ones rendered compactly (a toleration
  `key=value:effect`, a requirement `key In [values]`), changed ones described where they changed
  (`containers[guard].env[SETTINGS].value`); a list of distinct scalars as a set (`+ a, - b`); other lists
  item by item;
- a string holding JSON or YAML (a dashboard, a policy document, rule groups, a settings variable): its
  parsed contents, described as above; other multi-line text by the lines that differ.

Inputs are compared as the snapshots record them, secrets masked (`[secret]`): a secret is never shown.
`condense` folds a long description into one line per field it touches, with counts; the plan shows it so
unless asked to be verbose.
"""

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from components import yaml_text

LISTED = 3
"""Up to this many entries added (removed, changed alike) in one map or list are shown one by one."""
CONDENSED = 8
"""A resource described in more lines than this is shown one line per field (`condense`)."""
SHORT = 72
"""A value in `old -> new` longer than this is abbreviated."""
WIDE = 120
"""An added or removed value longer than this is abbreviated."""

IDENTITY_KEYS = ("name", "key", "alert|record", "Sid", "title", "id", "refId", "deviceName", "mountPath")
"""Keys that name an item of a list of mappings, in the order they are tried (`a|b`: whichever of them the
item has): Kubernetes names (containers, env, volumes, ports), label-selector requirements, Prometheus
alerting and recording rules, IAM statements, dashboard panels and their queries, block devices, mounts."""

LIST_IDENTITY: Mapping[str, tuple[str, ...]] = {
    # core/v1 Toleration and Taint: one per key and effect (a pod may tolerate a key for several effects).
    "tolerations": ("key", "effect"),
    "taints": ("key", "effect"),
    "startupTaints": ("key", "effect"),
    # NodeSelectorRequirement (a NodePool's requirements, a selector's matchExpressions): one per key.
    "requirements": ("key",),
    "matchExpressions": ("key",),
    "env": ("name",),
    # Prometheus rules: this stack's per-pool alerts share their name and differ by their nodepool label.
    "rules": ("alert|record", "labels.nodepool"),
}
"""Identity of the items of known lists, by field name: Kubernetes names a field after its type wherever it
appears (`tolerations` is a list of Tolerations in a pod spec and in a chart's values alike)."""

_MISSING: Any = object()


@dataclass(frozen=True)
class Item:
    """One thing that changed: where (display segments: keys, and `[label]` for a list item) and what."""

    path: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return join(self.path)

    def __str__(self) -> str:
        return f"{self.where}: {self.text}" if self.path else self.text


def join(segments: Iterable[str]) -> str:
    """`("spec", "containers", "[guard]", "env")` -> `spec.containers[guard].env`."""
    text = ""
    for s in segments:
        text += s if s.startswith("[") or not text else f".{s}"
    return text


@dataclass(frozen=True)
class _At:
    """Where the description is: display segments, and the raw input path (None below a point where raw
    paths no longer line up: a list matched by identity, the inside of a string) with the changed paths."""

    shown: tuple[str, ...]
    raw: str | None
    changed: tuple[str, ...]

    def relevant(self) -> bool:
        """Whether a changed path lies at or below here (always, once raw paths no longer line up)."""
        if self.raw is None or not self.raw:
            return True
        return any(p == self.raw or p.startswith((f"{self.raw}.", f"{self.raw}[")) for p in self.changed)

    def key(self, key: str) -> "_At":
        raw = None if self.raw is None else (f"{self.raw}.{key}" if self.raw else key)
        return _At((*self.shown, key), raw, self.changed)

    def index(self, index: int) -> "_At":
        raw = None if self.raw is None else f"{self.raw}[{index}]"
        return _At((*self.shown, f"[{index}]"), raw, self.changed)

    def item(self, label: str) -> "_At":
        return _At((*self.shown, f"[{label}]"), None, self.changed)

    def inside(self) -> "_At":
        return _At(self.shown, None, self.changed)

    @property
    def field(self) -> str:
        """The field name a list here is (its last key)."""
        keys = [s for s in self.shown if not s.startswith("[")]
        return keys[-1] if keys else ""


def summarise(old: Any, new: Any, paths: Iterable[str] = ()) -> tuple[Item, ...]:
    """What changed from `old` to `new` at or below `paths` (every difference when `paths` is empty)."""
    changed = tuple(paths)
    return tuple(_describe(old, new, _At((), "" if changed else None, changed)))


def condense(items: Sequence[Item], limit: int = CONDENSED) -> tuple[Item, ...]:
    """At most `limit` lines where possible: items grouped by the deepest field that leaves no more groups
    than that, each group of several said as a count of changes and the fields below it."""
    if len(items) <= limit:
        return tuple(items)
    depth = max(len(i.path) for i in items)
    while depth > 1 and len(_groups(items, depth)) > limit:
        depth -= 1
    condensed = []
    for prefix, group in _groups(items, depth).items():
        if len(group) == 1:
            condensed.append(group[0])
            continue
        below = list(dict.fromkeys(i.path[len(prefix)] for i in group if len(i.path) > len(prefix)))
        fields = f" ({_names(below, most=6)})" if below else ""
        condensed.append(Item(prefix, f"{len(group)} changes{fields}"))
    return tuple(condensed)


def _groups(items: Sequence[Item], depth: int) -> dict[tuple[str, ...], list[Item]]:
    groups: dict[tuple[str, ...], list[Item]] = {}
    for i in items:
        groups.setdefault(i.path[:depth], []).append(i)
    return groups


# --- Describing --------------------------------------------------------------------------------------


def _empty(value: Any) -> bool:
    """No value, as the providers' diffs see it: absent, `None`, an empty map or list."""
    return value is _MISSING or value is None or (isinstance(value, (Mapping, list)) and not value)


def _describe(old: Any, new: Any, at: _At) -> list[Item]:
    if (_empty(old) and _empty(new)) or _canonical(old) == _canonical(new) or not at.relevant():
        return []
    if all(isinstance(v, Mapping) or _empty(v) for v in (old, new)):
        return _map(old if isinstance(old, Mapping) else {}, new if isinstance(new, Mapping) else {}, at)
    if all(isinstance(v, list) or _empty(v) for v in (old, new)):
        return _list(old if isinstance(old, list) else [], new if isinstance(new, list) else [], at)
    if isinstance(old, str) and isinstance(new, str):
        parsed = _structured(old), _structured(new)
        if parsed[0] is not None and parsed[1] is not None:
            return _describe(parsed[0], parsed[1], at.inside())
        if "\n" in old or "\n" in new:
            return [Item(at.shown, _text_change(old, new))]
    return [Item(at.shown, scalar_change(old, new))]


def _map(old: Mapping[str, Any], new: Mapping[str, Any], at: _At) -> list[Item]:
    keys = sorted({*old, *new}, key=natural)
    added = [k for k in keys if _empty(old.get(k)) and not _empty(new.get(k))]
    removed = [k for k in keys if _empty(new.get(k)) and not _empty(old.get(k))]
    changed = [
        k
        for k in keys
        if k not in added and k not in removed and _canonical(old.get(k)) != _canonical(new.get(k))
    ]
    items: list[Item] = []
    described = {k: _describe(old.get(k), new.get(k), at.key(k)) for k in changed}
    described = {k: v for k, v in described.items() if v}
    alike = _alike(described, at)
    if alike is not None:
        items.append(Item(at.shown, f"{len(described)} entries changed ({_names(list(described))}){alike}"))
    else:
        items += [i for k in described for i in described[k]]
    for mark, keys, side in (("+", added, new), ("-", removed, old)):
        names = [k for k in keys if at.key(k).relevant()]
        verb = "added" if mark == "+" else "removed"
        if len(names) > LISTED:
            items.append(Item(at.shown, f"{len(names)} entries {verb} ({_names(names)})"))
        else:
            items += [Item(at.shown, f"{mark} {k}: {_entry(k, side[k])}") for k in names]
    return items


def _alike(described: Mapping[str, list[Item]], at: _At) -> str | None:
    """`: <what changed in each>` when more than `LISTED` entries of a map changed in the same way, None
    otherwise (`""` when they changed alike but each in several ways)."""
    if len(described) <= LISTED:
        return None
    relative = {tuple((i.path[len(at.shown) + 1 :], i.text) for i in items) for items in described.values()}
    if len(relative) != 1:
        return None
    [change] = relative
    return f": {Item(*change[0])}" if len(change) == 1 else ""


def _list(old: list[Any], new: list[Any], at: _At) -> list[Item]:
    identity = _identity(at.field, old, new)
    if identity is not None:
        return _matched(old, new, at, identity)
    scalars = all(not isinstance(v, (Mapping, list)) for v in (*old, *new))
    if scalars and len(set(map(_canonical, old))) == len(old) and len(set(map(_canonical, new))) == len(new):
        return _set(old, new, at)
    items = [i for n in range(min(len(old), len(new))) for i in _describe(old[n], new[n], at.index(n))]
    items += [Item(at.shown, f"+ {compact(v)}") for v in new[len(old) :]]
    items += [Item(at.shown, f"- {compact(v)}") for v in old[len(new) :]]
    return items


def _matched(old: list[Any], new: list[Any], at: _At, identity: Callable[[Any], str]) -> list[Item]:
    """A list whose items are matched by `identity` (a label naming each)."""
    before = {identity(v): v for v in old}
    after = {identity(v): v for v in new}
    render = ITEM_RENDERERS.get(at.field, compact)
    items: list[Item] = []
    for label, value in after.items():
        if label in before and _canonical(before[label]) != _canonical(value):
            was, now = render(before[label]), render(value)
            if render is not compact and max(len(was), len(now)) <= SHORT:
                items.append(Item(at.shown, f"~ {was} -> {_after_common_words(was, now)}"))
            else:
                items += _describe(before[label], value, at.item(label))
    for mark, labels, side in (
        ("+", [k for k in after if k not in before], after),
        ("-", [k for k in before if k not in after], before),
    ):
        verb = "added" if mark == "+" else "removed"
        if len(labels) > LISTED:
            names = [render(side[k]) for k in labels] if identity is _canonical else labels
            items.append(Item(at.shown, f"{len(labels)} items {verb} ({_names(names)})"))
        else:
            items += [
                Item(
                    at.shown, f"{mark} {render(side[k]) if render is not compact else compact(side[k], WIDE)}"
                )
                for k in labels
            ]
    common = [k for k in after if k in before]
    if not items and common != [k for k in before if k in after]:
        items.append(Item(at.shown, "reordered"))
    return items


def _entry(key: str, value: Any) -> str:
    """A map's entry added or removed whole: a known list item by item, as its items are written."""
    render = ITEM_RENDERERS.get(key)
    if render is not None and isinstance(value, list) and all(isinstance(v, Mapping) for v in value):
        text = f"[{', '.join(render(v) for v in value)}]"
        if len(text) <= WIDE:
            return text
    return compact(value, WIDE)


def _set(old: list[Any], new: list[Any], at: _At) -> list[Item]:
    """A list of distinct scalars, on one line: `+ a, + b, - c`, or what was added and removed by count."""
    parts = []
    for mark, values in (("+", [v for v in new if v not in old]), ("-", [v for v in old if v not in new])):
        verb = "added" if mark == "+" else "removed"
        if len(values) > LISTED:
            parts.append(f"{len(values)} {verb} ({_names([compact(v) for v in values])})")
        else:
            parts += [f"{mark} {compact(v)}" for v in values]
    return [Item(at.shown, ", ".join(parts) if parts else "reordered")]


def _identity(field: str, old: list[Any], new: list[Any]) -> Callable[[Any], str] | None:
    """What names an item of this list (None: a list of scalars or of unnamed items). The keys must name every
    item of both sides, no two of a side alike; a known list whose items they do not name is matched by the
    items themselves (a change is then a removal and an addition)."""
    if not all(isinstance(v, Mapping) for v in (*old, *new)):
        return None
    candidates = [LIST_IDENTITY[field]] if field in LIST_IDENTITY else [(k,) for k in IDENTITY_KEYS]
    for keys in candidates:

        def label(value: Any, keys: tuple[str, ...] = keys) -> str:
            return ":".join(p for p in (_key(value, key) for key in keys) if p)

        if all(
            all(label(v) for v in side) and len({label(v) for v in side}) == len(side) for side in (old, new)
        ):
            return label
    if field in LIST_IDENTITY:
        return _canonical if all(len({_canonical(v) for v in s}) == len(s) for s in (old, new)) else None
    return None


def _key(value: Mapping[str, Any], key: str) -> str:
    """An identity part of an item: `a|b` whichever it has, `a.b` below `a`; empty when absent."""
    for alternative in key.split("|"):
        found: Any = value
        for part in alternative.split("."):
            found = found.get(part) if isinstance(found, Mapping) else None
        if found is not None:
            return str(found)
    return ""


def _after_common_words(was: str, now: str) -> str:
    """`now` without its first word (an item's name) where `was` starts with it: `key In [a] -> In [a, b]`."""
    first, _, rest = now.partition(" ")
    return rest if rest and was.partition(" ")[0] == first else now


# --- Rendering values ----------------------------------------------------------------------------------


def scalar_change(old: Any, new: Any) -> str:
    """`old -> new`, a long single-line string shown around the part that differs."""
    if isinstance(old, str) and isinstance(new, str) and max(len(old), len(new)) > SHORT:
        return _around_difference(old, new)
    return f"{_scalar(old)} -> {_scalar(new)}"


def _scalar(value: Any) -> str:
    return "(none)" if value is _MISSING or value is None else compact(value)


def _around_difference(old: str, new: str, context: int = 16) -> str:
    """`…context OLD context… -> …context NEW context…` around the first place two long strings differ (places
    closer than `context` count as one), and how many other places differ."""
    ops = [
        op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    first, last = ops[0], ops[0]
    for op in ops[1:]:
        if op[1] - last[2] > context:
            break
        last = op
    others = len(ops) - ops.index(last) - 1

    def window(text: str, start: int, end: int) -> str:
        changed = text[start:end] if end - start <= SHORT else f"{text[start : start + SHORT]}…"
        before, after = _word_start(text, start - context), _word_end(text, end + context)
        lead, trail = ("…" if before else ""), ("…" if after < len(text) else "")
        return f"{lead}{text[before:start]}{changed}{text[end:after]}{trail}"

    more = f" (and {others} more {'place' if others == 1 else 'places'})" if others else ""
    return f"{window(old, first[1], last[2])} -> {window(new, first[3], last[4])}{more}"


def _word_start(text: str, at: int) -> int:
    """`at`, moved back to the start of the word it falls in (by at most `SHORT` // 4 characters)."""
    at = max(at, 0)
    floor = max(at - SHORT // 4, 0)
    while at > floor and _in_word(text[at - 1]):
        at -= 1
    return at


def _word_end(text: str, at: int) -> int:
    at = min(at, len(text))
    ceiling = min(at + SHORT // 4, len(text))
    while at < ceiling and _in_word(text[at]):
        at += 1
    return at


def _in_word(char: str) -> bool:
    return char.isalnum() or char in "-_./"


def _text_change(old: str, new: str) -> str:
    """Multi-line text by the lines that differ."""
    diff = [d for d in difflib.ndiff(old.splitlines(), new.splitlines()) if d[:2] in ("- ", "+ ")]
    removed = [d[2:] for d in diff if d.startswith("- ")]
    added = [d[2:] for d in diff if d.startswith("+ ")]
    if len(removed) <= 1 and len(added) <= 1:
        was = compact(removed[0].strip()) if removed else "(no line)"
        now = compact(added[0].strip()) if added else "(no line)"
        return f"line {was} -> {now}"
    counts = [
        f"{len(lines)} lines {verb}" for lines, verb in ((added, "added"), (removed, "removed")) if lines
    ]
    first = f"+ {compact(added[0].strip())}" if added else f"- {compact(removed[0].strip())}"
    return f"{', '.join(counts)} (first: {first})"


def compact(value: Any, limit: int = SHORT) -> str:
    """A value on one line, as YAML's flow style would show it, abbreviated past `limit` characters: nested
    maps and lists by their size, then the keys alone, then cut."""
    for depth in (None, 1, 0):
        text = _flow(value, depth)
        if len(text) <= limit:
            return text
    return text[: limit - 1] + "…"


def _flow(value: Any, depth: int | None) -> str:
    if isinstance(value, Mapping):
        if depth == 0:
            many = len(value) > LISTED + 1
            return (
                f"{{{len(value)} entries: {_names(list(value))}}}" if many else "{" + ", ".join(value) + "}"
            )
        inner = None if depth is None else depth - 1
        return "{" + ", ".join(f"{k}: {_flow(v, inner)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        if depth == 0:
            return f"[{len(value)} items]"
        inner = None if depth is None else depth - 1
        return "[" + ", ".join(_flow(v, inner) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        structured = _structured(value)
        if structured is not None:  # JSON or YAML text: what it says
            return _flow(structured, depth)
        if "\n" in value:
            lines = value.splitlines()
            return f'{json.dumps(lines[0])[:-1]}…" ({len(lines)} lines)' if lines else '""'
        return (
            value if value and value.strip() == value and not _looks_like_other(value) else json.dumps(value)
        )
    return str(value)


def _looks_like_other(text: str) -> bool:
    """A string YAML would read as something else (a number, a boolean, null) is quoted."""
    try:
        return not isinstance(yaml_text.load(text), str)
    except yaml.YAMLError:
        return False


def _names(names: Sequence[str], most: int = LISTED + 1) -> str:
    """`a, b, c` or, for more than `most`, `first ... last` (in natural order)."""
    names = sorted(names, key=natural)
    return ", ".join(names) if len(names) <= most else f"{names[0]} ... {names[-1]}"


def natural(text: str) -> tuple[Any, ...]:
    """Sort key putting `time-slicing-2` before `time-slicing-10`."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text)))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _structured(text: str) -> Any:
    """The map or list a string holds as JSON (or, when it spans lines, YAML), else None."""
    stripped = text.strip()
    try:
        if stripped[:1] in ("{", "["):
            value = json.loads(stripped)
        elif "\n" in stripped:
            value = yaml_text.load(stripped)
        else:
            return None
    except (ValueError, yaml.YAMLError):
        return None
    return value if isinstance(value, (Mapping, list)) else None


# Items of known lists, as `kubectl` and the Karpenter docs write them.


def _toleration(t: Mapping[str, Any]) -> str:
    key, value, effect = t.get("key") or "", t.get("value"), t.get("effect")
    operator = t.get("operator") or "Equal"
    text = (key or "*") if operator == "Exists" else f"{key}={value or ''}"
    text += f":{effect}" if effect else ""
    seconds = t.get("tolerationSeconds")
    return text + (f" for {seconds}s" if seconds is not None else "")


def _taint(t: Mapping[str, Any]) -> str:
    value = t.get("value")
    return f"{t.get('key')}{f'={value}' if value else ''}:{t.get('effect')}"


def _requirement(r: Mapping[str, Any]) -> str:
    values = r.get("values")
    text = f"{r.get('key')} {r.get('operator')}"
    if values:
        text += f" {values[0]}" if r.get("operator") in ("Gt", "Lt") else f" [{', '.join(map(str, values))}]"
    return text + (f" (minValues {r['minValues']})" if r.get("minValues") is not None else "")


def _env(e: Mapping[str, Any]) -> str:
    if "valueFrom" in e:
        return f"{e.get('name')} from {compact(e['valueFrom'])}"
    return f"{e.get('name')}={compact(e.get('value', ''))}"


ITEM_RENDERERS: Mapping[str, Callable[[Any], str]] = {
    "tolerations": _toleration,
    "taints": _taint,
    "startupTaints": _taint,
    "requirements": _requirement,
    "matchExpressions": _requirement,
    "env": _env,
}
"""How an item of a known list is written, by field name (see `LIST_IDENTITY`)."""
