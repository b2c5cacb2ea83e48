"""gpu-node-guard: keeps GPU nodes from getting stuck. Runs in the cluster; Python 3.11+, standard library
only.

Shipped in a ConfigMap by `components/gpu_node_guard` and run by a one-replica Deployment on the system nodes.
Every `syncIntervalSeconds` it lists Nodes and Karpenter NodeClaims, decides (`decide`, pure) and acts:

1. MIG gate. A node of a MIG pool starts with the startup taint `gpu-eks.io/mig-pending`. When the MIG manager
   has labelled it `nvidia.com/mig.config.state=success`, the guard removes the taint (a JSON patch that first
   tests the taints it read, so a concurrent change is never overwritten); Karpenter then marks the node
   initialized and pods bind to the MIG devices. On `failed` the taint stays and a Warning event on the Node
   says why.
2. Watchdog. A NodeClaim of a pool the guard watches that was launched more than the pool's initialization
   timeout ago and is still not `Initialized` is deleted (with a UID precondition), with a Warning event on
   the NodeClaim naming the reason Karpenter gives. Karpenter then terminates the instance and launches
   another for the pods still pending. Karpenter itself never disrupts an uninitialized node: without this
   only `expireAfter` (days) would end it.

`/metrics` on the `metrics` port serves Prometheus text format; `/healthz` fails once no sync has succeeded
for three intervals. It talks to the API server with its service account token; the RBAC in
`components/gpu_node_guard/manifests.py` grants exactly the requests of `Api` (checked by the tests). Every
action is idempotent, so a second replica or a restart mid-sync does no harm."""

import datetime
import functools
import json
import logging
import os
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NODEPOOL_LABEL = "karpenter.sh/nodepool"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STATE_SUCCESS = "success"
MIG_STATE_FAILED = "failed"
COMPONENT = "gpu-node-guard"

NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODES = "/api/v1/nodes"

log = logging.getLogger(COMPONENT)


# ---------------------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolPolicy:
    """What the guard does for the nodes of one NodePool."""

    initialization_timeout_seconds: int | None
    """Delete NodeClaims still uninitialized this long after launch; None: never."""
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
class GuardConfig:
    """The guard's settings (JSON in the `GPU_NODE_GUARD_SETTINGS` environment variable)."""

    pools: Mapping[str, PoolPolicy]
    mig_taint: Taint
    event_namespace: str = "default"
    """Events about cluster-scoped objects (Nodes, NodeClaims) live in `default`, where `kubectl describe`
    finds them."""
    sync_interval_seconds: int = 30
    metrics_port: int = 8080

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> "GuardConfig":
        taint = document["migTaint"]
        return cls(
            pools={
                name: PoolPolicy(
                    initialization_timeout_seconds=policy.get("initializationTimeoutSeconds"),
                    mig_gate=bool(policy.get("migGate", False)),
                )
                for name, policy in document["pools"].items()
            },
            mig_taint=Taint(taint["key"], taint["value"], taint["effect"]),
            event_namespace=document.get("eventNamespace", "default"),
            sync_interval_seconds=int(document.get("syncIntervalSeconds", 30)),
            metrics_port=int(document.get("metricsPort", 8080)),
        )


# ---------------------------------------------------------------------------------------------------------
# Decisions (pure)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """A core/v1 Event to record about a Node or NodeClaim."""

    kind: str
    api_version: str
    name: str
    uid: str
    type: str
    reason: str
    message: str

    @property
    def key(self) -> tuple[str, str]:
        """Events are recorded once per object and reason."""
        return (self.uid, self.reason)


@dataclass(frozen=True)
class Untaint:
    """Remove the MIG startup taint from a node."""

    node: str
    pool: str
    taints: tuple[Mapping[str, Any], ...]
    """The node's taints as read (the patch tests them before replacing)."""
    remaining: tuple[Mapping[str, Any], ...]
    event: Event


@dataclass(frozen=True)
class Deletion:
    """Delete a NodeClaim that did not initialize in time."""

    nodeclaim: str
    uid: str
    resource_version: str
    pool: str
    event: Event


