"""gpu-node-guard: keeps GPU nodes from getting stuck. Runs in the cluster; Python 3.11+, standard library
only.

Shipped in a ConfigMap by `components/gpu_node_guard` and run by a two-replica Deployment on the system nodes.
The replicas elect a leader through a coordination.k8s.io Lease, as client-go's leader election does (lease
15 s, renew deadline 10 s, retry 2 s); only the leader acts. Every `syncIntervalSeconds`, and within a second
or two of any change to a node of a MIG pool (a watch), the leader lists the Nodes and Karpenter NodeClaims of
the pools it watches (label selector `karpenter.sh/nodepool in (...)`), decides (`decide`, pure) and acts:

1. MIG gate. A node of a MIG pool starts with the startup taint `gpu-eks.io/mig-pending` and the label
   `nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change`, so the device plugin does not run and never
   advertises whole GPUs before the MIG manager has partitioned them (Karpenter would take them as the node's
   capacity and launch more nodes than needed). The GPU Operator removes that label from a node until NFD has
   labelled it a GPU node and then sets `true` where it finds none; while the gate is on, the guard sets it
   back to `paused-for-mig-change` whenever it is anything else (but `false`). When the MIG manager has
   labelled the node `nvidia.com/mig.config.state=success`, the guard removes the taint and sets the label to
   `true` (a JSON patch that first tests what it read). On `failed` the taint stays, the device plugin stays
   paused and a Warning event on the Node says why.
2. Watchdog. A NodeClaim of a watched pool still not `Initialized` once its deadline passed is deleted (with
   uid and resourceVersion preconditions) and a Warning event on it says why; Karpenter then launches another.
   The deadline is the pool's initialization timeout after launch, and on MIG pools after the last progress
   of the MIG manager (`pending`, `rebooting`; recorded on the Node in `gpu-eks.io/mig-progress`), at most
   three timeouts after launch. A NodeClaim is deleted only on evidence from its Node: the Node is absent, not
   Ready, still carries a startup taint (or a taint Karpenter waits for), or has zero allocatable of a
   resource the NodeClaim requests. A Node that meets Karpenter's own criteria is left alone (Karpenter has
   not caught up yet). The whole watchdog pass is skipped while Karpenter's leader Lease is stale, missing,
   or was taken over less than `karpenterSettleSeconds` ago: a NodeClaim deleted then would only be
   terminated once Karpenter runs again, perhaps after its node became healthy.
3. Circuit breaker, per pool: after `maxConsecutiveDeletions` deletions in a row with no NodeClaim of the
   pool initializing since the last of them, it latches open: a failure that repeats on every launch is not
   fixed by another launch. It closes only when a NodeClaim of the pool initializes (its `Initialized`
   condition turned True after the last counted deletion) or a person clears the pool's entry in the
   history, never by the clock. Besides, at most `maxDeletionsPerHour` deletions in any hour, and none while
   more of the pool's NodeClaims are uninitialized than 20 % of them rounded up to a whole NodeClaim,
   Karpenter's own node-repair threshold. A NodeClaim the breaker holds stays (Warning events on it and on
   its NodePool, the `gpu_eks_node_guard_breaker_open` metric). The history (per pool: the last hour's
   deletions, the streak and when its last deletion was counted) lives in the leader Lease
   (`gpu-eks.io/deletions`), written before each deletion with the Lease's resourceVersion, so it survives a
   restart and a second replica can neither lose it nor act on a stale copy.

`/metrics` on the `metrics` port serves Prometheus text format; `/healthz` fails once neither a sync (leader)
nor a Lease round-trip (standby) succeeded for three sync intervals. It talks to the API server with its
service account token; the RBAC in `components/gpu_node_guard/manifests.py` grants exactly the requests of
`Api` (checked by the tests)."""

import datetime
import functools
import json
import logging
import math
import os
import re
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""Set by Karpenter on a launched NodeClaim: the events name it, so a person sees which type fails."""
NODEPOOL_OWNER_KIND = "NodePool"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STATE_SUCCESS = "success"
MIG_STATE_FAILED = "failed"
MIG_PROGRESS_STATES = ("pending", "rebooting")
"""States the MIG manager passes through while it works: each change to one restarts the MIG clock."""
MIG_DEADLINE_CAP = 3
"""A MIG node's deadline is at most this many initialization timeouts after launch, however much progress the
MIG manager reports (a manager that keeps restarting reports `pending` forever)."""
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DEVICE_PLUGIN_PAUSED = "paused-for-mig-change"
DEVICE_PLUGIN_ENABLED = "true"
DEVICE_PLUGIN_DISABLED = "false"
KNOWN_EPHEMERAL_TAINTS = (
    ("node.kubernetes.io/not-ready", "NoSchedule"),
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
    ("karpenter.sh/unregistered", "NoExecute"),
)
KNOWN_EPHEMERAL_TAINT_PREFIXES = ("readiness.k8s.io/",)
MIG_PROGRESS_ANNOTATION = "gpu-eks.io/mig-progress"
ANNOTATED = "annotated"
"""Key `project_node` adds to a Node's metadata: whether it has any annotation at all."""
DELETIONS_ANNOTATION = "gpu-eks.io/deletions"
COMPONENT = "gpu-node-guard"
HOUR = 3600
BREAKER_OPEN = "GuardBreakerOpen"

PAGE_SIZE = 100
"""Objects per list request: a page of GPU Nodes is parsed whole (20 KB each, several times that as Python
objects) before it is cut down to what the guard reads, so the page size bounds the guard's peak memory."""
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODES = "/api/v1/nodes"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

log = logging.getLogger(COMPONENT)


# ---------------------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolPolicy:
    """What the guard does for the nodes of one NodePool."""

    initialization_timeout_seconds: int | None
    """Delete NodeClaims still uninitialized this long after launch (or after the last MIG progress); None:
    never."""
    mig_gate: bool
    """The pool's nodes carry the MIG startup taint, removed on `nvidia.com/mig.config.state=success`."""


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def matches(self, taint: Mapping[str, Any]) -> bool:
        """Karpenter's and the scheduler's notion of the same taint: key and effect."""
        return taint.get("key") == self.key and taint.get("effect") == self.effect


@dataclass(frozen=True)
class LeaseRef:
    namespace: str
    name: str

    @property
    def path(self) -> str:
        return f"{LEASES.format(namespace=self.namespace)}/{self.name}"


