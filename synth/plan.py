"""Predict what `pulumi up` would do between two declared states of a stack, offline.

A state is what one run of the program declared: the committed snapshot (`snapshots/<stack>/`, now or at a
git ref) or a run under the mocks, with the stack's outputs. Resources are matched by URN (type chain and
name) or by an alias; each is created, deleted, updated or replaced, deciding replacement as each provider
does (`facts.replacement`):

- a changed input at or below a force-new path replaces; other changes update (the resource's
  `ignoreChanges` paths are left out first, as the engine does); a new `aws:region` replaces every
  regional resource;
- a replaced resource's outputs are unknown until it exists again, so a dependent whose force-new input
  comes from it is replaced too, and one whose other inputs come from it is updated; a replaced provider
  replaces every resource it manages. This is what `pulumi preview` shows;
- a replacement deletes first when the resource says `deleteBeforeReplace` or its provider decides so
  (pulumi-kubernetes for named objects keeping their name), otherwise it creates the new one first.

Then each rule of `FINDINGS`, a pure function of the change, says what a reviewer must see; a blocking
finding is one `pulumi up` cannot carry out as planned (the API refuses it, a name collides, a protected
resource would go). Rendering (`render_*`) only formats a `Plan`.

Inputs compare as the snapshots record them, with secrets masked: a change of a secret value alone is not
seen. Provider configuration other than the region (from the stack's `region` output) is not compared.
"""

import json
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any, Literal

from config.errors import config_key
from config.types import duration_seconds, go_duration
from facts.eks import control_plane_version_move
from facts.karpenter_lifecycle import (
    DEFAULT_DISRUPTION_BUDGET,
    NODE_CLASS_DYNAMIC_DRIFT,
    NODE_CLASS_NOT_HASHED,
    NODE_POOL_HASHED,
    NODE_POOL_REQUIREMENTS,
)
from facts.pricing import price_table_source
from facts.prometheus_stack import STACK_CHART, VOLUME_NOT_RESIZED
from facts.quantity import parse_quantity
from facts.replacement import (
    CHARTS,
    CLUSTER_SUBNET_ZONES,
    K8S_CREATE_REFUSES_EXISTING,
    K8S_DEFAULT_DELETE_TIMEOUT_SECONDS,
    Replacement,
    chart_of,
    regional,
    replacement_facts,
)
from pools.declared import declared_spends
from pools.spend import PoolSpend
from synth import snapshot
from synth.cost import usd
from synth.runner import PROJECT, ROOT, ProgramRun
from synth.summary import Item, condense, summarise

Op = Literal["create", "update", "replace", "delete"]
OPS: tuple[Op, ...] = ("replace", "delete", "create", "update")
"""Operations, in the order a reviewer should read them."""

CLUSTER = "eks:index:Cluster"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
JOB = "kubernetes:batch/v1:Job"
NAMESPACE = "kubernetes:core/v1:Namespace"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
REQUIREMENTS = "spec.template.spec.requirements"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
INSTANCE_LABELS = "karpenter.k8s.aws/instance-"
CRITICAL_REPLACEMENTS = (CLUSTER, "aws:eks/nodeGroup:NodeGroup", "aws:iam/role:Role", "aws:sqs/queue:Queue")
"""Replacing one of these takes down the control plane, the system nodes, an identity or the interruption
queue for a while: always worth a reviewer's explicit look."""
KUBERNETES_VERSION = config_key(("cluster", "kubernetesVersion"))
AVAILABILITY_ZONES = config_key(("network", "availabilityZones"))
SUBNET = "aws:ec2/subnet:Subnet"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
PLACEMENT_GROUP_LABEL = "karpenter.k8s.aws/placement-group-id"
"""Karpenter's label on a NodeClaim launched into a placement group (aws/karpenter-provider-aws
pkg/apis/v1/labels.go at v1.14.1)."""
PROMETHEUS_STORAGE = (
    "values.prometheus.prometheusSpec.storageSpec.volumeClaimTemplate.spec.resources.requests.storage"
)

_MISSING = object()


class PlanError(Exception):
    """A previous state that cannot be read (unknown git ref, unreadable snapshot)."""