@dataclass(frozen=True)
class Decisions:
    untaint: tuple[Untaint, ...] = ()
    delete: tuple[Deletion, ...] = ()
    events: tuple[Event, ...] = ()
    """Events not tied to an action (MIG configuration failed)."""
    uninitialized: Mapping[str, int] = field(default_factory=dict)
    """Launched but not initialized NodeClaims per watched pool (deletions of this sync included)."""
    mig_failed: Mapping[str, int] = field(default_factory=dict)
    """Nodes per gated pool whose MIG manager reported `failed`."""


def parse_time(value: str) -> datetime.datetime:
    """An RFC 3339 timestamp as the API server writes it (`2026-01-02T03:04:05Z`)."""
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The status condition of that type, or an empty mapping."""
    for item in obj.get("status", {}).get("conditions") or ():
        if item.get("type") == kind:
            return dict(item)
    return {}


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m"


def decide(
    nodes: Iterable[Mapping[str, Any]],
    nodeclaims: Iterable[Mapping[str, Any]],
    config: GuardConfig,
    now: datetime.datetime,
    reported: frozenset[tuple[str, str]] = frozenset(),
) -> Decisions:
    """What to do, given the objects as listed, the time and the events already recorded (by `Event.key`)."""
    untaint: list[Untaint] = []
    events: list[Event] = []
    mig_failed: dict[str, int] = {}
    for node in nodes:
        metadata = node.get("metadata", {})
        labels = metadata.get("labels") or {}
        pool = labels.get(NODEPOOL_LABEL, "")
        policy = config.pools.get(pool)
        if policy is None or not policy.mig_gate or metadata.get("deletionTimestamp"):
            continue
        taints = tuple(node.get("spec", {}).get("taints") or ())
        if not any(config.mig_taint.matches(t) for t in taints):
            continue
        name, uid = metadata["name"], metadata.get("uid", "")
        state = labels.get(MIG_CONFIG_STATE_LABEL)
        profile = labels.get(MIG_CONFIG_LABEL, "")
        if state == MIG_STATE_SUCCESS:
            untaint.append(
                Untaint(
                    node=name,
                    pool=pool,
                    taints=taints,
                    remaining=tuple(t for t in taints if not config.mig_taint.matches(t)),
                    event=Event(
                        "Node",
                        "v1",
                        name,
                        uid,
                        "Normal",
                        "MigGateLifted",
                        f"MIG config {profile!r} applied ({MIG_CONFIG_STATE_LABEL}=success): removed "
                        f"the startup taint {config.mig_taint.key}",
                    ),
                )
            )
        elif state == MIG_STATE_FAILED:
            mig_failed[pool] = mig_failed.get(pool, 0) + 1
            event = Event(
                "Node",
                "v1",
                name,
                uid,
                "Warning",
                "MigConfigFailed",
                f"the MIG manager could not apply MIG config {profile!r} ({MIG_CONFIG_STATE_LABEL}=failed): "
                f"the startup taint {config.mig_taint.key} stays, so no pod lands on unpartitioned GPUs; see "
                "the nvidia-mig-manager pod's log on this node. The NodeClaim is deleted once its "
                "initialization timeout passes",
            )
            if event.key not in reported:
                events.append(event)

    delete: list[Deletion] = []
    uninitialized: dict[str, int] = {}
    for claim in nodeclaims:
        metadata = claim.get("metadata", {})
        pool = (metadata.get("labels") or {}).get(NODEPOOL_LABEL, "")
        policy = config.pools.get(pool)
        if policy is None or metadata.get("deletionTimestamp"):
            continue
        launched = condition(claim, "Launched")
        initialized = condition(claim, "Initialized")
        if launched.get("status") != "True" or initialized.get("status") == "True":
            continue
        uninitialized[pool] = uninitialized.get(pool, 0) + 1
        timeout = policy.initialization_timeout_seconds
        if timeout is None or not launched.get("lastTransitionTime"):
            continue
        age = (now - parse_time(launched["lastTransitionTime"])).total_seconds()
        if age < timeout:
            continue
        why = initialized.get("reason") or "NotInitialized"
        detail = initialized.get("message") or "no reason given"
        name, uid = metadata["name"], metadata.get("uid", "")
        delete.append(
            Deletion(
                nodeclaim=name,
                uid=uid,
                resource_version=metadata.get("resourceVersion", ""),
                pool=pool,
                event=Event(
                    "NodeClaim",
                    "karpenter.sh/v1",
                    name,
                    uid,
                    "Warning",
                    "InitializationTimeout",
                    f"launched {_minutes(age)} ago and still not initialized ({why}: {detail}); deleting it "
                    f"after the pool's initialization timeout of {_minutes(timeout)} so Karpenter launches a "
                    "replacement",
                ),
            )
        )
    return Decisions(tuple(untaint), tuple(delete), tuple(events), uninitialized, mig_failed)


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
    "gpu_eks_node_guard_uninitialized_nodeclaims": (
        "gauge",
        "Launched NodeClaims of watched pools that are not initialized yet, at the last sync.",
    ),
    "gpu_eks_node_guard_mig_failed_nodes": (
        "gauge",
        "Nodes of MIG pools whose MIG manager reported nvidia.com/mig.config.state=failed, at the last sync.",
    ),
    "gpu_eks_node_guard_sync_errors_total": ("counter", "Syncs that failed (API errors)."),
    "gpu_eks_node_guard_last_sync_success_timestamp_seconds": (
        "gauge",
        "Unix time of the last sync that listed nodes and NodeClaims successfully.",
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
    uninitialized: dict[str, float] = field(default_factory=dict)
    mig_failed: dict[str, float] = field(default_factory=dict)
    sync_errors: float = 0
    last_success: float = 0

    def render(self, pools: Iterable[str]) -> str:
        """Prometheus text exposition format 0.0.4; every watched pool has a sample (0 when nothing
        happened)."""
        pools = sorted(pools)
        per_pool = {
            "gpu_eks_node_guard_nodeclaims_deleted_total": self.deleted,
            "gpu_eks_node_guard_startup_taints_removed_total": self.untainted,
            "gpu_eks_node_guard_uninitialized_nodeclaims": self.uninitialized,
            "gpu_eks_node_guard_mig_failed_nodes": self.mig_failed,
        }
        lines: list[str] = []
        for name, (kind, help_text) in METRICS.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            if name in per_pool:
                samples = per_pool[name]
                for pool in sorted(set(pools) | set(samples)):
                    lines.append(f'{name}{{nodepool="{_label_value(pool)}"}} {samples.get(pool, 0):g}')
            elif name == "gpu_eks_node_guard_sync_errors_total":
                lines.append(f"{name} {self.sync_errors:g}")
            else:
                lines.append(f"{name} {self.last_success:.3f}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------
# API access
# ---------------------------------------------------------------------------------------------------------
Transport = Callable[[str, str, bytes | None, str | None], tuple[int, bytes]]
"""(method, path with query, body, content type) -> (HTTP status, response body)."""


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:300].decode(errors='replace')}")
        self.status = status


SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def in_cluster_transport(timeout: float = 30) -> Transport:
    """HTTPS to the API server with the pod's service account token (re-read per request: it rotates)."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    base = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    context = ssl.create_default_context(cafile=f"{SERVICE_ACCOUNT}/ca.crt")

    def send(method: str, path: str, body: bytes | None, content_type: str | None) -> tuple[int, bytes]:
        with open(f"{SERVICE_ACCOUNT}/token") as token_file:
            token = token_file.read().strip()
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(base + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())

    return send