@dataclass(frozen=True)
class GuardConfig:
    """The guard's settings (JSON in the `GPU_NODE_GUARD_SETTINGS` environment variable)."""

    pools: Mapping[str, PoolPolicy]
    mig_taint: Taint
    leader_lease: LeaseRef = LeaseRef(COMPONENT, COMPONENT)
    """The Lease the replicas elect their leader with; it also holds the breaker's deletion history."""
    karpenter_lease: LeaseRef = LeaseRef("kube-system", "karpenter-leader-election")
    karpenter_stale_seconds: int = 60
    """Karpenter's Lease not renewed for this long: no Karpenter replica leads, skip the watchdog."""
    karpenter_settle_seconds: int = 300
    """After a Karpenter replica took over the Lease, give it this long to catch up before deleting."""
    max_deletions_per_hour: int = 3
    """Per pool, in any hour."""
    max_consecutive_deletions: int = 2
    """Per pool, deletions in a row without a NodeClaim of the pool initializing: then the breaker latches."""
    unhealthy_percent: int = 20
    """No deletion in a pool while more of its NodeClaims than this share (rounded up) are uninitialized."""
    event_namespace: str = "default"
    """Events about cluster-scoped objects (Nodes, NodeClaims, NodePools) live in `default`, where
    `kubectl describe` finds them."""
    sync_interval_seconds: int = 30
    metrics_port: int = 8080

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> "GuardConfig":
        taint = document["migTaint"]

        def lease(key: str, default: LeaseRef) -> LeaseRef:
            ref = document.get(key)
            return LeaseRef(ref["namespace"], ref["name"]) if ref else default

        def number(key: str, default: int) -> int:
            return int(document.get(key, default))

        return cls(
            pools={
                name: PoolPolicy(
                    initialization_timeout_seconds=policy.get("initializationTimeoutSeconds"),
                    mig_gate=bool(policy.get("migGate", False)),
                )
                for name, policy in document["pools"].items()
            },
            mig_taint=Taint(taint["key"], taint["value"], taint["effect"]),
            leader_lease=lease("leaderLease", cls.leader_lease),
            karpenter_lease=lease("karpenterLease", cls.karpenter_lease),
            karpenter_stale_seconds=number("karpenterStaleSeconds", cls.karpenter_stale_seconds),
            karpenter_settle_seconds=number("karpenterSettleSeconds", cls.karpenter_settle_seconds),
            max_deletions_per_hour=number("maxDeletionsPerHour", cls.max_deletions_per_hour),
            max_consecutive_deletions=number("maxConsecutiveDeletions", cls.max_consecutive_deletions),
            unhealthy_percent=number("unhealthyPercent", cls.unhealthy_percent),
            event_namespace=document.get("eventNamespace", cls.event_namespace),
            sync_interval_seconds=number("syncIntervalSeconds", cls.sync_interval_seconds),
            metrics_port=number("metricsPort", cls.metrics_port),
        )

    def selector(self, mig_only: bool = False) -> str:
        """The label selector of the watched pools' Nodes and NodeClaims (only the MIG-gated pools')."""
        names = sorted(n for n, p in self.pools.items() if p.mig_gate or not mig_only)
        return f"{NODEPOOL_LABEL} in ({','.join(names)})"