@dataclass(frozen=True)
class Resource:
    """One resource of a declared state."""

    key: str
    """The URN without stack and project: `<parent types>$<type>::<name>`."""
    type: str
    name: str
    inputs: Mapping[str, Any]
    provider: str | None = None
    """Key of the explicit provider resource, if any."""
    delete_before_replace: bool = False
    protect: bool = False
    retain_on_delete: bool = False
    """Deleting it only drops it from the state: the object stays where it is."""
    ignore_changes: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Input name -> keys of the resources its value comes from (known for program runs only)."""
    aliases: tuple[str, ...] = ()
    """Keys this resource had before (its `aliases` option; known for program runs only)."""
    delete_timeout: str | None = None
    """Its `customTimeouts.delete` (`86400s`); without one pulumi-kubernetes waits 10 minutes."""
    dependencies: tuple[str, ...] = ()
    """Keys of the resources it depends on (its inputs' sources and `dependsOn`)."""


@dataclass(frozen=True)
class State:
    """Every resource one run declared, by key, in registration order, and the stack's outputs."""

    resources: Mapping[str, Resource]
    label: str
    outputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def region(self) -> str | None:
        """The AWS region the stack's resources live in (its `region` output), if known."""
        region = self.outputs.get("region")
        return str(region) if region else None


@dataclass(frozen=True)
class Step:
    """What happens to one resource."""

    op: Op
    type: str
    name: str
    because: tuple[str, ...] = ()
    """The changed input paths, or what a cascaded replacement comes from."""
    delete_first: bool = False
    """For a replacement: the old resource is deleted before the new one is created."""
    cascaded: bool = False
    """Replaced or updated because a resource it depends on (or its provider) is replaced."""
    paths: tuple[str, ...] = ()
    """The inputs that change: leaf paths, or the inputs a replaced resource's outputs flow into."""
    region_move: bool = False
    """Replaced because the stack moves to another AWS region: the new one lives there."""
    reason: str = ""
    """Why it is replaced (or updated by a replacement), as a reviewer reads it: `because metadata.name
    changed (forces a new object)`."""
    changes: tuple[Item, ...] = ()
    """What changes in its inputs, by meaning (`synth.summary`)."""

    def json(self) -> dict[str, Any]:
        """`op`, `type`, `name`; for a change also `reason` (if any), `changes` and the full `paths`."""
        entry: dict[str, Any] = {"op": self.op, "type": self.type, "name": self.name}
        if self.op in ("update", "replace"):
            entry |= {"reason": self.reason} if self.reason else {}
            entry |= {"changes": [str(c) for c in self.changes], "paths": list(self.paths)}
        return entry


@dataclass(frozen=True)
class Reason:
    """One thing that forces a replacement: as `Step.because` records it, and as a reviewer reads it."""

    because: str
    text: str
    why: str = ""
    """Why that forces a replacement, where "forces a new ..." would not say it."""


@dataclass(frozen=True)
class Finding:
    """Something in the plan a reviewer must see. `blocking`: `pulumi up` cannot carry it out as planned."""

    message: str
    blocking: bool = False


@dataclass(frozen=True)
class Plan:
    """The steps between two states, unchanged resources counted, findings called out."""

    before: str
    after: str
    steps: tuple[Step, ...]
    unchanged: int
    findings: tuple[Finding, ...]
    spend: "SpendChanges | None" = None
    """The pools' worst-case spend before and after (see the spend section below)."""
    versions: tuple["Version", ...] = ()
    """The Kubernetes version and each chart's, before and after."""

    def count(self, op: Op) -> int:
        return sum(1 for s in self.steps if s.op == op)

    def of(self, op: Op) -> list[Step]:
        return [s for s in self.steps if s.op == op]

    def find(self, type_token: str, name: str) -> Step | None:
        """The step of a resource (by type and logical name), `None` when it is unchanged or absent."""
        return next((s for s in self.steps if s.type == type_token and s.name == name), None)

    @property
    def blocking(self) -> bool:
        return any(f.blocking for f in self.findings)


# --- States -------------------------------------------------------------------------------------------


def _key_of_urn(urn: str) -> str:
    # urn:pulumi:<stack>::<project>::<qualified type>::<name>
    _, _, qualified_type, name = urn.split("::", 3)
    return f"{qualified_type}::{name}"


def _is_local_component(type_token: str) -> bool:
    """This project's own component resources (`gpu-eks:<module>:<Type>`): no provider, never diffed."""
    return type_token.startswith(f"{PROJECT}:")


def state_of_run(run: ProgramRun, label: str) -> State:
    """The state a program run declared."""
    providers = {r.name: _key_of_urn(r.urn) for r in run.resources if r.type.startswith("pulumi:providers:")}
    resources = {}
    for r in run.resources:
        if _is_local_component(r.type):
            continue
        key = _key_of_urn(r.urn)
        resources[key] = Resource(
            key=key,
            type=r.type,
            name=r.name,
            inputs=r.masked_inputs,
            provider=providers.get(r.provider) if r.provider else None,
            delete_before_replace=r.delete_before_replace,
            protect=r.protect,
            retain_on_delete=r.retain_on_delete,
            ignore_changes=tuple(r.ignore_changes),
            property_dependencies={
                prop: tuple(_key_of_urn(u) for u in urns) for prop, urns in r.property_dependencies.items()
            },
            aliases=tuple(_key_of_urn(a) for a in r.aliases),
            delete_timeout=r.custom_timeouts.get("delete"),
            dependencies=tuple(_key_of_urn(d) for d in r.dependencies),
        )
    return State(resources, label, run.outputs)


def state_of_snapshot(resources_yaml: str, label: str, outputs_yaml: str = "") -> State:
    """The state a committed `resources.yaml` and `outputs.yaml` record (see `synth.snapshot`)."""
    entries: list[dict[str, Any]] = snapshot.from_yaml(resources_yaml) or []
    by_short = {f"{e['type']}::{e['name']}": e for e in entries}

    @cache
    def qualified_type(short: str) -> str:
        entry = by_short[short]
        parent = entry.get("parent")
        if not parent or parent.startswith("pulumi:pulumi:Stack::"):
            return str(entry["type"])
        return f"{qualified_type(parent)}${entry['type']}"

    def key(short: str) -> str:
        return f"{qualified_type(short)}::{by_short[short]['name']}"

    providers = {e["name"]: key(s) for s, e in by_short.items() if e["type"].startswith("pulumi:providers:")}
    resources = {}
    for short, e in by_short.items():
        if _is_local_component(e["type"]):
            continue
        resource_key = key(short)
        resources[resource_key] = Resource(
            key=resource_key,
            type=e["type"],
            name=e["name"],
            inputs=e.get("inputs") or {},
            provider=providers.get(e["provider"]) if e.get("provider") else None,
            delete_before_replace=bool(e.get("deleteBeforeReplace")),
            protect=bool(e.get("protect")),
            retain_on_delete=bool(e.get("retainOnDelete")),
            ignore_changes=tuple(e.get("ignoreChanges") or ()),
            delete_timeout=(e.get("customTimeouts") or {}).get("delete"),
            dependencies=tuple(key(d) for d in e.get("dependsOn") or () if d in by_short),
        )
    return State(resources, label, (snapshot.from_yaml(outputs_yaml) or {}) if outputs_yaml else {})


def _snapshot_files(stack: str) -> tuple[str, str]:
    return f"snapshots/{stack}/resources.yaml", f"snapshots/{stack}/outputs.yaml"


def working_tree_state(stack: str, root: Path = ROOT, why: str = "") -> State:
    """The snapshot of a stack in the working tree (as the last `python -m synth` wrote it)."""
    texts = [(root / f).read_text() if (root / f).exists() else "" for f in _snapshot_files(stack)]
    label = f"{_snapshot_files(stack)[0]} in the working tree" + (f" ({why})" if why else "")
    return state_of_snapshot(texts[0], label, texts[1])


def committed_state(stack: str, ref: str = "HEAD", root: Path = ROOT) -> State:
    """The snapshot of a stack committed at git `ref` (empty where it had none: the stack did not exist there,
    and everything is created)."""
    commit = _commit(root, ref)
    if commit is None:
        raise PlanError(f"--from {ref}: {_no_git(root) or 'not a commit in this repository'}")
    return _state_at(stack, ref, commit, root)


def previous_state(stack: str, ref: str | None = None, root: Path = ROOT) -> State:
    """What a plan compares with: the snapshot committed at `ref`, by default at `HEAD` (so that writing the
    working tree's snapshot with `python -m synth` never hides a change); outside a git repository, or in
    one without a commit yet, the working tree's snapshot."""
    if ref is not None:
        return committed_state(stack, ref, root)
    head = _commit(root, "HEAD")
    if head is not None:
        return _state_at(stack, "HEAD", head, root)
    why = _no_git(root) or "the repository has no commit yet"
    return working_tree_state(stack, root, f"{why}: no HEAD to compare with")


def _commit(root: Path, ref: str) -> str | None:
    """The commit `ref` names in the repository at `root`, or None."""
    return (_git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}") or "").strip() or None


def _no_git(root: Path) -> str | None:
    """Why `root` has no git history to read (git missing, or no repository there), or None."""
    if _git(root, "--version") is None:
        return "git is not installed"
    if _git(root, "rev-parse", "--git-dir") is None:
        return "not a git repository"
    return None


def _state_at(stack: str, ref: str, commit: str, root: Path) -> State:
    resources, outputs = _snapshot_files(stack)
    # `./`: relative to `root`, wherever the repository's top level is.
    shown = [_git(root, "show", f"{commit}:./{f}") for f in (resources, outputs)]
    label = f"{resources} committed at {ref} ({commit[:12]})"
    if shown[0] is None:
        label += f": no snapshot of {stack} there, so everything is created"
    return state_of_snapshot(shown[0] or "", label, shown[1] or "")


def _git(root: Path, *args: str) -> str | None:
    """The output of a git command in `root`; None when it fails or git is missing."""
    try:
        result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return None
    return result.stdout if result.returncode == 0 else None


# --- Diffing inputs -----------------------------------------------------------------------------------


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@cache
def _pattern(path: str) -> re.Pattern[str]:
    """`a.b[*].c` matches `a.b[2].c` and everything below it."""
    body = re.escape(path).replace(r"\[\*\]", r"\[\d+\]")
    return re.compile(rf"^{body}(?=$|[.\[])")


def _covers(patterns: Iterable[str], path: str) -> bool:
    return any(_pattern(p).match(path) for p in patterns)


def changed_paths(old: Any, new: Any, unordered: Iterable[str] = (), path: str = "") -> list[str]:
    """Leaf paths where `new` differs from `old`. `None`, absent and an empty map or list are all "no value"
    (as the providers' diffs treat them); set-typed (`unordered`) paths ignore order."""
    unordered = tuple(unordered)
    old, new = (_MISSING if v is None else v for v in (old, new))
    if isinstance(old, list) and isinstance(new, list) and any(_exact(u, path) for u in unordered):
        return [] if sorted(map(_canonical, old)) == sorted(map(_canonical, new)) else [path]
    for container in (dict, list):
        if isinstance(old, container) or isinstance(new, container):
            if not all(isinstance(v, container) or v is _MISSING for v in (old, new)):
                return [path]  # a map became a list or a scalar, or the other way round
            return _changed_children(
                old if old is not _MISSING else container(),
                new if new is not _MISSING else container(),
                unordered,
                path,
            )
    return [] if old == new else [path]


def _changed_children(old: Any, new: Any, unordered: tuple[str, ...], path: str) -> list[str]:
    if isinstance(old, dict):
        return [
            p
            for k in sorted(set(old) | set(new))
            for p in changed_paths(old.get(k), new.get(k), unordered, _child(path, k))
        ]
    return [
        p
        for i in range(max(len(old), len(new)))
        for p in changed_paths(
            old[i] if i < len(old) else None, new[i] if i < len(new) else None, unordered, f"{path}[{i}]"
        )
    ]


def _exact(pattern: str, path: str) -> bool:
    match = _pattern(pattern).match(path)
    return match is not None and match.end() == len(path)


def _value(inputs: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path without list indexes (`None` when absent)."""
    value: Any = inputs
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _active_cluster(kubeconfig: Any) -> Any:
    """The cluster entry of a kubeconfig's current context (pulumi-kubernetes compares only this)."""
    try:
        config = json.loads(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        return next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    except (TypeError, ValueError, KeyError, StopIteration):
        return kubeconfig  # not a kubeconfig we can read: compare it whole


def _replace_reasons(facts: Replacement, old: Resource, new: Resource, paths: list[str]) -> list[Reason]:
    reasons = []
    for p in paths:
        forcing = next((f for f in facts.forces_new if _covers([f], p)), None)
        if forcing is not None:
            reasons.append(Reason(p, f"{_field(forcing)} changed", facts.why.get(forcing, "")))
    for prop in facts.kubeconfig:
        if any(_covers([prop], p) for p in paths) and _active_cluster(
            _value(old.inputs, prop)
        ) != _active_cluster(_value(new.inputs, prop)):
            reasons.append(Reason(f"{prop} (active cluster)", f"{prop} points at another cluster"))
    for prop in facts.forces_new_on_removal:
        if _value(old.inputs, prop) is not None and _value(new.inputs, prop) is None:
            reasons.append(Reason(f"{prop} (removed)", f"{prop} is removed"))
    if facts.exclusive:
        was = {p for p in facts.exclusive if _value(old.inputs, p) is not None}
        now = {p for p in facts.exclusive if _value(new.inputs, p) is not None}
        if was and now and was != now:
            was_, now_ = "/".join(sorted(was)), "/".join(sorted(now))
            reasons.append(Reason(f"{was_} -> {now_}", f"{now_} is set in place of {was_}"))
    return reasons


def _field(pattern: str) -> str:
    """A force-new path as a reviewer reads it: `a[*].b` -> `a[].b`."""
    return pattern.replace("[*]", "[]")


def _forced(type_token: str, reasons: Iterable[Reason]) -> str:
    """`because a changed, b changed (forces a new object)`: what replaces a resource, from its provider's
    facts (`facts.replacement`); reasons with their own why say it instead."""
    what = (
        "provider, and with it every object it manages"
        if type_token.startswith("pulumi:providers:")
        else "object"
        if type_token.startswith("kubernetes:")
        else "cluster"
        if type_token == CLUSTER
        else "resource"
    )
    by_why: dict[str, list[str]] = {}
    for r in reasons:
        by_why.setdefault(r.why or f"forces a new {what}", []).append(r.text)
    return "because " + "; ".join(f"{', '.join(dict.fromkeys(t))} ({why})" for why, t in by_why.items())


def _named_object_keeps_name(old: Resource, new: Resource) -> bool:
    name = _value(new.inputs, "metadata.name")
    return name is not None and all(
        _value(old.inputs, p) == _value(new.inputs, p) for p in ("metadata.name", "metadata.namespace")
    )


# --- Planning -----------------------------------------------------------------------------------------


def plan(before: State, after: State) -> Plan:
    """The steps that take a stack from `before` to `after`, and what a reviewer must see of them."""
    change = _change(before, after)
    findings = [finding for rule in FINDINGS for finding in rule(change)]
    spend = spend_changes(before, after)
    findings += spend.findings()
    findings.sort(key=lambda f: not f.blocking)  # what stops `pulumi up` first
    ordered = sorted(change.steps.values(), key=lambda s: (OPS.index(s.op), s.type, s.name))
    unchanged = len(after.resources) - sum(1 for k in change.steps if k in after.resources)
    return Plan(
        before.label,
        after.label,
        tuple(ordered),
        unchanged,
        tuple(findings),
        spend,
        versions(before, after),
    )


@dataclass(frozen=True)
class Version:
    """What runs in a stack, before and after: `Kubernetes` (the cluster's version) or a chart (by name)."""

    name: str
    before: str | None
    after: str | None

    def __str__(self) -> str:
        if self.after is None:
            return f"{self.name} removed"
        if self.before is None:
            return f"{self.name} {self.after} (new)"
        return f"{self.name} {self.before}" + (f" -> {self.after}" if self.after != self.before else "")


def stack_versions(state: State) -> dict[str, str]:
    """`Kubernetes` -> the eks Cluster's `version`, then each Helm release's chart (by name) -> its `version`,
    as the state records them (a chart's first release)."""
    kubernetes: dict[str, str] = {}
    charts: dict[str, str] = {}
    for r in state.resources.values():
        if r.type == CLUSTER and r.inputs.get("version"):
            kubernetes["Kubernetes"] = str(r.inputs["version"])
        elif r.type == RELEASE and r.inputs.get("version"):
            charts.setdefault(chart_of(r.inputs), str(r.inputs["version"]))
    return kubernetes | dict(sorted(charts.items()))


def versions(before: State, after: State) -> tuple[Version, ...]:
    """The versions of `after` (with those of `before` they replace), then those `after` no longer has. A
    `<chart>-crd(s)` chart moving in lockstep with `<chart>` is left out: its version says nothing more."""
    old, new = stack_versions(before), stack_versions(after)
    both = [Version(n, old.get(n), v) for n, v in new.items()]
    both += [Version(n, v, None) for n, v in old.items() if n not in new]

    def lockstep(v: Version) -> bool:
        base = re.sub(r"-crds?$", "", v.name)
        return base != v.name and (old.get(base), new.get(base)) == (v.before, v.after)

    return tuple(v for v in both if not lockstep(v))


@dataclass(frozen=True)
class Change:
    """Two states, how they match, and the step of every resource that changes (by key; a deleted resource
    by its key in `before`)."""

    before: State
    after: State
    olds: Mapping[str, Resource]
    """Each matched resource of `after` -> its previous self in `before`."""
    steps: Mapping[str, Step]

    def of(self, *ops: Op) -> list[tuple[str, Step]]:
        return [(k, s) for k, s in self.steps.items() if s.op in ops]

    def old(self, key: str) -> Resource:
        """The previous self of a changed resource (of a deleted one too)."""
        return self.olds[key] if key in self.olds else self.before.resources[key]


def region_move(before: State, after: State) -> str | None:
    """`us-west-2 -> eu-west-1` when the stack moves to another region (both known and different)."""
    if before.region and after.region and before.region != after.region:
        return f"{before.region} -> {after.region}"
    return None


def _change(before: State, after: State) -> Change:
    olds = _previous(before, after)
    moved = region_move(before, after)
    steps: dict[str, Step] = {}
    own: dict[str, list[str]] = {}
    """Each matched resource's changed input paths (not what a replaced dependency makes unknown)."""
    for key, new in after.resources.items():
        old = olds.get(key)
        if old is None:
            steps[key] = Step("create", new.type, new.name)
            continue
        facts = replacement_facts(new.type)
        paths = [
            p
            for p in changed_paths(old.inputs, new.inputs, facts.unordered)
            if not _covers(new.ignore_changes, p)
        ]
        own[key] = paths
        reasons = _replace_reasons(facts, old, new, paths) if paths else []
        elsewhere = moved is not None and regional(new.type)
        if elsewhere:
            reasons.insert(0, Reason(f"aws:region {moved}", f"aws:region changes {moved}"))
        if reasons:
            replaced = _forced(new.type, reasons)
            steps[key] = _step("replace", new, reasons, replaced, paths=tuple(paths), region_move=elsewhere)
        elif paths:
            steps[key] = Step("update", new.type, new.name, tuple(paths), paths=tuple(paths))
    _cascade(after, steps)
    new_providers = {k for k, s in steps.items() if s.op == "replace"}
    for key, step in steps.items():
        if step.op == "create":
            continue
        old, new = olds[key], after.resources[key]
        steps[key] = replace(
            step,
            delete_first=step.op == "replace" and _deletes_first(old, new, new.provider in new_providers),
            changes=summarise(old.inputs, new.inputs, own[key]) if own[key] else (),
        )
    matched = {old.key for old in olds.values()}
    for key, old in before.resources.items():
        if key not in matched:
            steps[key] = Step("delete", old.type, old.name)
    return Change(before, after, olds, steps)


def _previous(before: State, after: State) -> dict[str, Resource]:
    """Each resource of `after` -> its previous self in `before`: same key, or one of its aliases."""
    olds = {}
    for key, new in after.resources.items():
        if key in before.resources:
            olds[key] = before.resources[key]
            continue
        alias = next((a for a in new.aliases if a in before.resources and a not in after.resources), None)
        if alias is not None:
            olds[key] = before.resources[alias]
    return olds


def _cascade(after: State, steps: dict[str, Step]) -> None:
    """Replacements propagate through providers and through inputs carrying a replaced resource's outputs."""
    changed = True
    while changed:
        changed = False
        replaced = {k for k, s in steps.items() if s.op == "replace"}
        for key, new in after.resources.items():
            current = steps.get(key)
            if key in replaced or (current is not None and current.op == "create"):
                continue
            facts = replacement_facts(new.type)
            reasons: list[Reason] = []
            unknown: list[Reason] = []
            props = []
            if new.provider in replaced:
                provider = f"its provider {_short(new.provider)} is replaced"
                reasons.append(Reason(provider, provider))
            for prop, deps in new.property_dependencies.items():
                sources = sorted(d for d in deps if d in replaced)
                if not sources:
                    continue
                props.append(prop)
                replaced_ = ", ".join(_short(s) for s in sources)
                origin = Reason(
                    f"{prop} from replaced {replaced_}", f"{prop} comes from replaced {replaced_}"
                )
                if prop in facts.kubeconfig or any(
                    _pattern(f).match(prop) or f.startswith(f"{prop}.") or f.startswith(f"{prop}[")
                    for f in facts.forces_new
                ):
                    reasons.append(origin)
                else:
                    unknown.append(origin)
            paths = tuple(sorted({*(current.paths if current else ()), *props}))
            if reasons:
                steps[key] = _step(
                    "replace", new, reasons, _forced(new.type, reasons), cascaded=True, paths=paths
                )
                changed = True
            elif unknown and current is None:
                later = f"because {', '.join(r.text for r in unknown)} (known once that exists again)"
                steps[key] = _step("update", new, unknown, later, cascaded=True, paths=paths)
                changed = True


def _step(op: Op, new: Resource, reasons: list[Reason], reason: str, **more: Any) -> Step:
    """A replacement (or an update a replacement makes), with what it is `because` of and why, said."""
    return Step(op, new.type, new.name, tuple(r.because for r in reasons), reason=reason, **more)


def _short(key: str | None) -> str:
    qualified, _, name = (key or "").rpartition("::")
    return f"{qualified.split('$')[-1]}::{name}"


def _deletes_first(old: Resource, new: Resource, provider_replaced: bool = False) -> bool:
    """Whether a replacement deletes the old resource before creating the new one. For a resource whose
    provider is replaced the engine does not ask the provider (pulumi/pulumi
    pkg/resource/deploy/step_generator.go `diff`: a changed provider is `ReplaceKeys: ["provider"]` with no
    DeleteBeforeReplace), so only the resource's own option deletes first: the new object goes to the new
    provider's cluster, where nothing of the old one is in its way."""
    if new.delete_before_replace or provider_replaced:
        return new.delete_before_replace
    facts = replacement_facts(new.type)
    return facts.named_delete_before_replace and _named_object_keeps_name(old, new)


# --- Facts of a state ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolCap:
    """What a pool's GPU cap allows, from the stack's `gpuPools` output (`contract.GpuPool`)."""

    limit: Decimal
    """`limits.nvidia.com/gpu`, in the pool's units."""
    unit: str
    """What the limit counts: GPUs, time-slices or MIG devices."""
    per_gpu: int
    """Units one physical GPU provides."""

    @property
    def gpus(self) -> Decimal:
        """The most physical GPUs the cap lets the pool hold."""
        return self.limit / self.per_gpu

    def __str__(self) -> str:
        gpus = f"{self.gpus.normalize():f} GPUs"
        return (
            gpus
            if self.per_gpu == 1
            else f"{gpus} ({self.limit.normalize():f} {self.unit}, {self.per_gpu} per GPU)"
        )


def pool_caps(state: State) -> dict[str, PoolCap]:
    """Each GPU pool's cap by pool name, where the stack's outputs say what it counts. A pool with several
    MIG resources (no `gpuResource`) caps physical GPUs; one whose GPUs partition unlike (no
    `slicesPerGpu` but a `gpuResource`) has no single physical cap and is left out."""
    caps = {}
    for pool in state.outputs.get("gpuPools") or ():
        limit = pool.get("gpuLimit")
        if pool.get("kind") != "gpu" or limit is None:
            continue
        per_gpu = pool.get("slicesPerGpu") if pool.get("gpuResource") else 1
        if not per_gpu:
            continue
        unit = (
            "time-slices"
            if pool.get("timeSlicingReplicas")
            else "MIG devices"
            if pool.get("migProfile") and pool.get("gpuResource")
            else "GPUs"
        )
        caps[str(pool["name"])] = PoolCap(parse_quantity(str(limit)), unit, int(per_gpu))
    return caps


DEFAULT_DELETE_WAIT = go_duration(K8S_DEFAULT_DELETE_TIMEOUT_SECONDS)


# --- Findings: each a pure function of the change --------------------------------------------------------


def _where(step: Step) -> str:
    return f"{step.op} {step.type} {step.name}"


def _region_findings(change: Change) -> list[Finding]:
    moved = region_move(change.before, change.after)
    if moved is None:
        return []
    count = sum(1 for _, s in change.of("replace") if s.region_move)
    # Resources named after the old region's zones have no counterpart there: deleted, and created anew.
    anew = sum(1 for _, s in change.of("delete") if regional(s.type))
    target = change.after.region
    return [
        Finding(
            f"aws:region {moved}: every regional resource is replaced ({count}, and {anew} named after the "
            "old region's zones deleted and created anew), the cluster and every object in it with it: a "
            f"new, empty cluster in {target} (no workloads, volumes or metrics of the old one), and the old "
            "one deleted at the end of the same `up`. That is a new stack, not a change: deploy one in "
            f"{target}, move the workloads, then destroy this one (docs/operations.md)",
            blocking=True,
        )
    ]


def _kubernetes_version_findings(change: Change) -> list[Finding]:
    findings = []
    for key, step in change.of("update"):
        if step.type != CLUSTER or "version" not in step.paths:
            continue
        current, target = (
            change.old(key).inputs.get("version"),
            change.after.resources[key].inputs.get("version"),
        )
        refused = control_plane_version_move(str(current), str(target)) if current and target else None
        if refused:
            findings.append(
                Finding(
                    f"{_where(step)}: {KUBERNETES_VERSION} {current} -> {target}: {refused}", blocking=True
                )
            )
    return findings


def _collides(change: Change, key: str, step: Step) -> list[str]:
    """The identity inputs a create-first replacement keeps (empty when it keeps none): the new resource would
    take the old one's name (or the old one's delete would undo it). Values that come from a replaced
    resource are new; a resource of a replaced provider or another region lands elsewhere."""
    facts = replacement_facts(step.type)
    old, new = change.old(key), change.after.resources[key]
    if step.delete_first or step.region_move or not facts.identity:
        return []
    replaced = {k for k, s in change.steps.items() if s.op == "replace"}
    if new.provider in replaced:
        return []
    kept = []
    for path in facts.identity:
        value = _value(new.inputs, path)
        top = re.split(r"[.\[]", path)[0]
        fresh = any(d in replaced for d in new.property_dependencies.get(top, ()))
        if value is None or fresh or value != _value(old.inputs, path):
            return []
        kept.append(path)
    return kept


def _replacement_findings(change: Change) -> list[Finding]:
    findings = []
    replaced = {k for k, s in change.steps.items() if s.op == "replace"}
    for key, step in change.of("replace"):
        old, new = change.old(key), change.after.resources[key]
        if step.type in CRITICAL_REPLACEMENTS:
            findings.append(Finding(f"replace {step.type} {step.name} ({', '.join(step.because)})"))
        # The engine refuses to replace a resource its state marks protected, unless the program unprotects
        # it first.
        if old.protect and new.protect:
            findings.append(
                Finding(f"{_where(step)}: the resource is protected; `pulumi up` refuses", blocking=True)
            )
        kept = _collides(change, key, step)
        if kept:
            findings.append(
                Finding(
                    f"{_where(step)} creates the new one first with the same {', '.join(kept)}: it collides "
                    "with the old one (or the old one's delete undoes it); give the resource "
                    "`delete_before_replace=True` or change its name",
                    blocking=True,
                )
            )
        # Into a new cluster (a replaced provider) the release neither collides nor stops the old one.
        if new.provider not in replaced:
            findings += _release_replacement_findings(step, new)
    return findings


def _release_replacement_findings(step: Step, new: Resource) -> list[Finding]:
    """A Helm release replaced create-first cannot take over what the old one owns outside its namespace;
    replaced delete-first, what it runs is gone until the new one is ready."""
    scope = CHARTS.get(chart_of(new.inputs)) if step.type == RELEASE else None
    if scope is None or step.cascaded:
        return []
    if not step.delete_first:
        return [
            Finding(
                f"{_where(step)} installs the new release before uninstalling the old one: Helm refuses it, "
                f"since the old release owns its {scope.cluster_scoped} (invalid ownership metadata); give "
                "the release `delete_before_replace=True`",
                blocking=True,
            )
        ]
    outage = (
        [Finding(f"{_where(step)} uninstalls the old release first: {scope.outage}")] if scope.outage else []
    )
    return outage + _crd_findings(step, new)


def _crd_findings(step: Step, old: Resource) -> list[Finding]:
    scope = CHARTS.get(chart_of(old.inputs)) if step.type == RELEASE else None
    if scope is None or not scope.crds:
        return []
    return [
        Finding(
            f"{_where(step)}: deleting the {chart_of(old.inputs)} release deletes its CRDs, and with them "
            f"every {scope.crds} object in the cluster, also those this stack did not declare"
        )
    ]


def _recreate_collision_findings(change: Change) -> list[Finding]:
    """A created resource naming the same physical resource as a deleted one (an access entry of the same
    principal, say): the engine creates before it deletes, so the create collides with the old one."""
    replaced = {k for k, s in change.steps.items() if s.op == "replace"}
    deleted = [(change.old(k), s) for k, s in change.of("delete")]
    findings = []
    for key, step in change.of("create"):
        new = change.after.resources[key]
        identity = replacement_facts(new.type).identity
        tops = {re.split(r"[.\[]", p)[0] for p in identity}
        if not identity or any(d in replaced for t in tops for d in new.property_dependencies.get(t, ())):
            continue
        values = [_value(new.inputs, p) for p in identity]
        for old, old_step in deleted:
            if (
                old.type == new.type
                and None not in values
                and values == [_value(old.inputs, p) for p in identity]
            ):
                findings.append(
                    Finding(
                        f"{_where(step)} has the {', '.join(identity)} of {_where(old_step)}: `pulumi up` "
                        "creates before it deletes, so the create collides with the old one (for an access "
                        "entry EKS answers ResourceInUseException: one entry per principal). Make it two "
                        "changes: remove the old one and `pulumi up`, then add the new one and `pulumi up`",
                        blocking=True,
                    )
                )
    return findings


def _retained_findings(change: Change) -> list[Finding]:
    """A retained namespace (`retain_on_delete`, the teams') outlives its removal from the program, with
    everything in it; declared anew, it collides with what was left."""
    findings = []
    for key, step in change.of("delete"):
        old = change.old(key)
        if not old.retain_on_delete or step.type != NAMESPACE:
            continue
        name = _value(old.inputs, "metadata.name")
        findings.append(
            Finding(
                f"{_where(step)}: retained (retainOnDelete), Pulumi only forgets it; namespace {name} stays "
                "in the cluster with everything in it: workloads keep running (and holding their GPUs), "
                "PersistentVolumeClaims keep their volumes. To remove them: `kubectl delete namespace "
                f"{name}` (volumes of a StorageClass that reclaims Delete go with their claims)"
            )
        )
    for key, step in change.of("create"):
        new = change.after.resources[key]
        if new.retain_on_delete and step.type == NAMESPACE:
            name = _value(new.inputs, "metadata.name")
            findings.append(
                Finding(
                    f"{_where(step)}: if namespace {name} exists already (kept when a team of that name was "
                    f"removed), the create fails: {K8S_CREATE_REFUSES_EXISTING}. Delete it first, or adopt "
                    "it with `pulumi import` (docs/operations.md#teams)"
                )
            )
    return findings


def _refused_update_findings(change: Change) -> list[Finding]:
    findings = []
    for _, step in change.of("update"):
        for refused in replacement_facts(step.type).refused_updates:
            if any(_covers([refused.path], p) for p in step.paths):
                findings.append(
                    Finding(f"{_where(step)} changes {refused.path}, which {refused.why}", blocking=True)
                )
    return findings


def _deletion_findings(change: Change) -> list[Finding]:
    findings = []
    for key, step in change.of("delete"):
        old = change.old(key)
        findings += _crd_findings(step, old)
        if old.protect:
            findings.append(
                Finding(f"{_where(step)}: the resource is protected; `pulumi up` refuses", blocking=True)
            )
    return findings


def _karpenter_findings(change: Change) -> list[Finding]:
    """Deleting a NodePool or an EC2NodeClass (also to replace it) makes Karpenter drain and terminate nodes,
    and pulumi-kubernetes waits for it."""
    findings = []
    for key, step in change.of("delete", "replace"):
        if step.type == NODE_POOL:
            findings.append(Finding(f"{_where(step)}: {_node_pool_deletion(change.old(key))}"))
        elif step.type == NODE_CLASS:
            findings.append(
                Finding(
                    f"{_where(step)}: Karpenter's finalizer holds the delete until no node launched from "
                    "this class remains (they go as their pool drifts, within its budgets, or with their "
                    f"pool); pulumi-kubernetes waits up to {DEFAULT_DELETE_WAIT}, then fails, and the next "
                    "`up` retries"
                )
            )
    return findings


def _node_pool_deletion(old: Resource) -> str:
    """What deleting a NodePool does: the drain of all its nodes at once, bounded by its grace period, and
    how long `pulumi up` waits for it (foreground deletion: the NodeClaims block their pool's delete)."""
    grace = _value(old.inputs, "spec.template.spec.terminationGracePeriod")
    timeout = old.delete_timeout or f"{K8S_DEFAULT_DELETE_TIMEOUT_SECONDS}s"
    wait = go_duration(duration_seconds(timeout))
    drain = (
        f"each drain waits up to the pool's terminationGracePeriod ({grace}) for pods to leave, then "
        "terminates the node anyway"
        if grace
        else _drain(old)
    )
    return (
        "Karpenter deletes every NodeClaim of the pool, draining and terminating its nodes at once "
        f"(disruption budgets do not apply); {drain}. `pulumi up` waits for the NodePool to be gone, which "
        f"its NodeClaims hold until their nodes are, for up to {wait}"
        + (
            ""
            if old.delete_timeout
            else " (pulumi-kubernetes' default), then fails and the next `up` waits again"
        )
    )


def _job_findings(change: Change) -> list[Finding]:
    """Creating a Job runs it (and `pulumi up` waits for it); on a Karpenter pool that launches a node."""
    findings = []
    for key, step in change.of("create", "replace"):
        if step.type != JOB:
            continue
        pool = _value(change.after.resources[key].inputs, "spec.template.spec.nodeSelector")
        where = (
            f" on a node Karpenter launches in pool {pool[NODEPOOL_LABEL]}"
            if pool and NODEPOOL_LABEL in pool
            else ""
        )
        again = " again" if step.op == "replace" else ""
        findings.append(Finding(f"{_where(step)}: the Job runs{again}{where}, and `pulumi up` waits for it"))
    return findings


def _offering_findings(change: Change) -> list[Finding]:
    """Whether the region offers a pool's instance types is not known offline (no per-region offering table
    could be sourced: EC2 answers DescribeInstanceTypeOfferings per account and region only), so say so
    where it matters: a new pool, new instance requirements, a new region."""
    region = change.after.region
    findings = []
    for key, step in change.of("create", "update", "replace"):
        if step.type != NODE_POOL or region is None:
            continue
        moved = step.op != "update" or any(p.startswith(REQUIREMENTS) for p in step.paths)
        if not moved:
            continue
        requirements = _value(change.after.resources[key].inputs, REQUIREMENTS) or []
        chosen = {r["key"]: r.get("values", []) for r in requirements if r.get("operator") == "In"}
        patterns = chosen.get(INSTANCE_TYPE) or [f"{f}.*" for f in chosen.get(INSTANCE_FAMILY, [])]
        if not patterns:
            continue
        findings.append(
            Finding(
                f"{_where(step)}: whether {region} offers the pool's instance types "
                f"({', '.join(patterns)}) is not checked (no per-region offering table can be had "
                f"offline); `aws ec2 describe-instance-type-offerings --region {region} --location-type "
                f"availability-zone --filters Name=instance-type,Values={','.join(patterns)}` lists the "
                "zones that do"
            )
        )
    return findings


def _gpu_cap_findings(change: Change) -> list[Finding]:
    """A pool that shares its GPUs caps slices: a new sharing ratio moves its physical GPU cap even where
    `limits.nvidia.com/gpu` stays."""
    old_caps, new_caps = pool_caps(change.before), pool_caps(change.after)
    findings = []
    for name, new in new_caps.items():
        old = old_caps.get(name)
        if old is None or old.gpus == new.gpus or (old.per_gpu == 1 and new.per_gpu == 1):
            continue
        findings.append(
            Finding(
                f"pool {name}: its GPU cap goes from {old} to {new}: the pool may now hold "
                f"{'more' if new.gpus > old.gpus else 'fewer'} physical GPUs"
            )
        )
    return findings


def _zone(inputs: Mapping[str, Any]) -> list[str] | None:
    """The zones a NodePool's requirements pin it to, or None."""
    requirements = _value(inputs, REQUIREMENTS) or []
    return next((r.get("values") for r in requirements if r.get("key") == ZONE_LABEL), None)


def _placement_zone_findings(change: Change) -> list[Finding]:
    """A cluster placement group lives in one zone (the first instance's): a pool with one that moves to
    another zone cannot launch its replacements into the group while the old zone's nodes are in it, so the
    drift that moves them stalls."""
    classes = {
        _value(r.inputs, "metadata.name"): r for r in change.after.resources.values() if r.type == NODE_CLASS
    }
    findings = []
    for key, step in change.of("update"):
        if step.type != NODE_POOL:
            continue
        old, new = _zone(change.old(key).inputs), _zone(change.after.resources[key].inputs)
        node_class = classes.get(
            _value(change.after.resources[key].inputs, "spec.template.spec.nodeClassRef.name")
        )
        if old is None or new is None or old == new or node_class is None:
            continue
        if not _value(node_class.inputs, "spec.placementGroupSelector"):
            continue
        pool = _value(change.after.resources[key].inputs, "metadata.name")
        findings.append(
            Finding(
                f"{_where(step)}: moves from zone {', '.join(old)} to {', '.join(new)} with a cluster "
                "placement group, which lives in the zone of the instances it holds: Karpenter cannot launch "
                "the replacements into it while the old zone's nodes are there, so the drift stalls. Let the "
                "pool's nodes go first (when no job runs: kubectl delete nodeclaim -l "
                f"karpenter.sh/nodepool={pool}), then the new ones launch in the new zone"
            )
        )
    return findings


def _cluster_zones(state: State, cluster: Resource) -> list[str]:
    """The zones of the declared subnets a cluster depends on (none when it uses existing subnets)."""
    subnets = [state.resources.get(d) for d in cluster.dependencies]
    return sorted(
        {
            str(s.inputs["availabilityZone"])
            for s in subnets
            if s and s.type == SUBNET and s.inputs.get("availabilityZone")
        }
    )


def _cluster_zone_findings(change: Change) -> list[Finding]:
    """EKS refuses a subnet update that changes the cluster's set of zones; other subnets in the same zones
    are an update."""
    findings = []
    for key, step in change.of("update"):
        if step.type != CLUSTER or not any("SubnetIds" in p or p.startswith("subnetIds") for p in step.paths):
            continue
        old = _cluster_zones(change.before, change.old(key))
        new = _cluster_zones(change.after, change.after.resources[key])
        if not old or not new or old == new:
            continue
        findings.append(
            Finding(
                f"{_where(step)}: its subnets move from zones {', '.join(old)} to {', '.join(new)}, which "
                f"UpdateClusterConfig refuses: {CLUSTER_SUBNET_ZONES}. Keep {AVAILABILITY_ZONES} at "
                f"{len(old)}, or deploy the new zones as a new stack, move the workloads there and destroy "
                "this one (docs/operations.md)",
                blocking=True,
            )
        )
    return findings


def _pools_of_class(state: State, node_class: str) -> list[Resource]:
    """The NodePools of a state that launch their nodes from the EC2NodeClass named `node_class`."""
    return [
        r
        for r in state.resources.values()
        if r.type == NODE_POOL and _value(r.inputs, "spec.template.spec.nodeClassRef.name") == node_class
    ]


def _budgets(pool: Resource) -> str:
    """A NodePool's disruption budgets as configured (`nodes "0" for Drifted from "0 7 * * mon-fri" for
    12h; nodes "1"`), or Karpenter's default."""
    said = []
    for budget in _value(pool.inputs, "spec.disruption.budgets") or []:
        text = f'nodes "{budget.get("nodes")}"'
        text += f" for {', '.join(budget['reasons'])}" if budget.get("reasons") else ""
        text += f' from "{budget["schedule"]}" for {budget.get("duration")}' if budget.get("schedule") else ""
        said.append(text)
    return "; ".join(said) or f'none set, so Karpenter\'s default nodes "{DEFAULT_DISRUPTION_BUDGET}"'


def _drain(pool: Resource) -> str:
    grace = _value(pool.inputs, "spec.template.spec.terminationGracePeriod")
    if grace:
        return f"each drain waits up to its terminationGracePeriod ({grace}), then terminates the node anyway"
    return (
        "with no terminationGracePeriod a drain waits as long as PodDisruptionBudgets or "
        "karpenter.sh/do-not-disrupt pods block it"
    )


def _narrowed(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    """The requirements a node that fitted `old` may no longer fit under `new`, as a reviewer reads them
    (Karpenter drifts a node whose labels no longer fit its pool's requirements)."""
    before = {(r.get("key"), r.get("operator")): r for r in old}
    # Where both pin the instance types, the types say which nodes still fit; the labels of a type
    # (karpenter.k8s.aws/instance-family, -gpu-count...) follow from it.
    pinned = all(
        any(r.get("key") == INSTANCE_TYPE and r.get("operator") == "In" for r in rs) for rs in (old, new)
    )
    said = []
    for r in new:
        key, op, values = r.get("key"), r.get("operator"), set(r.get("values") or [])
        if pinned and str(key).startswith(INSTANCE_LABELS):
            continue
        was = before.get((key, op))
        if was is None:
            said.append(f"{key} {op} {', '.join(sorted(values))}".rstrip() + " (new)")
            continue
        previous = set(was.get("values") or [])
        if op == "In" and previous - values:
            said.append(f"{key} no longer allows {', '.join(sorted(previous - values))}")
        elif op == "NotIn" and values - previous:
            said.append(f"{key} now excludes {', '.join(sorted(values - previous))}")
        elif op in ("Gt", "Gte", "Lt", "Lte") and values != previous:
            [bound], [old_bound] = values or {"0"}, previous or {"0"}
            tighter = int(bound) > int(old_bound) if op in ("Gt", "Gte") else int(bound) < int(old_bound)
            if tighter:
                said.append(f"{key} {op} {old_bound} -> {bound}")
    return said


def _drift_reasons(step: Step, old: Resource, new: Resource) -> list[str]:
    """What in an update of a NodePool or an EC2NodeClass makes Karpenter replace nodes, and which nodes."""
    own = () if step.cascaded else step.paths
    if step.type == NODE_POOL:
        hashed = sorted(
            {
                _top(p, 3)
                for p in own
                if _covers([NODE_POOL_HASHED], p) and not _covers([NODE_POOL_REQUIREMENTS], p)
            }
        )
        reasons = [f"{', '.join(hashed)} (in the NodePool's hash): every node"] if hashed else []
        if any(_covers([NODE_POOL_REQUIREMENTS], p) for p in own):
            narrowed = _narrowed(
                _value(old.inputs, NODE_POOL_REQUIREMENTS) or [],
                _value(new.inputs, NODE_POOL_REQUIREMENTS) or [],
            )
            reasons += [f"requirement {n}: nodes that no longer fit" for n in narrowed]
        return reasons
    hashed = sorted(
        {_top(p, 2) for p in own if p.startswith("spec.") and not _covers(NODE_CLASS_NOT_HASHED, p)}
    )
    reasons = [f"{', '.join(hashed)} (in the EC2NodeClass's hash): every node"] if hashed else []
    for path, which in NODE_CLASS_DYNAMIC_DRIFT.items():
        if any(_covers([path], p) for p in own):
            reasons.append(f"{path}: {which}")
    return reasons


def _top(path: str, depth: int) -> str:
    """The first `depth` keys of an input path (`spec.template.spec`), list indexes dropped."""
    return ".".join(re.sub(r"\[\d+\]", "", path).split(".")[:depth])


def _drift_findings(change: Change) -> list[Finding]:
    """An update of a NodePool's template or of an EC2NodeClass that Karpenter drifts on replaces the pool's
    nodes after `pulumi up` (which does not wait for it), a few at a time within the pool's disruption
    budgets; `spec.disruption`, `spec.limits` and `spec.weight` drift nothing."""
    findings = []
    for key, step in change.of("update"):
        if step.type not in (NODE_POOL, NODE_CLASS):
            continue
        new = change.after.resources[key]
        reasons = _drift_reasons(step, change.old(key), new)
        if not reasons:
            continue
        pools = (
            [new]
            if step.type == NODE_POOL
            else _pools_of_class(change.after, _value(new.inputs, "metadata.name"))
        )
        for pool in pools:
            name = _value(pool.inputs, "metadata.name")
            findings.append(
                Finding(
                    f"{_where(step)}: Karpenter replaces nodes of pool {name} as drifted "
                    f"({'; '.join(reasons)}), after `pulumi up` and as its disruption budgets allow "
                    f"({_budgets(pool)}); {_drain(pool)}"
                )
            )
    return findings


def _placement_group_deletion_findings(change: Change) -> list[Finding]:
    """A placement group its pool stops using is deleted in the same `up` that updates the node class; EC2
    refuses while an instance is in it, and the pool's nodes leave it only as they drift."""
    source = replacement_facts(PLACEMENT_GROUP).source
    refused = f"InvalidPlacementGroup.InUse; {source.repo} {source.path}"
    findings = []
    for key, step in change.of("delete"):
        if step.type != PLACEMENT_GROUP:
            continue
        group = change.old(key).inputs.get("name")
        for class_key, class_step in change.of("update"):
            was = change.old(class_key)
            if (
                class_step.type != NODE_CLASS
                or _value(was.inputs, "spec.placementGroupSelector.name") != group
            ):
                continue
            for pool in _pools_of_class(change.after, _value(was.inputs, "metadata.name")):
                name = _value(pool.inputs, "metadata.name")
                in_group = f"karpenter.sh/nodepool={name},{PLACEMENT_GROUP_LABEL}"
                findings.append(
                    Finding(
                        f"{_where(step)}: EC2 refuses to delete a placement group while an instance is in "
                        f"it ({refused}), and pool {name}'s nodes leave it only as they drift after the "
                        f"update of {class_step.name}, as its disruption budgets allow ({_budgets(pool)}): "
                        "`pulumi up` applies the rest, then fails here while any is left (the next `up` "
                        "retries). Let the pool's nodes go first: `pulumi up --target` the node class's URN "
                        f"(`pulumi stack --show-urns`), wait until `kubectl get nodeclaims -l {in_group}` "
                        "lists none (or, when no job runs, delete those), then `pulumi up`"
                    )
                )
    return findings


def _prometheus_volume_findings(change: Change) -> list[Finding]:
    """A larger Prometheus volume requested through the chart leaves the existing claim at its size."""
    findings = []
    for key, step in change.of("update"):
        if step.type != RELEASE or PROMETHEUS_STORAGE not in step.paths:
            continue
        old, new = change.old(key).inputs, change.after.resources[key].inputs
        if chart_of(new) != STACK_CHART:
            continue
        was, now = _value(old, PROMETHEUS_STORAGE), _value(new, PROMETHEUS_STORAGE)
        if was is None or now is None or parse_quantity(str(now)) <= parse_quantity(str(was)):
            continue
        retention = _value(new, "values.prometheus.prometheusSpec.retentionSize")
        findings.append(
            Finding(
                f"{_where(step)}: Prometheus's volume stays {was}: {VOLUME_NOT_RESIZED}. Prometheus then "
                f"keeps up to retentionSize {retention} on a {was} disk, which fills first. After "
                f'`pulumi up`, resize its claim to {now} by hand (docs/observability.md, "Resizing the '
                'Prometheus volume")'
            )
        )
    return findings


FINDINGS: tuple[Callable[[Change], list[Finding]], ...] = (
    _region_findings,
    _kubernetes_version_findings,
    _cluster_zone_findings,
    _replacement_findings,
    _recreate_collision_findings,
    _refused_update_findings,
    _deletion_findings,
    _retained_findings,
    _karpenter_findings,
    _job_findings,
    _offering_findings,
    _gpu_cap_findings,
    _placement_zone_findings,
    _placement_group_deletion_findings,
    _drift_findings,
    _prometheus_volume_findings,
)
"""The rules a plan is read with, in the order their findings are listed (blocking ones first)."""


# --- Rendering ----------------------------------------------------------------------------------------

_TEXT_OP = {"create": "+ create ", "update": "~ update ", "replace": "+-replace", "delete": "- delete "}


def header(stack: str, p: Plan) -> str:
    """One line for a stack: what `pulumi up` does, the pools and what each may spend, what runs."""
    counts = ", ".join(f"{p.count(op)} {op}" for op in ("create", "update", "replace", "delete"))
    parts = [f"{counts} ({p.unchanged} unchanged)"]
    pools = p.spend.header() if p.spend else ""
    parts += [f"pools {pools}"] if pools else []
    kubernetes = [str(v) for v in p.versions if v.name == "Kubernetes"]
    charts = [str(v) for v in p.versions if v.name != "Kubernetes"]
    parts += kubernetes + ([", ".join(charts)] if charts else [])
    return f"{stack}: {' · '.join(parts)}"


def _order(step: Step) -> str:
    return ("delete first" if step.delete_first else "create first") if step.op == "replace" else ""


def render_text(stack: str, p: Plan, verbose: bool = False) -> str:
    """The plan for a terminal: each step with why it is replaced and what changes, condensed unless
    `verbose` (which also lists every changed input path)."""
    lines = [f"Plan for {stack}: {p.after}, compared with {p.before}", header(stack, p), ""]
    if p.findings:
        lines.append("Attention:")
        lines += [f"  {'!!' if f.blocking else ' !'} {f.message}" for f in p.findings]
        lines.append("")
    for step in p.steps:
        lines += _step_lines(step, verbose)
    if not p.steps:
        lines.append("  no changes")
    lines += p.spend.text() if p.spend else []
    return "\n".join(lines) + "\n"


def _step_lines(step: Step, verbose: bool) -> list[str]:
    order = f" ({_order(step)})" if step.op == "replace" else ""
    line = f"  {_TEXT_OP[step.op]}{order} {step.type} {step.name}"
    line += f"  {step.reason}" if step.reason else ""
    details = [str(c) for c in _changes(step, verbose)] + (
        [f"paths: {', '.join(step.paths)}"] if verbose and step.paths else []
    )
    return [line] + [f"      {d}" for d in details]


def _changes(step: Step, verbose: bool) -> tuple[Item, ...]:
    return step.changes if verbose else condense(step.changes)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """`text` as a code span in a table cell (backticks inside it fenced by doubled ones)."""
    fence, pad = ("``", " ") if "`" in text else ("`", "")
    return f"{fence}{pad}{_cell(text)}{pad}{fence}"


def render_markdown(stack: str, p: Plan, verbose: bool = False) -> str:
    """The plan as a pull-request comment section."""
    lines = [f"### `{stack}`: {_cell(header(stack, p).removeprefix(f'{stack}: '))}", ""]
    lines += [f"Declared by {p.after}, compared with {p.before}.", ""]
    if p.findings:
        lines += ["> [!WARNING]", "> **Needs attention**"]
        lines += [
            f"> - {'**cannot deploy as planned:** ' if f.blocking else ''}{_cell(f.message)}"
            for f in p.findings
        ]
        lines.append("")
    if p.steps:
        lines += ["| op | type | name | what changes |", "|---|---|---|---|"]
        for step in p.steps:
            op = f"{step.op} ({_order(step)})" if step.op == "replace" else step.op
            what = [_cell(step.reason)] if step.reason else []
            what += [_code(str(c)) for c in _changes(step, verbose)]
            what += (
                [f"paths: {', '.join(_code(path) for path in step.paths)}"] if verbose and step.paths else []
            )
            lines.append(f"| {op} | `{step.type}` | `{_cell(step.name)}` | {'<br>'.join(what)} |")
    else:
        lines.append("No changes.")
    lines += p.spend.markdown() if p.spend else []
    return "\n".join(lines) + "\n"


def render_json(p: Plan) -> str:
    """`[{"op", "type", "name", ...}, ...]`, unchanged resources omitted; a changed resource also has its
    `changes` (by meaning, in full), every changed input path (`paths`) and, when replaced (or updated by a
    replacement), the `reason`."""
    return json.dumps([s.json() for s in p.steps], indent=2) + "\n"


# --- Worst-case spend ---------------------------------------------------------------------------------
# What the declared NodePools may cost at once, before and after (issue 21). Computed from the NodePool and
# NodeOverlay objects each state records (`pools.declared`), so any old ref or snapshot can be priced, with
# the same prices, capacities and solver as `synth cost`.

SPEND_ATTENTION = Decimal("0.25")
"""A pool's (or the stack's) worst case rising by more than this share is an Attention line."""


@dataclass(frozen=True)
class SpendChange:
    """One pool's worst case before and after; None where the pool does not exist."""

    pool: str
    before: PoolSpend | None
    after: PoolSpend | None

    @staticmethod
    def _usd_per_hour(spend: PoolSpend | None) -> Decimal | None:
        """USD per hour; None when unbounded (or nothing is priced)."""
        if spend is None:
            return Decimal(0)
        return spend.worst_case.usd_per_hour if spend.bounded and spend.worst_case else None

    @property
    def old(self) -> Decimal | None:
        return self._usd_per_hour(self.before)

    @property
    def new(self) -> Decimal | None:
        return self._usd_per_hour(self.after)

    @property
    def changed(self) -> bool:
        return self.old != self.new or (self.before is None) != (self.after is None)


@dataclass(frozen=True)
class SpendChanges:
    """Every pool of either state, in the order the new state declares them (removed pools last)."""

    pools: tuple[SpendChange, ...]

    def total(self, side: Literal["old", "new"]) -> Decimal | None:
        amounts = [getattr(p, side) for p in self.pools]
        return None if None in amounts else sum(amounts, Decimal(0))

    def findings(self) -> list[Finding]:
        """An Attention line for each pool whose worst case rises by more than 25 % (or becomes unbounded),
        and for the stack's total."""
        added = [
            Finding(
                f"new pool {p.pool}: its limits let it run up to {_hourly(p.new)} at once (at on-demand list "
                "price; more while its nodes are replaced, `synth cost`)"
            )
            for p in self.pools
            if p.before is None and p.after is not None
        ]
        rises = [(f"pool {p.pool}", p.old, p.new) for p in self.pools if p.changed and p.before is not None]
        rises.append(("the stack's total", self.total("old"), self.total("new")))
        return added + [
            Finding(f"worst-case spend of {what} rises {_spend_change(old, new)} (at on-demand list price)")
            for what, old, new in rises
            if _rises_much(old, new)
        ]

    def header(self) -> str:
        """`gpu-inference $16.38/h, gpu-mig $55.04/h (new)`: each pool's worst case after the change (what it
        was, where that differs), by name."""
        said = []
        for p in sorted(self.pools, key=lambda p: p.pool):
            if p.after is None:
                said.append(f"{p.pool} removed")
            elif p.before is None:
                said.append(f"{p.pool} {_hourly(p.new)} (new)")
            else:
                said.append(f"{p.pool} {_spend_change(p.old, p.new) if p.changed else _hourly(p.new)}")
        return ", ".join(said)

    def text(self) -> list[str]:
        lines = ["", f"Worst-case spend ({price_table_source().label}):"]
        lines += [f"  {p.pool}: {_spend_change(p.old, p.new)}" for p in self.pools if p.changed]
        lines.append(f"  total: {_spend_change(self.total('old'), self.total('new'))}")
        return lines

    def markdown(self) -> list[str]:
        lines = ["", f"**Worst-case spend** ({price_table_source().label}):", ""]
        lines += ["| pool | before | after |", "|---|---|---|"]
        lines += [f"| `{p.pool}` | {_hourly(p.old)} | {_hourly(p.new)} |" for p in self.pools if p.changed]
        lines.append(f"| **total** | {_hourly(self.total('old'))} | {_hourly(self.total('new'))} |")
        return lines


def spend_changes(before: State, after: State) -> SpendChanges:
    """The worst case of every pool of `before` and `after`, from the objects each records."""

    def spends(state: State) -> dict[str, PoolSpend]:
        return {s.pool: s for s in declared_spends(r.inputs for r in state.resources.values())}

    old, new = spends(before), spends(after)
    names = list(new) + [name for name in old if name not in new]
    return SpendChanges(tuple(SpendChange(name, old.get(name), new.get(name)) for name in names))


def _rises_much(old: Decimal | None, new: Decimal | None) -> bool:
    if new is None:
        return old is not None
    return old is not None and new > old * (1 + SPEND_ATTENTION)


def _hourly(amount: Decimal | None) -> str:
    return "unbounded" if amount is None else f"{usd(amount)}/h"


def _spend_change(old: Decimal | None, new: Decimal | None) -> str:
    text = f"{_hourly(old)} -> {_hourly(new)}"
    if old is None or new is None or old == new:
        return text if old != new or old is None else f"{_hourly(new)} (unchanged)"
    share = f" ({(new - old) / old:+.0%})" if old else ""
    return text + share