class Api:
    """The few API requests the guard makes: list and patch Nodes, list and delete NodeClaims, create
    Events."""

    def __init__(self, transport: Transport, event_namespace: str) -> None:
        self._send = transport
        self._event_namespace = event_namespace

    def _call(self, method: str, path: str, document: Any = None, content_type: str | None = None) -> Any:
        body = None if document is None else json.dumps(document).encode()
        if body is not None and content_type is None:
            content_type = "application/json"
        status, payload = self._send(method, path, body, content_type)
        if status >= 300:
            raise ApiError(method, path, status, payload)
        return json.loads(payload) if payload else None

    def list(self, collection: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = urllib.parse.urlencode({"limit": 500, **({"continue": token} if token else {})})
            page = self._call("GET", f"{collection}?{query}")
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    def remove_taint(self, action: Untaint) -> None:
        patch = [
            {"op": "test", "path": "/spec/taints", "value": list(action.taints)},
            {"op": "replace", "path": "/spec/taints", "value": list(action.remaining)},
        ]
        self._call("PATCH", f"{NODES}/{action.node}", patch, "application/json-patch+json")

    def delete_nodeclaim(self, action: Deletion) -> None:
        # With the resourceVersion, a NodeClaim that initialized (or changed at all) since it was listed is
        # not deleted (409); the next sync decides again.
        preconditions = {"uid": action.uid}
        if action.resource_version:
            preconditions["resourceVersion"] = action.resource_version
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        self._call("DELETE", f"{NODECLAIMS}/{action.nodeclaim}", options)

    def record(self, event: Event, now: datetime.datetime) -> None:
        self._call("POST", f"/api/v1/namespaces/{self._event_namespace}/events", event_manifest(event, now))


def event_manifest(event: Event, now: datetime.datetime) -> dict[str, Any]:
    """The core/v1 Event object for `event`, in the events namespace (set by the API path)."""
    stamp = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{event.name}."},
        "involvedObject": {
            "apiVersion": event.api_version,
            "kind": event.kind,
            "name": event.name,
            "uid": event.uid,
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
# The loop
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Guard:
    api: Api
    config: GuardConfig
    metrics: Metrics = field(default_factory=Metrics)
    reported: set[tuple[str, str]] = field(default_factory=set)

    def sync(self, now: datetime.datetime) -> Decisions:
        """List, decide, act. Raises `ApiError` when listing fails; a failed action is logged and retried at
        the next sync (its event is recorded only once the action succeeded)."""
        decisions = decide(
            self.api.list(NODES), self.api.list(NODECLAIMS), self.config, now, frozenset(self.reported)
        )
        self.metrics.last_success = now.timestamp()
        self.metrics.uninitialized = {p: float(n) for p, n in decisions.uninitialized.items()}
        self.metrics.mig_failed = {p: float(n) for p, n in decisions.mig_failed.items()}
        for untaint in decisions.untaint:
            if self._act(functools.partial(self.api.remove_taint, untaint), f"untaint node {untaint.node}"):
                self.metrics.untainted[untaint.pool] = self.metrics.untainted.get(untaint.pool, 0) + 1
                self._record(untaint.event, now)
        for deletion in decisions.delete:
            delete = functools.partial(self.api.delete_nodeclaim, deletion)
            if self._act(delete, f"delete nodeclaim {deletion.nodeclaim}"):
                self.metrics.deleted[deletion.pool] = self.metrics.deleted.get(deletion.pool, 0) + 1
                self._record(deletion.event, now)
        for event in decisions.events:
            self._record(event, now)
        return decisions

    def _act(self, action: Callable[[], None], what: str) -> bool:
        try:
            action()
        except ApiError as error:
            # 404: gone already; 409/422: changed since listed (the patch's test failed). Next sync decides
            # again.
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
                healthy = time.time() - max(guard.metrics.last_success, started) <= stale_after
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


def main(settings: str) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    config = GuardConfig.from_json(json.loads(settings))
    guard = Guard(Api(in_cluster_transport(), config.event_namespace), config)
    serve(guard)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log.info("watching pools %s", ", ".join(sorted(config.pools)))
    while not stop.is_set():
        try:
            guard.sync(datetime.datetime.now(datetime.UTC))
        except (ApiError, OSError, ValueError) as error:
            guard.metrics.sync_errors += 1
            log.error("sync failed: %s", error)
        stop.wait(config.sync_interval_seconds)


if __name__ == "__main__":
    main(os.environ["GPU_NODE_GUARD_SETTINGS"])