# ---------------------------------------------------------------------------------------------------------
# Reading objects
# ---------------------------------------------------------------------------------------------------------
def parse_time(value: str) -> datetime.datetime:
    """An RFC 3339 timestamp as the API server writes it (`2026-01-02T03:04:05Z`, with fractional seconds
    in a Lease's MicroTime)."""
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_time(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(value: datetime.datetime) -> str:
    """A Lease's MicroTime (`2026-01-02T03:04:05.000000Z`)."""
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The status condition of that type, or an empty mapping."""
    for item in obj.get("status", {}).get("conditions") or ():
        if item.get("type") == kind:
            return dict(item)
    return {}


_QUANTITY = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def quantity_is_zero(value: Any) -> bool:
    """Whether a Kubernetes quantity (`0`, `8`, `500m`, `16Gi`; absent) is zero."""
    if value is None:
        return True
    match = _QUANTITY.match(str(value).strip())
    return match is None or float(match.group()) == 0


NODE_LABELS = (NODEPOOL_LABEL, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, DEVICE_PLUGIN_DEPLOY_LABEL)
"""The Node labels the guard reads."""


def project_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Node the guard reads: listing a thousand full Nodes (images, addresses, managed fields)
    would take several times the memory."""
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    return {
        "metadata": {
            **{key: metadata[key] for key in ("name", "uid", "deletionTimestamp") if key in metadata},
            "labels": {key: labels[key] for key in NODE_LABELS if key in labels},
            # Only the guard's own annotation, and whether there are others (a patch must not replace them).
            "annotations": {k: v for k, v in annotations.items() if k == MIG_PROGRESS_ANNOTATION},
            ANNOTATED: bool(annotations),
        },
        "spec": {
            key: node["spec"][key] for key in ("taints", "providerID") if key in (node.get("spec") or {})
        },
        "status": {
            "conditions": [c for c in status.get("conditions") or () if c.get("type") == "Ready"],
            "allocatable": dict(status.get("allocatable") or {}),
        },
    }


def project_nodeclaim(claim: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a NodeClaim the guard reads."""
    metadata = claim.get("metadata") or {}
    spec = claim.get("spec") or {}
    status = claim.get("status") or {}
    labels = metadata.get("labels") or {}
    return {
        "metadata": {
            **{
                key: metadata[key]
                for key in ("name", "uid", "resourceVersion", "deletionTimestamp", "ownerReferences")
                if key in metadata
            },
            "labels": {key: labels[key] for key in (NODEPOOL_LABEL, INSTANCE_TYPE_LABEL) if key in labels},
        },
        "spec": {
            "startupTaints": spec.get("startupTaints") or [],
            "requests": dict((spec.get("resources") or {}).get("requests") or {}),
        },
        "status": {
            "providerID": status.get("providerID", ""),
            "nodeName": status.get("nodeName", ""),
            "conditions": [
                c for c in status.get("conditions") or () if c.get("type") in ("Launched", "Initialized")
            ],
        },
    }


def annotations_of(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """An object's annotations (none for no object, such as a Lease not created yet)."""
    annotations: Mapping[str, str] = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return annotations


@dataclass(frozen=True)
class MigProgress:
    """What the guard last saw of a MIG node's manager (`gpu-eks.io/mig-progress` on the Node)."""

    state: str
    """`nvidia.com/mig.config.state` as last seen ("" before the MIG manager labels the node)."""
    since: datetime.datetime | None
    """When the guard first saw the latest progress state (`pending`, `rebooting`); None before any."""

    def to_json(self) -> str:
        return json.dumps({"state": self.state, "since": format_time(self.since) if self.since else None})

    @classmethod
    def parse(cls, node: Mapping[str, Any]) -> "MigProgress | None":
        text = annotations_of(node).get(MIG_PROGRESS_ANNOTATION)
        try:
            document = json.loads(text) if text else None
            if not isinstance(document, dict):
                return None
            since = document.get("since")
            return cls(str(document.get("state") or ""), parse_time(since) if since else None)
        except (ValueError, TypeError):
            return None  # Written by hand or damaged: start over.


@dataclass(frozen=True)
class PoolHistory:
    """What the circuit breaker remembers of one pool."""

    deletions: tuple[datetime.datetime, ...] = ()
    """When its deletions were counted (the last hour's are kept): what the hourly limit counts."""
    streak: int = 0
    """Deletions counted since a NodeClaim of the pool last initialized: what latches the breaker."""
    last: datetime.datetime | None = None
    """When the streak's last deletion was counted; a NodeClaim initialized after it ends the streak."""

    def after_success(self, initialized: datetime.datetime | None) -> "PoolHistory":
        """The history once a NodeClaim of the pool is seen initialized at `initialized` (the latest
        `lastTransitionTime` of an `Initialized=True` condition): the streak ends if that came after its last
        deletion. Healthy nodes older than the streak, and the clock, end nothing."""
        if self.streak and initialized is not None and (self.last is None or initialized > self.last):
            return replace(self, streak=0, last=None)
        return self

    def latched(self, limit: int, deleting: int = 0) -> bool:
        """Whether the streak, with `deleting` more deletions, reaches `limit` (`maxConsecutiveDeletions`)."""
        return self.streak + deleting >= limit

    def counted(self, now: datetime.datetime) -> "PoolHistory":
        """The history with a deletion counted at `now` (the last hour's deletions only)."""
        return PoolHistory((*last_hour(self.deletions, now), now), self.streak + 1, now)


def parse_deletions(annotations: Mapping[str, str]) -> dict[str, PoolHistory]:
    """The breaker's history per pool from the leader Lease's annotations. A pool's entry is
    `{"deletions": [times], "streak": n, "last": time}`; a list of times is the format before the streak
    was kept: those deletions all count towards the streak, since no success after them is known."""
    text = annotations.get(DELETIONS_ANNOTATION)
    history: dict[str, PoolHistory] = {}
    try:
        document = json.loads(text) if text else {}
        for pool, entry in document.items():
            if isinstance(entry, list):
                times = tuple(sorted(parse_time(t) for t in entry))
                history[str(pool)] = PoolHistory(times, len(times), times[-1] if times else None)
            elif isinstance(entry, dict):
                last = entry.get("last")
                history[str(pool)] = PoolHistory(
                    tuple(sorted(parse_time(t) for t in entry.get("deletions") or ())),
                    int(entry.get("streak") or 0),
                    parse_time(last) if last else None,
                )
    except (ValueError, TypeError, AttributeError):
        return {}  # Written by hand or damaged: start over.
    return history


def last_hour(times: Iterable[datetime.datetime], now: datetime.datetime) -> list[datetime.datetime]:
    """The times of the hour before `now`: what the hourly limit counts."""
    return [t for t in times if (now - t).total_seconds() < HOUR]


def deletions_annotation(history: Mapping[str, PoolHistory], now: datetime.datetime) -> str:
    """The history as stored: per pool the last hour's deletions, sorted, and the streak; pools with neither
    are dropped."""
    kept: dict[str, dict[str, Any]] = {}
    for pool, entry in sorted(history.items()):
        recent = sorted(format_time(t) for t in last_hour(entry.deletions, now))
        if recent or entry.streak:
            last = {"last": format_time(entry.last)} if entry.last else {}
            kept[pool] = {"deletions": recent, "streak": entry.streak, **last}
    return json.dumps(kept, sort_keys=True)


# ---------------------------------------------------------------------------------------------------------
# Decisions (pure)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """A core/v1 Event to record about a Node, NodeClaim or NodePool."""

    kind: str
    api_version: str
    name: str
    uid: str
    type: str
    reason: str
    message: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Events are recorded once per object and reason."""
        return (self.kind, self.name, self.uid, self.reason)


@dataclass(frozen=True)
class NodePatch:
    """Changes to one node of a MIG pool, sent as one JSON patch that tests what it was decided on."""

    node: str
    pool: str
    taints: tuple[Mapping[str, Any], ...]
    """The node's taints as read."""
    remaining: tuple[Mapping[str, Any], ...] | None = None
    """The taints to leave (the MIG gate removed); None: taints unchanged."""
    device_plugin: tuple[str | None, str] | None = None
    """(value read or None when absent, value to set) of `nvidia.com/gpu.deploy.device-plugin`."""
    progress: MigProgress | None = None
    """The MIG progress to record; None: unchanged."""
    has_annotations: bool = True
    event: Event | None = None

    @property
    def untaints(self) -> bool:
        return self.remaining is not None

    @property
    def pauses(self) -> bool:
        return self.device_plugin is not None and self.device_plugin[1] == DEVICE_PLUGIN_PAUSED


@dataclass(frozen=True)
class Deletion:
    """Delete a NodeClaim that did not initialize in time."""

    nodeclaim: str
    uid: str
    resource_version: str
    pool: str
    event: Event
    stuck: str
    """How the NodeClaim is stuck (its age, instance type, reason and the Node's evidence): what the events
    about it say."""
    instance_type: str


@dataclass(frozen=True)
class Decisions:
    patches: tuple[NodePatch, ...] = ()
    delete: tuple[Deletion, ...] = ()
    events: tuple[Event, ...] = ()
    """Events not tied to an action (MIG failed, breaker held a deletion, Karpenter lagging)."""
    uninitialized: Mapping[str, int] = field(default_factory=dict)
    """Launched but not initialized NodeClaims per watched pool (deletions of this sync included)."""
    mig_failed: Mapping[str, int] = field(default_factory=dict)
    """Nodes per gated pool whose MIG manager reported `failed`."""
    held: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per pool, the NodeClaims past their deadline the circuit breaker keeps (left for a person)."""
    latched: frozenset[str] = frozenset()
    """Pools whose breaker is latched (after this sync's deletions): their next stuck NodeClaim is held."""
    successes: Mapping[str, datetime.datetime] = field(default_factory=dict)
    """Per pool whose stored streak a NodeClaim initialized since ends: when it initialized (to store)."""
    karpenter_unavailable: str | None = None
    """Why the watchdog pass was skipped (Karpenter not leading or just took over); None when it ran."""

    @property
    def untaint(self) -> tuple[NodePatch, ...]:
        return tuple(p for p in self.patches if p.untaints)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m"


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + value if value else ''}:{taint.get('effect')}"


def karpenter_unavailable(
    lease: Mapping[str, Any] | None, config: GuardConfig, now: datetime.datetime
) -> str | None:
    """Why Karpenter cannot be trusted to act on a deletion now, from its leader Lease; None when it leads
    and has led long enough to have caught up."""
    where = f"{config.karpenter_lease.namespace}/{config.karpenter_lease.name}"
    if lease is None:
        return f"Karpenter's leader Lease {where} does not exist"
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return f"no Karpenter replica holds its leader Lease {where}"
    renewed = spec.get("renewTime")
    age = (now - parse_time(renewed)).total_seconds() if renewed else math.inf
    if age > config.karpenter_stale_seconds:
        return f"Karpenter's leader Lease {where} was last renewed {int(age)}s ago"
    acquired = spec.get("acquireTime")
    leading = (now - parse_time(acquired)).total_seconds() if acquired else math.inf
    if leading < config.karpenter_settle_seconds:
        return f"a Karpenter replica took over its leader Lease {where} {int(leading)}s ago"
    return None


def not_initialized_evidence(claim: Mapping[str, Any], node: Mapping[str, Any] | None) -> list[str]:
    """What on the Node keeps Karpenter from initializing the NodeClaim, by Karpenter's own criteria
    (initialization.go): empty when the Node meets them all."""
    if node is None:
        return ["its Node is absent"]
    evidence = []
    ready = condition(node, "Ready").get("status", "Unknown")
    if ready != "True":
        evidence.append(f"its Node is not Ready (Ready={ready})")
    taints = node.get("spec", {}).get("taints") or ()
    startup = claim.get("spec", {}).get("startupTaints") or ()
    for taint in taints:
        if any(s.get("key") == taint.get("key") and s.get("effect") == taint.get("effect") for s in startup):
            evidence.append(f"the startup taint {_taint_text(taint)} is still on its Node")
        elif (taint.get("key"), taint.get("effect")) in KNOWN_EPHEMERAL_TAINTS or str(
            taint.get("key")
        ).startswith(KNOWN_EPHEMERAL_TAINT_PREFIXES):
            evidence.append(f"the taint {_taint_text(taint)} is still on its Node")
    allocatable = node.get("status", {}).get("allocatable") or {}
    for resource, quantity in sorted((claim.get("spec", {}).get("requests") or {}).items()):
        if not quantity_is_zero(quantity) and quantity_is_zero(allocatable.get(resource)):
            evidence.append(f"its Node has no allocatable {resource}, which its pods requested")
    return evidence


def _mig_patch(
    node: Mapping[str, Any], pool: str, config: GuardConfig, now: datetime.datetime
) -> tuple[NodePatch | None, Event | None]:
    """What to change on one gated node (still carrying the MIG taint), and the failure event if any."""
    metadata = node.get("metadata", {})
    labels = metadata.get("labels") or {}
    name, uid = metadata["name"], metadata.get("uid", "")
    taints = tuple(node.get("spec", {}).get("taints") or ())
    state = labels.get(MIG_CONFIG_STATE_LABEL, "")
    profile = labels.get(MIG_CONFIG_LABEL, "")
    plugin = labels.get(DEVICE_PLUGIN_DEPLOY_LABEL)
    recorded = MigProgress.parse(node)
    progress = None
    if recorded is None or recorded.state != state:
        progressed = state in MIG_PROGRESS_STATES
        progress = MigProgress(state, now if progressed else (recorded.since if recorded else None))
    has_annotations = bool(metadata.get(ANNOTATED, metadata.get("annotations")))
    if state == MIG_STATE_SUCCESS:
        return (
            NodePatch(
                node=name,
                pool=pool,
                taints=taints,
                remaining=tuple(t for t in taints if not config.mig_taint.matches(t)),
                device_plugin=(plugin, DEVICE_PLUGIN_ENABLED) if plugin == DEVICE_PLUGIN_PAUSED else None,
                progress=progress,
                has_annotations=has_annotations,
                event=Event(
                    "Node",
                    "v1",
                    name,
                    uid,
                    "Normal",
                    "MigGateLifted",
                    f"MIG config {profile!r} applied ({MIG_CONFIG_STATE_LABEL}=success): removed the startup "
                    f"taint {config.mig_taint.key} and let the device plugin advertise the MIG devices",
                ),
            ),
            None,
        )
    # Until then the device plugin stays off: before partitioning it would advertise whole GPUs.
    pause = plugin not in (DEVICE_PLUGIN_PAUSED, DEVICE_PLUGIN_DISABLED)
    patch = (
        NodePatch(
            node=name,
            pool=pool,
            taints=taints,
            device_plugin=(plugin, DEVICE_PLUGIN_PAUSED) if pause else None,
            progress=progress,
            has_annotations=has_annotations,
        )
        if pause or progress is not None
        else None
    )
    failed = None
    if state == MIG_STATE_FAILED:
        failed = Event(
            "Node",
            "v1",
            name,
            uid,
            "Warning",
            "MigConfigFailed",
            f"the MIG manager could not apply MIG config {profile!r} ({MIG_CONFIG_STATE_LABEL}=failed): the "
            f"startup taint {config.mig_taint.key} stays and the device plugin stays paused, so no pod lands "
            "on unpartitioned GPUs; see the nvidia-mig-manager pod's log on this node. The NodeClaim is "
            "deleted once its initialization timeout passes",
        )
    return patch, failed


def _deadline(
    claim: Mapping[str, Any], node: Mapping[str, Any] | None, policy: PoolPolicy, timeout: int
) -> tuple[datetime.datetime, str]:
    """When the NodeClaim's time is up, and since what the clock runs."""
    launched = parse_time(condition(claim, "Launched")["lastTransitionTime"])
    if not policy.mig_gate or node is None:
        return launched + datetime.timedelta(seconds=timeout), "launched"
    progress = MigProgress.parse(node)
    if progress is None or progress.since is None or progress.since <= launched:
        return launched + datetime.timedelta(seconds=timeout), "launched"
    cap = launched + datetime.timedelta(seconds=MIG_DEADLINE_CAP * timeout)
    deadline = min(progress.since + datetime.timedelta(seconds=timeout), cap)
    return deadline, f"the MIG manager last reported progress ({progress.state})"


def _owner_pool_uid(claim: Mapping[str, Any]) -> str:
    for owner in claim.get("metadata", {}).get("ownerReferences") or ():
        if owner.get("kind") == NODEPOOL_OWNER_KIND:
            return str(owner.get("uid", ""))
    return ""


@dataclass
class _Pool:
    """What a sync learns about one watched pool from its NodeClaims."""

    members: int = 0
    uninitialized: int = 0
    uid: str = ""
    initialized: datetime.datetime | None = None
    """The latest time a NodeClaim of the pool turned `Initialized` (what ends a breaker's streak)."""
    due: list[tuple[datetime.datetime, Deletion]] = field(default_factory=list)
    """NodeClaims past their deadline with evidence from their Node, by deadline."""


def _gate(
    nodes: Iterable[Mapping[str, Any]], config: GuardConfig, now: datetime.datetime
) -> tuple[list[NodePatch], list[Event], dict[str, int]]:
    """The MIG gate's patches, its failure events and the failed nodes per pool."""
    patches: list[NodePatch] = []
    events: list[Event] = []
    failed: dict[str, int] = {}
    for node in nodes:
        metadata = node.get("metadata", {})
        pool = (metadata.get("labels") or {}).get(NODEPOOL_LABEL, "")
        policy = config.pools.get(pool)
        if policy is None or not policy.mig_gate or metadata.get("deletionTimestamp"):
            continue
        if not any(config.mig_taint.matches(t) for t in node.get("spec", {}).get("taints") or ()):
            continue
        patch, failure = _mig_patch(node, pool, config, now)
        if patch is not None:
            patches.append(patch)
        if failure is not None:
            failed[pool] = failed.get(pool, 0) + 1
            events.append(failure)
    return patches, events, failed


def _watchdog(
    nodes: Sequence[Mapping[str, Any]],
    nodeclaims: Iterable[Mapping[str, Any]],
    config: GuardConfig,
    now: datetime.datetime,
) -> tuple[dict[str, _Pool], list[Event]]:
    """Per watched pool its NodeClaims' counts and those due for deletion; the events of NodeClaims past
    their deadline whose Node meets Karpenter's criteria (Karpenter lagging)."""
    by_provider = {n["spec"]["providerID"]: n for n in nodes if n.get("spec", {}).get("providerID")}
    by_name = {n["metadata"]["name"]: n for n in nodes}
    pools: dict[str, _Pool] = {}
    events: list[Event] = []
    for claim in nodeclaims:
        metadata = claim.get("metadata", {})
        name = (metadata.get("labels") or {}).get(NODEPOOL_LABEL, "")
        policy = config.pools.get(name)
        if policy is None:
            continue
        pool = pools.setdefault(name, _Pool(uid=_owner_pool_uid(claim)))
        initialized = condition(claim, "Initialized")
        if initialized.get("status") == "True" and initialized.get("lastTransitionTime"):
            # Deleting or not, it did initialize.
            at = parse_time(initialized["lastTransitionTime"])
            pool.initialized = max(at, pool.initialized or at)
        if metadata.get("deletionTimestamp"):
            continue
        pool.members += 1
        launched = condition(claim, "Launched")
        if launched.get("status") != "True" or initialized.get("status") == "True":
            continue
        pool.uninitialized += 1
        timeout = policy.initialization_timeout_seconds
        if timeout is None or not launched.get("lastTransitionTime"):
            continue
        status = claim.get("status", {})
        node = by_provider.get(status.get("providerID") or "") or by_name.get(status.get("nodeName") or "")
        deadline, clock = _deadline(claim, node, policy, timeout)
        if now < deadline:
            continue
        claim_name, uid = metadata["name"], metadata.get("uid", "")
        evidence = not_initialized_evidence(claim, node)
        if not evidence:
            # Karpenter's own criteria are met: it has not reconciled the NodeClaim yet. Not stuck.
            events.append(
                Event(
                    "NodeClaim",
                    "karpenter.sh/v1",
                    claim_name,
                    uid,
                    "Normal",
                    "InitializationLagging",
                    "past its initialization timeout but its Node meets Karpenter's initialization criteria "
                    "(Ready, no startup taint, requested resources allocatable): Karpenter has not marked it "
                    "Initialized yet; not deleting it",
                )
            )
            continue
        why = initialized.get("reason") or "NotInitialized"
        age = (now - parse_time(launched["lastTransitionTime"])).total_seconds()
        instance_type = (metadata.get("labels") or {}).get(INSTANCE_TYPE_LABEL) or "unknown"
        stuck = (
            f"launched {_minutes(age)} ago (instance type {instance_type}) and still not initialized ({why}: "
            f"{'; '.join(evidence)})"
        )
        message = (
            f"{stuck}; deleting it after the pool's initialization timeout of {_minutes(timeout)} (counted "
            f"since {clock}) so Karpenter launches a replacement"
        )
        event = Event(
            "NodeClaim", "karpenter.sh/v1", claim_name, uid, "Warning", "InitializationTimeout", message
        )
        version = metadata.get("resourceVersion", "")
        pool.due.append((deadline, Deletion(claim_name, uid, version, name, event, stuck, instance_type)))
    return pools, events


@dataclass(frozen=True)
class _Verdict:
    """What the circuit breaker makes of one pool's due NodeClaims."""

    delete: list[Deletion]
    held: list[Deletion]
    events: list[Event]
    latched: bool
    """The streak reached `max_consecutive_deletions` (this sync's deletions included)."""


def _breaker(
    name: str, pool: _Pool, history: PoolHistory, config: GuardConfig, now: datetime.datetime
) -> _Verdict:
    """A pool's due NodeClaims split into those to delete and those the circuit breaker holds, with the
    events of the held ones and of the pool. `history` is the pool's as stored, with any success applied."""
    due = [d for _, d in sorted(pool.due, key=lambda item: (item[0], item[1].nodeclaim))]
    recent = last_hour(history.deletions, now)
    allowed_unhealthy = math.ceil(pool.members * config.unhealthy_percent / 100)
    in_a_row = max(config.max_consecutive_deletions - history.streak, 0)
    hourly = max(config.max_deletions_per_hour - len(recent), 0)
    if pool.uninitialized > allowed_unhealthy:
        budget, latch = 0, False
        cause = (
            f"{pool.uninitialized} of its {pool.members} NodeClaims are not initialized, more than "
            f"{config.unhealthy_percent}% (rounded up: {allowed_unhealthy}): many nodes failing alike is a "
            "cause no replacement fixes; it deletes again once fewer are"
        )
    else:
        budget, latch = min(in_a_row, hourly), in_a_row <= hourly
        if latch:
            cause = (
                f"it deleted {config.max_consecutive_deletions} of its NodeClaims in a row (the last at "
                f"{format_time(now if budget else history.last or now)}) and no NodeClaim "
                f"of the pool initialized since, the limit of gpuNodeGuard.maxConsecutiveDeletions: the "
                "failure repeats on every launch. It stays open until a NodeClaim of the pool initializes"
            )
        else:
            cause = (
                f"the guard deleted {len(recent)} of its NodeClaims in the last hour, its limit of "
                f"{config.max_deletions_per_hour}; it deletes again once the hour's count allows"
            )
    delete, held = due[:budget], due[budget:]
    latched = history.latched(config.max_consecutive_deletions, len(delete))
    if not held:
        return _Verdict(delete, held, [], latched)
    if latch:
        advice = (
            "find the cause on its node, fix it, then delete this NodeClaim (kubectl delete nodeclaim "
            f"{{claim}}); once a NodeClaim of pool {name} initializes the guard replaces stuck ones again "
            "(docs/gpu-pools.md, resetting the breaker)"
        )
    else:
        advice = "find the cause on its node, then delete the NodeClaim (kubectl delete nodeclaim {claim})"
    events = [
        replace(
            d.event,
            reason="DeletionHeld",
            message=f"{d.stuck}; NOT deleted: the GPU node guard's circuit breaker for pool {name} is open "
            f"({cause}). Left for a person: {advice.format(claim=d.nodeclaim)}",
        )
        for d in held
    ]
    events.append(
        Event(
            "NodePool",
            "karpenter.sh/v1",
            name,
            pool.uid,
            "Warning",
            BREAKER_OPEN,
            f"the GPU node guard stopped deleting this pool's stuck NodeClaims: {cause}. Held: "
            f"{', '.join(f'{d.nodeclaim} ({d.instance_type})' for d in held)}; see their events",
        )
    )
    return _Verdict(delete, held, events, latched)


def decide(
    nodes: Iterable[Mapping[str, Any]],
    nodeclaims: Iterable[Mapping[str, Any]],
    config: GuardConfig,
    now: datetime.datetime,
    reported: frozenset[tuple[str, str, str, str]] = frozenset(),
    *,
    karpenter_lease: Mapping[str, Any] | None = None,
    deletions: Mapping[str, PoolHistory] | None = None,
) -> Decisions:
    """What to do, given the objects as listed, the time, the events already recorded (by `Event.key`),
    Karpenter's leader Lease and the breaker's history per pool (`parse_deletions`)."""
    nodes = list(nodes)
    patches, events, mig_failed = _gate(nodes, config, now)
    pools, lagging = _watchdog(nodes, nodeclaims, config, now)
    events += lagging
    unavailable = karpenter_unavailable(karpenter_lease, config, now)
    delete: list[Deletion] = []
    held: dict[str, tuple[str, ...]] = {}
    latched: set[str] = set()
    successes: dict[str, datetime.datetime] = {}
    for name, pool in sorted(pools.items()):
        stored = (deletions or {}).get(name, PoolHistory())
        history = stored.after_success(pool.initialized)
        if history != stored and pool.initialized is not None:
            successes[name] = pool.initialized
        if unavailable is not None:
            if history.latched(config.max_consecutive_deletions):
                latched.add(name)
            continue
        verdict = _breaker(name, pool, history, config, now)
        delete += verdict.delete
        events += verdict.events
        if verdict.held:
            held[name] = tuple(d.nodeclaim for d in verdict.held)
        if verdict.latched:
            latched.add(name)
    return Decisions(
        patches=tuple(patches),
        delete=tuple(delete),
        events=tuple(e for e in events if e.key not in reported),
        uninitialized={name: pool.uninitialized for name, pool in pools.items() if pool.uninitialized},
        mig_failed=mig_failed,
        held=held,
        latched=frozenset(latched),
        successes=successes,
        karpenter_unavailable=unavailable,
    )


# ---------------------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------------------
METRICS = {
    "gpu_eks_node_guard_nodeclaims_deleted_total": (
        "counter",
        "NodeClaims the guard deleted because they were not initialized within the pool's timeout.",
    ),
    "gpu_eks_node_guard_startup_taints_removed_total": (
        "counter",
        "MIG startup taints the guard removed after the MIG manager reported success.",
    ),
    "gpu_eks_node_guard_device_plugin_paused_total": (
        "counter",
        "Times the guard paused the device plugin on a MIG node not yet partitioned.",
    ),
    "gpu_eks_node_guard_uninitialized_nodeclaims": (
        "gauge",
        "Launched NodeClaims of watched pools that are not initialized yet, at the last sync.",
    ),
    "gpu_eks_node_guard_mig_failed_nodes": (
        "gauge",
        "Nodes of MIG pools whose MIG manager reported nvidia.com/mig.config.state=failed, at the last sync.",
    ),
    "gpu_eks_node_guard_breaker_open": (
        "gauge",
        "1 when the pool's circuit breaker was open at the last sync: latched after "
        "maxConsecutiveDeletions deletions in a row with no NodeClaim of the pool initialized since (until "
        "one does or a person resets it), or holding a deletion (too many in an hour, too much of the pool "
        "uninitialized).",
    ),
    "gpu_eks_node_guard_nodeclaims_held": (
        "gauge",
        "NodeClaims past their initialization timeout that the circuit breaker kept, at the last sync.",
    ),
    "gpu_eks_node_guard_karpenter_unavailable": (
        "gauge",
        "1 when the last sync skipped the watchdog because Karpenter's leader Lease was stale, missing or "
        "just taken over.",
    ),
    "gpu_eks_node_guard_leader": ("gauge", "1 on the replica that holds the guard's leader Lease."),
    "gpu_eks_node_guard_sync_errors_total": ("counter", "Syncs that failed (API errors)."),
    "gpu_eks_node_guard_last_sync_success_timestamp_seconds": (
        "gauge",
        "Unix time of the last sync that listed nodes and NodeClaims successfully (leader only).",
    ),
}
"""Every metric the guard exposes: name -> (type, help)."""


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class Metrics:
    """The guard's metrics; samples are keyed by the value of their only label, `nodepool` ("" for none)."""

    deleted: dict[str, float] = field(default_factory=dict)
    untainted: dict[str, float] = field(default_factory=dict)
    paused: dict[str, float] = field(default_factory=dict)
    uninitialized: dict[str, float] = field(default_factory=dict)
    mig_failed: dict[str, float] = field(default_factory=dict)
    breaker_open: dict[str, float] = field(default_factory=dict)
    held: dict[str, float] = field(default_factory=dict)
    karpenter_unavailable: float = 0
    leader: float = 0
    sync_errors: float = 0
    last_success: float = 0
    heartbeat: float = 0
    """Unix time of the last successful sync or Lease round-trip (for `/healthz`; not exported)."""

    def observe(self, decisions: Decisions) -> None:
        """The gauges of a sync's decisions."""
        self.uninitialized = {p: float(n) for p, n in decisions.uninitialized.items()}
        self.mig_failed = {p: float(n) for p, n in decisions.mig_failed.items()}
        self.held = {p: float(len(n)) for p, n in decisions.held.items()}
        self.breaker_open = dict.fromkeys({*decisions.held, *decisions.latched}, 1.0)
        self.karpenter_unavailable = 1.0 if decisions.karpenter_unavailable else 0.0

    def standby(self) -> None:
        """A replica that does not lead reports no state of the pools (the leader does)."""
        self.observe(Decisions())
        self.leader = 0

    def render(self, pools: Iterable[str]) -> str:
        """Prometheus text exposition format 0.0.4; every watched pool has a sample (0 when nothing
        happened)."""
        pools = sorted(pools)
        per_pool = {
            "gpu_eks_node_guard_nodeclaims_deleted_total": self.deleted,
            "gpu_eks_node_guard_startup_taints_removed_total": self.untainted,
            "gpu_eks_node_guard_device_plugin_paused_total": self.paused,
            "gpu_eks_node_guard_uninitialized_nodeclaims": self.uninitialized,
            "gpu_eks_node_guard_mig_failed_nodes": self.mig_failed,
            "gpu_eks_node_guard_breaker_open": self.breaker_open,
            "gpu_eks_node_guard_nodeclaims_held": self.held,
        }
        single = {
            "gpu_eks_node_guard_karpenter_unavailable": f"{self.karpenter_unavailable:g}",
            "gpu_eks_node_guard_leader": f"{self.leader:g}",
            "gpu_eks_node_guard_sync_errors_total": f"{self.sync_errors:g}",
            "gpu_eks_node_guard_last_sync_success_timestamp_seconds": f"{self.last_success:.3f}",
        }
        lines: list[str] = []
        for name, (kind, help_text) in METRICS.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            if name in per_pool:
                samples = per_pool[name]
                for pool in sorted(set(pools) | set(samples)):
                    lines.append(f'{name}{{nodepool="{_label_value(pool)}"}} {samples.get(pool, 0):g}')
            else:
                lines.append(f"{name} {single[name]}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------
# API access
# ---------------------------------------------------------------------------------------------------------
Transport = Callable[[str, str, bytes | None, str | None], tuple[int, bytes]]
"""(method, path with query, body, content type) -> (HTTP status, response body)."""
Stream = Callable[[str], Iterator[bytes]]
"""(path with query) -> the lines of a streamed response (a watch)."""


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:300].decode(errors='replace')}")
        self.status = status


SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _in_cluster_request(method: str, path: str, body: bytes | None, content_type: str | None) -> Any:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    base = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    with open(f"{SERVICE_ACCOUNT}/token") as token_file:  # re-read per request: it rotates
        token = token_file.read().strip()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    return urllib.request.Request(base + path, data=body, method=method, headers=headers)


def in_cluster_transport(timeout: float = 30) -> Transport:
    """HTTPS to the API server with the pod's service account token."""
    context = ssl.create_default_context(cafile=f"{SERVICE_ACCOUNT}/ca.crt")

    def send(method: str, path: str, body: bytes | None, content_type: str | None) -> tuple[int, bytes]:
        request = _in_cluster_request(method, path, body, content_type)
        try:
            with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())

    return send


def in_cluster_stream(timeout: float = 330) -> Stream:
    """A streamed GET (a watch) to the API server, line by line."""
    context = ssl.create_default_context(cafile=f"{SERVICE_ACCOUNT}/ca.crt")

    def stream(path: str) -> Iterator[bytes]:
        request = _in_cluster_request("GET", path, None, None)
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            yield from response

    return stream


def _pointer(key: str) -> str:
    """A map key as a JSON pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


class Api:
    """The API requests the guard makes: list, watch and patch Nodes; list and delete NodeClaims; read
    Karpenter's leader Lease; create, read and update its own; create Events."""

    def __init__(self, transport: Transport, event_namespace: str, stream: Stream | None = None) -> None:
        self._send = transport
        self._stream = stream
        self._event_namespace = event_namespace

    def _call(self, method: str, path: str, document: Any = None, content_type: str | None = None) -> Any:
        body = None if document is None else json.dumps(document).encode()
        if body is not None and content_type is None:
            content_type = "application/json"
        status, payload = self._send(method, path, body, content_type)
        if status >= 300:
            raise ApiError(method, path, status, payload)
        return json.loads(payload) if payload else None

    def list(
        self, collection: str, selector: str, project: Callable[[Mapping[str, Any]], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Every object of `collection` matching the label selector, in pages of `PAGE_SIZE`, each projected
        to the parts the guard reads as its page arrives.

        Each page's projection is kept as JSON text until the last page is in, then parsed at once: kept as
        objects, the few it retains of each page would pin the memory of the whole parsed page (CPython reuses
        a block of small objects only when all of them are free), five times the guard's peak for 1,000
        nodes (`scripts/guard_memory.py`)."""
        projected: list[str] = []
        token = ""
        while True:
            query = {"labelSelector": selector, "limit": PAGE_SIZE, **({"continue": token} if token else {})}
            page = self._call("GET", f"{collection}?{urllib.parse.urlencode(query)}")
            projected.append(json.dumps([project(item) for item in page.get("items") or ()]))
            token = (page.get("metadata") or {}).get("continue") or ""
            del page
            if not token:
                return [item for text in projected for item in json.loads(text)]

    def watch_nodes(self, selector: str) -> Iterator[bytes]:
        """The events of a watch on the selected Nodes (a JSON document a line), until the server ends it."""
        if self._stream is None:
            raise RuntimeError("no streaming transport")
        query = urllib.parse.urlencode({"labelSelector": selector, "watch": "true", "timeoutSeconds": 300})
        return self._stream(f"{NODES}?{query}")

    def patch_node(self, action: NodePatch) -> None:
        ops: list[dict[str, Any]] = []
        if action.remaining is not None:
            ops += [
                {"op": "test", "path": "/spec/taints", "value": list(action.taints)},
                {"op": "replace", "path": "/spec/taints", "value": list(action.remaining)},
            ]
        if action.device_plugin is not None:
            read, value = action.device_plugin
            path = f"/metadata/labels/{_pointer(DEVICE_PLUGIN_DEPLOY_LABEL)}"
            if read is not None:
                ops.append({"op": "test", "path": path, "value": read})
            ops.append({"op": "add", "path": path, "value": value})
        if action.progress is not None:
            if not action.has_annotations:
                ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
            path = f"/metadata/annotations/{_pointer(MIG_PROGRESS_ANNOTATION)}"
            ops.append({"op": "add", "path": path, "value": action.progress.to_json()})
        self._call("PATCH", f"{NODES}/{action.node}", ops, "application/json-patch+json")

    def delete_nodeclaim(self, action: Deletion) -> None:
        # With the resourceVersion, a NodeClaim that initialized (or changed at all) since it was listed is
        # not deleted (409); the next sync decides again.
        preconditions = {"uid": action.uid}
        if action.resource_version:
            preconditions["resourceVersion"] = action.resource_version
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        self._call("DELETE", f"{NODECLAIMS}/{action.nodeclaim}", options)

    def get_lease(self, lease: LeaseRef) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = self._call("GET", lease.path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return result

    def create_lease(self, lease: LeaseRef, document: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", LEASES.format(namespace=lease.namespace), document)
        return result

    def update_lease(self, lease: LeaseRef, document: Mapping[str, Any]) -> dict[str, Any]:
        """A PUT: with `metadata.resourceVersion` set, it fails (409) if the Lease changed since read."""
        result: dict[str, Any] = self._call("PUT", lease.path, document)
        return result

    def record(self, event: Event, now: datetime.datetime) -> None:
        self._call("POST", f"/api/v1/namespaces/{self._event_namespace}/events", event_manifest(event, now))


def event_manifest(event: Event, now: datetime.datetime) -> dict[str, Any]:
    """The core/v1 Event object for `event`, in the events namespace (set by the API path)."""
    stamp = format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{event.name}."},
        "involvedObject": {
            "apiVersion": event.api_version,
            "kind": event.kind,
            "name": event.name,
            **({"uid": event.uid} if event.uid else {}),
        },
        "type": event.type,
        "reason": event.reason,
        "message": event.message[:1024],
        "source": {"component": COMPONENT},
        "reportingComponent": f"gpu-eks.io/{COMPONENT}",
        "reportingInstance": os.environ.get("POD_NAME", COMPONENT),
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


# ---------------------------------------------------------------------------------------------------------
# Leader election
# ---------------------------------------------------------------------------------------------------------
LEASE_DURATION_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_PERIOD_SECONDS = 2
"""client-go's (and controller-runtime's) defaults."""


class NotLeader(Exception):
    """The Lease is held by another replica, or this one could not renew it in time."""


class BudgetSpent(Exception):
    """The pool's history as the Lease holds it leaves no deletion to spend (the hour's, or the streak's)."""


class LeaderElector:
    """client-go style leader election on a coordination.k8s.io Lease.

    A replica takes the Lease when it does not exist, has no holder, or its record has not changed for
    `LEASE_DURATION_SECONDS` as measured on this replica's own monotonic clock (so clocks of different nodes
    never compare). Every write is a PUT with the resourceVersion read, so two replicas never both succeed.
    The leader renews every `RETRY_PERIOD_SECONDS` and counts itself leader only while its last renewal is
    less than `RENEW_DEADLINE_SECONDS` old: it stops acting five seconds before another replica may take
    over. Annotations written through `update` (the breaker's history) are CAS'd the same way."""

    def __init__(self, api: Api, lease: LeaseRef, identity: str) -> None:
        self.api = api
        self.lease = lease
        self.identity = identity
        self._lock = threading.Lock()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = -math.inf
        self._renewed_at = -math.inf
        self.record: dict[str, Any] | None = None
        """The Lease as last read or written."""
        self.contacted = -math.inf
        """When (monotonic) the Lease was last read: the API server answered this replica."""

    def is_leader(self, monotonic: float) -> bool:
        return monotonic - self._renewed_at < RENEW_DEADLINE_SECONDS

    def _observe(self, lease: Mapping[str, Any], monotonic: float) -> None:
        metadata = lease.get("metadata") or {}
        holder = (lease.get("spec") or {}).get("holderIdentity")
        key = (holder, metadata.get("uid"), metadata.get("resourceVersion"))
        if key != self._observed:
            self._observed, self._observed_at = key, monotonic
        self.record = dict(lease)

    def tick(self, monotonic: float, now: datetime.datetime) -> bool:
        """Try to take or renew the Lease once; whether this replica leads afterwards."""
        with self._lock:
            try:
                self._try(monotonic, now)
            except ApiError as error:
                if error.status != 409:  # 409: another replica wrote first; it may lead
                    log.warning("leader election: %s", error)
            except (OSError, ValueError) as error:
                log.warning("leader election: %s", error)
            return self.is_leader(monotonic)

    def _try(self, monotonic: float, now: datetime.datetime) -> None:
        lease = self.api.get_lease(self.lease)
        self.contacted = monotonic
        stamp = format_micro_time(now)
        if lease is None:
            spec = self._spec(stamp, stamp, 0)
            document = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.lease.name, "namespace": self.lease.namespace},
                "spec": spec,
            }
            self._observe(self.api.create_lease(self.lease, document), monotonic)
            self._renewed_at = monotonic
            log.info("leading: created Lease %s/%s", self.lease.namespace, self.lease.name)
            return
        self._observe(lease, monotonic)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = int(spec.get("leaseDurationSeconds") or LEASE_DURATION_SECONDS)
        if holder not in ("", self.identity) and monotonic - self._observed_at < duration:
            self._renewed_at = -math.inf
            return
        mine = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        acquired = spec.get("acquireTime") if mine else stamp
        written = self.api.update_lease(
            self.lease, {**lease, "spec": self._spec(acquired, stamp, transitions)}
        )
        self._observe(written, monotonic)
        self._renewed_at = monotonic
        if not mine:
            log.info("leading: took over Lease %s/%s from %r", self.lease.namespace, self.lease.name, holder)

    def _spec(self, acquired: str | None, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "acquireTime": acquired or renewed,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def update(
        self, change: Callable[[dict[str, str]], dict[str, str]], monotonic: float, now: datetime.datetime
    ) -> None:
        """Rewrite the Lease's annotations with `change`, only while this replica holds it (read, check the
        holder, write with the resourceVersion read). Raises `NotLeader` otherwise, `ApiError` on a
        conflict."""
        with self._lock:
            if not self.is_leader(monotonic):
                raise NotLeader(f"the Lease was last renewed {monotonic - self._renewed_at:.0f}s ago")
            lease = self.api.get_lease(self.lease)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                self._renewed_at = -math.inf
                raise NotLeader("the Lease is held by another replica")
            metadata = dict(lease.get("metadata") or {})
            metadata["annotations"] = change(dict(metadata.get("annotations") or {}))
            spec = {**lease["spec"], "renewTime": format_micro_time(now)}
            self._observe(
                self.api.update_lease(self.lease, {**lease, "metadata": metadata, "spec": spec}), monotonic
            )
            self._renewed_at = monotonic

    def release(self, now: datetime.datetime) -> None:
        """Give the Lease up on shutdown (client-go's ReleaseOnCancel), so the standby takes over at once."""
        with self._lock:
            if not math.isfinite(self._renewed_at) or self.record is None:
                return
            try:
                lease = self.api.get_lease(self.lease)
                if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                    return
                stamp = format_micro_time(now)
                spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": stamp}
                self.api.update_lease(self.lease, {**lease, "spec": spec})
            except ApiError as error:
                log.warning("could not release the Lease: %s", error)
            self._renewed_at = -math.inf


# ---------------------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------------------
Clock = Callable[[], tuple[float, datetime.datetime]]
"""() -> (monotonic seconds, wall-clock time)."""


def system_clock() -> tuple[float, datetime.datetime]:
    return time.monotonic(), datetime.datetime.now(datetime.UTC)


@dataclass
class Guard:
    api: Api
    config: GuardConfig
    elector: LeaderElector
    clock: Clock = system_clock
    metrics: Metrics = field(default_factory=Metrics)
    reported: set[tuple[str, str, str, str]] = field(default_factory=set)
    """Events recorded since this replica started (lost on restart: an event may then repeat once)."""

    def sync(self) -> Decisions | None:
        """If leading: list, decide, act. Raises `ApiError` when listing fails; a failed action is logged
        and decided again at the next sync (its event is recorded only once the action succeeded)."""
        monotonic, now = self.clock()
        if not self.elector.is_leader(monotonic):
            self.metrics.standby()
            return None
        self.metrics.leader = 1
        karpenter = self.api.get_lease(self.config.karpenter_lease)
        nodes = self.api.list(NODES, self.config.selector(), project_node)
        claims = self.api.list(NODECLAIMS, self.config.selector(), project_nodeclaim)
        decisions = decide(
            nodes,
            claims,
            self.config,
            now,
            frozenset(self.reported),
            karpenter_lease=karpenter,
            deletions=parse_deletions(annotations_of(self.elector.record)),
        )
        self.metrics.last_success = self.metrics.heartbeat = now.timestamp()
        self.metrics.observe(decisions)
        # A pool's breaker event is recorded once each time the breaker opens.
        self.reported = {
            k
            for k in self.reported
            if not (k[0] == "NodePool" and k[3] == BREAKER_OPEN and k[1] not in decisions.held)
        }
        if decisions.karpenter_unavailable:
            log.info("watchdog skipped: %s", decisions.karpenter_unavailable)
        for patch in decisions.patches:
            if not self._act(functools.partial(self.api.patch_node, patch), f"patch node {patch.node}"):
                continue
            if patch.untaints:
                self.metrics.untainted[patch.pool] = self.metrics.untainted.get(patch.pool, 0) + 1
            if patch.pauses:
                self.metrics.paused[patch.pool] = self.metrics.paused.get(patch.pool, 0) + 1
            if patch.event is not None:
                self._record(patch.event, now)
        if decisions.successes:
            self._reset(decisions.successes, now)  # if it fails, `_reserve` finds the streak as stored
        for deletion in decisions.delete:
            if not self._reserve(deletion, now):
                break
            if self._act(
                functools.partial(self.api.delete_nodeclaim, deletion),
                f"delete nodeclaim {deletion.nodeclaim}",
            ):
                self.metrics.deleted[deletion.pool] = self.metrics.deleted.get(deletion.pool, 0) + 1
                self._record(deletion.event, now)
        for event in decisions.events:
            self._record(event, now)
        return decisions

    def _reset(self, successes: Mapping[str, datetime.datetime], now: datetime.datetime) -> None:
        """End the streaks of the pools where a NodeClaim initialized after their last deletion, in the
        leader Lease (before any deletion of this sync counts on them)."""

        def reset(annotations: dict[str, str]) -> dict[str, str]:
            history = parse_deletions(annotations)
            for pool, initialized in successes.items():
                if pool in history:
                    history[pool] = history[pool].after_success(initialized)
            return {**annotations, DELETIONS_ANNOTATION: deletions_annotation(history, now)}

        try:
            self.elector.update(reset, self.clock()[0], now)
        except (NotLeader, ApiError, OSError) as error:
            log.warning("could not reset the breaker of %s: %s", ", ".join(sorted(successes)), error)
            return
        log.info("a NodeClaim initialized: reset the breaker of %s", ", ".join(sorted(successes)))

    def _reserve(self, deletion: Deletion, now: datetime.datetime) -> bool:
        """Write the deletion into the breaker's history in the leader Lease before deleting: only the
        holder can, and a crash after it errs on the side of fewer deletions."""

        def add(annotations: dict[str, str]) -> dict[str, str]:
            history = parse_deletions(annotations)
            pool = history.get(deletion.pool, PoolHistory())
            recent = last_hour(pool.deletions, now)
            if len(recent) >= self.config.max_deletions_per_hour:
                raise BudgetSpent(f"{len(recent)} deletions in pool {deletion.pool} in the last hour")
            if pool.latched(self.config.max_consecutive_deletions):
                raise BudgetSpent(f"{pool.streak} deletions in a row in pool {deletion.pool}, no success")
            history[deletion.pool] = pool.counted(now)
            return {**annotations, DELETIONS_ANNOTATION: deletions_annotation(history, now)}

        try:
            self.elector.update(add, self.clock()[0], now)
        except (NotLeader, BudgetSpent, ApiError, OSError) as error:
            log.warning("not deleting nodeclaim %s: %s", deletion.nodeclaim, error)
            return False
        return True

    def _act(self, action: Callable[[], None], what: str) -> bool:
        if not self.elector.is_leader(self.clock()[0]):
            log.warning("not leading any more: did not %s", what)
            return False
        try:
            action()
        except ApiError as error:
            # 404: gone already; 409/422: changed since listed (a precondition or test failed). Next sync
            # decides again.
            log.warning("could not %s: %s", what, error)
            return False
        log.info("did %s", what)
        return True

    def _record(self, event: Event, now: datetime.datetime) -> None:
        try:
            self.api.record(event, now)
        except ApiError as error:
            log.warning("could not record event %s on %s %s: %s", event.reason, event.kind, event.name, error)
            return
        self.reported.add(event.key)


def serve(guard: Guard) -> ThreadingHTTPServer:
    """`/metrics` and `/healthz` on the metrics port, in a daemon thread."""
    stale_after = 3 * guard.config.sync_interval_seconds
    started = time.time()  # the liveness probe gives the first sync three intervals too

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                body = guard.metrics.render(guard.config.pools).encode()
                self._reply(200, body, "text/plain; version=0.0.4; charset=utf-8")
            elif self.path == "/healthz":
                healthy = time.time() - max(guard.metrics.heartbeat, started) <= stale_after
                self._reply(
                    200 if healthy else 503, b"ok\n" if healthy else b"no recent sync\n", "text/plain"
                )
            else:
                self._reply(404, b"not found\n", "text/plain")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("", guard.config.metrics_port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _elect(guard: Guard, wake: threading.Event, stop: threading.Event) -> None:
    """Take or renew the Lease every retry period; a new leader syncs at once."""
    leading = False
    while not stop.is_set():
        monotonic, now = guard.clock()
        now_leading = guard.elector.tick(monotonic, now)
        if guard.elector.contacted == monotonic:
            guard.metrics.heartbeat = max(guard.metrics.heartbeat, now.timestamp())
        if now_leading and not leading:
            wake.set()
        leading = now_leading
        guard.metrics.leader = 1 if leading else 0
        stop.wait(RETRY_PERIOD_SECONDS)


def _watch(guard: Guard, wake: threading.Event, stop: threading.Event) -> None:
    """Wake the sync on any change to a node of a MIG pool: the device plugin must be paused within
    seconds of the GPU Operator enabling it, long before its pod has passed its validation and registered
    whole GPUs."""
    selector = guard.config.selector(mig_only=True)
    while not stop.is_set():
        try:
            for line in guard.api.watch_nodes(selector):
                if stop.is_set():
                    return
                if line.strip() and guard.elector.is_leader(guard.clock()[0]):
                    wake.set()
        except (ApiError, OSError, ValueError) as error:
            log.warning("node watch ended: %s", error)
        stop.wait(RETRY_PERIOD_SECONDS)


def main(settings: str) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    config = GuardConfig.from_json(json.loads(settings))
    api = Api(in_cluster_transport(), config.event_namespace, in_cluster_stream())
    identity = os.environ.get("POD_NAME") or f"{COMPONENT}-{os.getpid()}"
    guard = Guard(api, config, LeaderElector(api, config.leader_lease, identity))
    serve(guard)
    stop, wake = threading.Event(), threading.Event()

    def terminate(*_: Any) -> None:
        stop.set()
        wake.set()

    signal.signal(signal.SIGTERM, terminate)
    threading.Thread(target=_elect, args=(guard, wake, stop), daemon=True).start()
    if any(p.mig_gate for p in config.pools.values()):
        threading.Thread(target=_watch, args=(guard, wake, stop), daemon=True).start()
    log.info("%s watching pools %s", identity, ", ".join(sorted(config.pools)))
    while not stop.is_set():
        wake.clear()
        try:
            guard.sync()
        except (ApiError, OSError, ValueError) as error:
            guard.metrics.sync_errors += 1
            log.error("sync failed: %s", error)
        if wake.wait(config.sync_interval_seconds):
            stop.wait(1)  # let a burst of watch events settle into one sync
    guard.elector.release(datetime.datetime.now(datetime.UTC))


if __name__ == "__main__":
    main(os.environ["GPU_NODE_GUARD_SETTINGS"])
