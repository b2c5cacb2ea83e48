"""A simulated cluster to run the GPU node guard's real code in, over scripted timelines.

`World` holds a fake API server (`Cluster`: Nodes, NodeClaims, Leases and Events with resourceVersions,
JSON patches with their `test` operations, delete preconditions; it records every request and who made it),
a fake clock, a model of the Karpenter controller (`Karpenter`), scripted node lifecycles (`NodeScript`,
`MigNode`) and any number of guard replicas (`Replica`: the real `guard.Guard` with its real
`LeaderElector`, scheduled as `guard.main` schedules them). Each step is one simulated second.

What the models claim, and from where (the guard's own decisions are not modelled: they run):
- Karpenter 1.14.1 (kubernetes-sigs/karpenter v1.14.1): it renews its leader Lease every 2 s while it runs
  (controller-runtime defaults); it registers a Node (removing `karpenter.sh/unregistered`, `registration.go`)
  and initializes it when it is Ready, no startup taint of the NodeClaim or known ephemeral taint is left and
  every requested resource is allocatable (`initialization.go`); it terminates a deleted NodeClaim's instance
  (the claim and its Node go); it launches NodeClaims for pending pods (here: keeps each pool at its demand).
  It does nothing while it is down.
- The GPU Operator v26.7.0 and MIG manager v0.15.0, for `MigNode` (facts/gpu_operator.py has the sources):
  the operator's node labeller removes `nvidia.com/gpu.deploy.*` from nodes without `nvidia.com/gpu.present`
  and, when NFD's labels arrive, sets `gpu.present` and `gpu.deploy.device-plugin=true` unless a value is
  there; the device plugin's pod runs only while that label is `true` and registers its resource after its
  validation; without partitioned GPUs it advertises whole GPUs; the MIG manager pauses it, partitions, and
  sets it to `true` with `mig.config.state=success`.
"""

import copy
import datetime
import json
import math
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from components.gpu_node_guard import guard

START = datetime.datetime(2026, 9, 1, 8, 0, tzinfo=datetime.UTC)
KARPENTER_NAMESPACE = "kube-system"
GATE = {"key": "gpu-eks.io/mig-pending", "value": "true", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
INSTANCE_TYPE = "g6e.12xlarge"
"""What Karpenter launches (it labels each NodeClaim with its instance type)."""
PLUGIN = guard.DEVICE_PLUGIN_DEPLOY_LABEL
STATE = guard.MIG_CONFIG_STATE_LABEL
GUARD_LEASE = guard.LeaseRef(guard.COMPONENT, guard.COMPONENT).path


class Crash(BaseException):
    """A replica's process dies in the middle of a request (not an API error the guard handles)."""


@dataclass
class Clock:
    seconds: float = 0.0

    @property
    def now(self) -> datetime.datetime:
        return START + datetime.timedelta(seconds=self.seconds)

    def stamp(self) -> str:
        return guard.format_time(self.now)


@dataclass(frozen=True)
class Request:
    at: float
    actor: str
    method: str
    path: str
    status: int
    holder: str
    """The guard's leader Lease holder when the request was answered."""


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def apply_json_patch(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 for the operations the guard sends (test, add, replace on object members); raises ValueError
    where the API server answers 422."""
    result = copy.deepcopy(document)
    for operation in operations:
        *parents, last = _pointer(operation["path"])
        target = result
        for part in parents:
            if not isinstance(target, dict) or part not in target:
                raise ValueError(f"path {operation['path']} does not exist")
            target = target[part]
        if operation["op"] == "test":
            if target.get(last, object()) != operation["value"]:
                raise ValueError(f"test of {operation['path']} failed")
        elif operation["op"] == "add":
            target[last] = copy.deepcopy(operation["value"])
        elif operation["op"] == "replace":
            if last not in target:
                raise ValueError(f"replace of missing {operation['path']}")
            target[last] = copy.deepcopy(operation["value"])
        else:
            raise AssertionError(f"the guard does not send {operation['op']}")
    return result


def _selected(obj: dict[str, Any], selector: str) -> bool:
    key, _, rest = selector.partition(" in ")
    values = rest.strip("()").split(",")
    return (obj["metadata"].get("labels") or {}).get(key) in values


class Cluster:
    """A fake API server: what the guard reads and writes, answered as the real one answers."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.nodes: dict[str, dict[str, Any]] = {}
        self.nodeclaims: dict[str, dict[str, Any]] = {}
        self.leases: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.requests: list[Request] = []
        self.version = 1000
        self.crash_on: dict[str, str] = {}
        """actor -> request prefix (`DELETE /apis/karpenter.sh`): the actor's process dies on that request."""
        self.unreachable: set[str] = set()
        """Actors whose requests fail as if the network were down."""
        self.node_changed: dict[str, float] = {}
        """Node name -> when it last changed (what a watch reports)."""
        self.node_changes = 0

    def bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if obj.get("kind") == "Node":
            self.node_changed[obj["metadata"]["name"]] = self.clock.seconds
            self.node_changes += 1

    def transport(self, actor: str) -> guard.Transport:
        def send(method: str, path: str, body: bytes | None, content_type: str | None) -> tuple[int, bytes]:
            if actor in self.unreachable:
                raise OSError("connection refused")
            prefix = self.crash_on.get(actor)
            if prefix and f"{method} {path}".startswith(prefix):
                del self.crash_on[actor]
                raise Crash(f"{actor} died during {method} {path}")
            status, answer = self._handle(method, path, json.loads(body) if body else None)
            self.requests.append(
                Request(self.clock.seconds, actor, method, path, status, self.guard_holder())
            )
            return status, json.dumps(answer).encode()

        return send

    def guard_holder(self) -> str:
        lease = self.leases.get(GUARD_LEASE)
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def _handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        # No copies: `body` was parsed from the request, and `send` serialises the answer before anything
        # else runs, so stored objects are never shared with a client.
        url = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(url.query)
        if "/leases" in url.path:
            return self._lease(method, url.path, body)
        if url.path.startswith("/api/v1/namespaces/") and url.path.endswith("/events"):
            self.events.append({**body, "at": self.clock.seconds})
            return 201, body
        base = guard.NODES if url.path.startswith(guard.NODES) else guard.NODECLAIMS
        collection = self.nodes if base == guard.NODES else self.nodeclaims
        name = url.path[len(base) + 1 :]
        if method == "GET":
            selector = query["labelSelector"][0]
            items = [o for o in collection.values() if _selected(o, selector)]
            return 200, {"items": items, "metadata": {"resourceVersion": str(self.version)}}
        obj = collection.get(name)
        if obj is None:
            return 404, {"kind": "Status", "reason": "NotFound"}
        if method == "PATCH":
            try:
                patched = apply_json_patch(obj, body)
            except ValueError as error:
                return 422, {"kind": "Status", "message": str(error)}
            collection[name] = patched
            self.bump(patched)
            return 200, patched
        if method == "DELETE":
            preconditions = body.get("preconditions") or {}
            metadata = obj["metadata"]
            if any(metadata.get(k) != v for k, v in preconditions.items()):
                return 409, {"kind": "Status", "reason": "Conflict"}
            metadata.setdefault("deletionTimestamp", self.clock.stamp())  # Karpenter's finalizer holds it
            self.bump(obj)
            return 200, obj
        raise AssertionError(f"unexpected {method} {path}")

    def _lease(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST":
            path = f"{path}/{body['metadata']['name']}"
            if path in self.leases:
                return 409, {"kind": "Status", "reason": "AlreadyExists"}
        lease = self.leases.get(path)
        if method == "GET":
            return (200, lease) if lease else (404, {"kind": "Status"})
        if method == "PUT":
            if lease is None:
                return 404, {"kind": "Status"}
            if body["metadata"].get("resourceVersion") != lease["metadata"]["resourceVersion"]:
                return 409, {"kind": "Status", "reason": "Conflict"}
        body["metadata"].setdefault("uid", f"lease-{len(self.leases)}")
        self.leases[path] = body
        self.bump(body)
        return 200, body

    # --- what the guard's effects look like from outside ------------------------------------------------
    def deletions(self) -> list[Request]:
        """Successful NodeClaim deletions, in order."""
        return [r for r in self.requests if r.method == "DELETE" and r.status < 300]

    def reasons(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["reason"] == reason]


# --- Karpenter ---------------------------------------------------------------------------------------------
def requested_resources_allocatable(claim: dict[str, Any], node: dict[str, Any]) -> bool:
    allocatable = node["status"].get("allocatable") or {}
    return all(
        float(allocatable.get(r, "0")) > 0
        for r, q in claim["spec"]["resources"]["requests"].items()
        if float(q)
    )


@dataclass
class Karpenter:
    """Karpenter's controller as far as the guard depends on it (see the module docstring)."""

    cluster: Cluster
    demand: dict[str, int] = field(default_factory=dict)
    """Pool -> NodeClaims the pending pods need (Karpenter keeps that many alive)."""
    scripts: dict[str, Callable[[int], "Lifecycle"]] = field(default_factory=dict)
    """Pool -> the lifecycle of each NodeClaim it launches (by launch number)."""
    running: bool = True
    initializes: bool = True
    """False: Karpenter runs but never marks a NodeClaim Initialized (a controller bug, a lagging queue)."""
    identity: str = "karpenter-7d9f-abcde"
    launched: int = 0
    leading_since: float = -3600.0
    lifecycles: dict[str, "Lifecycle"] = field(default_factory=dict)
    terminated: list[str] = field(default_factory=list)

    @property
    def lease_path(self) -> str:
        return guard.LeaseRef(KARPENTER_NAMESPACE, "karpenter-leader-election").path

    def start(self, now: float) -> None:
        self.running = True
        self.leading_since = now

    def stop(self) -> None:
        self.running = False

    def step(self, clock: Clock) -> None:
        if not self.running:
            return
        if clock.seconds % 2 == 0:
            self._renew(clock)
        if clock.seconds % 5 == 0:
            self._reconcile(clock)

    def _renew(self, clock: Clock) -> None:
        acquired = START + datetime.timedelta(seconds=self.leading_since)
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "karpenter-leader-election", "namespace": KARPENTER_NAMESPACE, "uid": "k"},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": 15,
                "acquireTime": guard.format_micro_time(acquired),
                "renewTime": guard.format_micro_time(clock.now),
            },
        }
        self.cluster.leases[self.lease_path] = lease
        self.cluster.bump(lease)

    def _reconcile(self, clock: Clock) -> None:
        cluster = self.cluster
        for name, claim in list(cluster.nodeclaims.items()):
            node = next(
                (
                    n
                    for n in cluster.nodes.values()
                    if n["spec"]["providerID"] == claim["status"]["providerID"]
                ),
                None,
            )
            if claim["metadata"].get("deletionTimestamp"):
                del cluster.nodeclaims[name]  # the instance is terminated; the finalizer goes
                if node is not None:
                    del cluster.nodes[node["metadata"]["name"]]
                self.terminated.append(name)
                continue
            if node is None:
                continue
            if UNREGISTERED in node["spec"]["taints"]:
                node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t != UNREGISTERED]
                cluster.bump(node)
            initialized = guard.condition(claim, "Initialized").get("status") == "True"
            ready = guard.condition(node, "Ready").get("status") == "True"
            startup = any(
                s["key"] == t["key"] and s["effect"] == t["effect"]
                for s in claim["spec"]["startupTaints"]
                for t in node["spec"]["taints"]
            )
            ephemeral = any(
                t["key"] in ("node.kubernetes.io/not-ready", "karpenter.sh/unregistered")
                for t in node["spec"]["taints"]
            )
            criteria = (
                ready and not startup and not ephemeral and requested_resources_allocatable(claim, node)
            )
            if self.initializes and not initialized and criteria:
                for condition in claim["status"]["conditions"]:
                    if condition["type"] == "Initialized":
                        condition.update(
                            status="True", reason="Initialized", lastTransitionTime=clock.stamp()
                        )
                cluster.bump(claim)
        for pool, wanted in self.demand.items():
            alive = [
                c
                for c in cluster.nodeclaims.values()
                if c["metadata"]["labels"][guard.NODEPOOL_LABEL] == pool
            ]
            for _ in range(wanted - len(alive)):
                self.launch(pool, clock)

    def launch(self, pool: str, clock: Clock, script: "Lifecycle | None" = None) -> str:
        self.launched += 1
        name = f"{pool}-{self.launched:03d}"
        lifecycle = script or self.scripts[pool](self.launched)
        startup = [GATE] if lifecycle.mig else []
        claim = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "labels": {guard.NODEPOOL_LABEL: pool, guard.INSTANCE_TYPE_LABEL: INSTANCE_TYPE},
                "ownerReferences": [
                    {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": pool, "uid": f"np-{pool}"}
                ],
            },
            "spec": {
                "startupTaints": startup,
                "resources": {"requests": {"cpu": "4", "pods": "2", "nvidia.com/gpu": "1"}},
            },
            "status": {
                "providerID": f"aws:///us-west-2a/i-{name}",
                "conditions": [
                    {"type": "Launched", "status": "True", "lastTransitionTime": clock.stamp()},
                    {
                        "type": "Initialized",
                        "status": "Unknown",
                        "reason": "NodeNotFound",
                        "lastTransitionTime": clock.stamp(),
                    },
                ],
            },
        }
        self.cluster.nodeclaims[name] = claim
        self.cluster.bump(claim)
        self.lifecycles[name] = lifecycle.at(clock.seconds, name, pool)
        return name


# --- Nodes -------------------------------------------------------------------------------------------------
@dataclass
class NodeScript:
    """What happens to a launched instance's Node, seconds after launch: registration, readiness, the GPUs
    appearing, and for MIG the MIG manager's states (with the reboot taking the node NotReady)."""

    register: float = 240
    ready: float = 300
    gpus: float | None = 420
    """When the device plugin makes `nvidia.com/gpu` allocatable; None: never (a stuck node)."""
    mig: bool = False
    mig_states: tuple[tuple[float, str], ...] = ()
    """(seconds after launch, `nvidia.com/mig.config.state`) the MIG manager sets."""
    not_ready: tuple[tuple[float, float], ...] = ()
    """(from, to) seconds after launch when the node is NotReady (a reboot)."""
    launched_at: float = 0
    name: str = ""
    pool: str = ""

    def at(self, launched_at: float, name: str, pool: str) -> "NodeScript":
        return NodeScript(
            self.register,
            self.ready,
            self.gpus,
            self.mig,
            self.mig_states,
            self.not_ready,
            launched_at,
            name,
            pool,
        )

    def step(self, cluster: Cluster, clock: Clock) -> None:
        t = clock.seconds - self.launched_at
        node = cluster.nodes.get(self.name)
        if self.name not in cluster.nodeclaims:
            return
        if node is None:
            if t >= self.register:
                self._create(cluster)
            return
        changed = False
        ready = t >= self.ready and not any(a <= t < b for a, b in self.not_ready)
        status = "True" if ready else "False"
        condition = node["status"]["conditions"][0]
        if condition["status"] != status:
            condition["status"] = status
            taints = [t for t in node["spec"]["taints"] if t != NOT_READY]
            node["spec"]["taints"] = taints if ready else [*taints, NOT_READY]
            changed = True
        labels = node["metadata"]["labels"]
        reached = [state for when, state in self.mig_states if t >= when]
        if reached and labels.get(STATE) != reached[-1]:
            labels[STATE] = reached[-1]
            if reached[-1] in ("success", "failed"):
                labels[PLUGIN] = "true"  # the MIG manager's exit, success or not (`maybeSetTrue`)
            changed = True
        gpus = self._gpus(t, labels)
        if node["status"]["allocatable"]["nvidia.com/gpu"] != gpus:
            node["status"]["allocatable"]["nvidia.com/gpu"] = gpus
            changed = True
        if changed:
            cluster.bump(node)

    def _gpus(self, t: float, labels: dict[str, str]) -> str:
        if self.gpus is None or t < self.gpus:
            return "0"
        if self.mig and (labels.get(STATE) != "success" or labels.get(PLUGIN) != "true"):
            return "0"
        return "56" if self.mig else "8"

    def _create(self, cluster: Cluster) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "uid": f"node-{self.name}",
                "labels": {
                    guard.NODEPOOL_LABEL: self.pool,
                    **(
                        {guard.MIG_CONFIG_LABEL: "all-1g.10gb", PLUGIN: guard.DEVICE_PLUGIN_PAUSED}
                        if self.mig
                        else {}
                    ),
                },
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {
                "providerID": f"aws:///us-west-2a/i-{self.name}",
                "taints": [GPU_TAINT, UNREGISTERED, NOT_READY, *([GATE] if self.mig else [])],
            },
            "status": {
                "conditions": [{"type": "Ready", "status": "False"}],
                "allocatable": {"cpu": "95", "pods": "110", "nvidia.com/gpu": "0"},
            },
        }
        cluster.nodes[self.name] = node
        cluster.bump(node)


@dataclass
class MigNode:
    """A MIG node with its operands, modelled from the GPU Operator v26.7.0 and MIG manager v0.15.0 sources
    (the module docstring; facts/gpu_operator.py): NFD, the operator's labelling (and its sweeps of nodes not
    yet labelled, set off by other nodes' events), the device plugin's pod, the MIG manager with its reboot,
    and what the node's allocatable shows. Times in seconds after launch."""

    register: float = 240
    nfd: float = 330
    """When NFD's PCI labels arrive (the operator labels the node within the second)."""
    sweeps: tuple[float, ...] = ()
    """When an operator reconcile runs for another node's sake (it sweeps this one if NFD has not labelled
    it yet)."""
    validation: float = 40
    """From the device plugin's pod being created to its resource registered (init containers, start)."""
    manager_start: float = 45
    """From the operator enabling the operands (or the node coming back) to the MIG manager at work."""
    reboot: float | None = 600
    """The MIG mode change needs a reboot of this long (fabric manager and persistence daemon hold the GPUs);
    None: it applies in place."""
    partition: float = 60
    fails: bool = False
    """The MIG manager fails to create the MIG devices (after MIG mode is on)."""
    gpus: int = 8
    slices: int = 56
    mig: bool = True
    launched_at: float = 0
    name: str = ""
    pool: str = ""
    # What happened so far.
    enabled_at: float | None = None
    plugin_since: float | None = None
    advertised: int = 0
    mig_mode: bool = False
    partitioned: bool = False
    phase: str = "idle"
    phase_at: float = 0
    read_plugin: str = ""
    down_until: float = -1

    def at(self, launched_at: float, name: str, pool: str) -> "MigNode":
        return replace(self, launched_at=launched_at, name=name, pool=pool)

    def step(self, cluster: Cluster, clock: Clock) -> None:
        now, t = clock.seconds, clock.seconds - self.launched_at
        if self.name not in cluster.nodeclaims:
            return
        node = cluster.nodes.get(self.name)
        if node is None:
            if t >= self.register:
                NodeScript(mig=True).at(self.launched_at, self.name, self.pool)._create(cluster)
            return
        before = json.dumps(node, sort_keys=True)
        labels = node["metadata"]["labels"]
        ready = t >= self.register + 60 and now >= self.down_until
        node["status"]["conditions"][0]["status"] = "True" if ready else "False"
        taints = [x for x in node["spec"]["taints"] if x != NOT_READY]
        node["spec"]["taints"] = taints if ready else [*taints, NOT_READY]
        if any(int(t) == int(s) for s in self.sweeps) and labels.get("nvidia.com/gpu.present") != "true":
            for key in [k for k in labels if k.startswith("nvidia.com/gpu.deploy.")]:
                del labels[key]  # removeAllGPUStateLabels
        if t >= self.nfd and labels.get("nvidia.com/gpu.present") != "true":
            labels["feature.node.kubernetes.io/pci-10de.present"] = "true"
            labels["nvidia.com/gpu.present"] = "true"
            for key in (PLUGIN, "nvidia.com/gpu.deploy.mig-manager"):
                if not labels.get(key):
                    labels[key] = "true"  # addGPUStateLabels: only where absent or empty
            self.enabled_at = now
        self._device_plugin(labels, ready, now)
        self._mig_manager(labels, ready, now)
        node["status"]["allocatable"]["nvidia.com/gpu"] = str(self.advertised)
        if json.dumps(node, sort_keys=True) != before:
            cluster.bump(node)

    def _device_plugin(self, labels: dict[str, str], ready: bool, now: float) -> None:
        if labels.get(PLUGIN) != "true" or not ready:
            self.plugin_since, self.advertised = None, 0  # no pod: kubelet reports none allocatable
            return
        if self.plugin_since is None:
            self.plugin_since = now
        if now - self.plugin_since >= self.validation:
            # k8s-device-plugin v0.20.0, strategy single: whole GPUs without MIG mode, the MIG devices with
            # it, nothing (an error) with MIG mode on and no devices.
            self.advertised = self.slices if self.partitioned else (0 if self.mig_mode else self.gpus)

    def _mig_manager(self, labels: dict[str, str], ready: bool, now: float) -> None:
        if self.enabled_at is None or not ready or self.phase == "done":
            return
        if (
            self.phase in ("idle", "restarting")
            and now - max(self.enabled_at, self.phase_at) >= self.manager_start
        ):
            self.read_plugin = labels.get(PLUGIN, "")  # getCurrentNodeLabels
            labels[STATE] = "pending"
            labels[PLUGIN] = "false" if self.read_plugin == "false" else guard.DEVICE_PLUGIN_PAUSED
            self.phase, self.phase_at = "paused", now
        elif self.phase == "paused" and self.advertised == 0:
            if not self.mig_mode and self.reboot is not None:
                labels[STATE] = "rebooting"
                self.mig_mode = True  # takes effect with the reboot
                self.down_until = now + self.reboot
                self.phase, self.phase_at = "restarting", now + self.reboot
                return
            self.mig_mode = True
            self.phase, self.phase_at = "partitioning", now
        elif self.phase == "partitioning" and now - self.phase_at >= self.partition:
            self.partitioned = not self.fails
            labels[PLUGIN] = "false" if self.read_plugin == "false" else "true"  # maybeSetTrue, either way
            labels[STATE] = "failed" if self.fails else "success"
            self.phase = "done"


Lifecycle = NodeScript | MigNode


def karpenter_visible_gpus(cluster: Cluster, claim_name: str, expected: int) -> int | None:
    """What Karpenter counts a node as holding (statenode.go `Allocatable`): an initialized node's own
    allocatable; before, the node's where non-zero, else what the NodeClaim expects (instance type and
    NodeOverlays). None without a Node."""
    claim = cluster.nodeclaims.get(claim_name)
    node = cluster.nodes.get(claim_name)
    if claim is None or node is None:
        return None
    reported = int(node["status"]["allocatable"].get("nvidia.com/gpu", "0"))
    if guard.condition(claim, "Initialized").get("status") == "True":
        return reported
    return reported or expected


# --- The guard's replicas ----------------------------------------------------------------------------------
POOLS = {
    "gpu": guard.PoolPolicy(initialization_timeout_seconds=20 * 60, mig_gate=False),
    "mig": guard.PoolPolicy(initialization_timeout_seconds=40 * 60, mig_gate=True),
}


def guard_config(**overrides: Any) -> guard.GuardConfig:
    return guard.GuardConfig(
        pools=overrides.pop("pools", POOLS),
        mig_taint=guard.Taint(GATE["key"], GATE["value"], GATE["effect"]),
        karpenter_lease=guard.LeaseRef(KARPENTER_NAMESPACE, "karpenter-leader-election"),
        **overrides,
    )


@dataclass
class Replica:
    """One guard pod: the real Guard and LeaderElector, ticking and syncing as `guard.main` schedules them
    (election every 2 s; a sync every interval, and about 2 s after a change to a MIG node it watches)."""

    name: str
    world: "World"
    alive: bool = True
    process: guard.Guard | None = None
    next_tick: float = 0
    next_sync: float = 0
    last_sync: float = -math.inf
    crashes: int = 0

    def start(self) -> None:
        """A fresh process: nothing in memory survives a restart."""
        clock, cluster = self.world.clock, self.world.cluster
        api = guard.Api(cluster.transport(self.name), "default")
        elector = guard.LeaderElector(api, self.world.config.leader_lease, self.name)
        self.process = guard.Guard(api, self.world.config, elector, clock=lambda: (clock.seconds, clock.now))
        self.alive = True
        self.next_tick = self.next_sync = clock.seconds

    def kill(self) -> None:
        self.alive = False
        self.process = None

    def step(self) -> None:
        if not self.alive or self.process is None:
            return
        seconds = self.world.clock.seconds
        try:
            if seconds >= self.next_tick:
                was = self.process.elector.is_leader(seconds)
                if self.process.elector.tick(seconds, self.world.clock.now) and not was:
                    self.next_sync = seconds  # a new leader syncs at once
                self.next_tick = seconds + guard.RETRY_PERIOD_SECONDS
            changed = self.world.watched_change()
            if self.world.watch and changed is not None and changed > self.last_sync:
                self.next_sync = min(self.next_sync, changed + self.world.reaction)
            if seconds >= self.next_sync:
                self.last_sync = seconds
                self.next_sync = seconds + self.world.config.sync_interval_seconds
                try:
                    self.process.sync()
                except (guard.ApiError, OSError) as error:
                    self.process.metrics.sync_errors += 1
                    self.world.log.append((seconds, self.name, f"sync failed: {error}"))
        except Crash:
            self.crashes += 1
            self.kill()


@dataclass
class World:
    clock: Clock = field(default_factory=Clock)
    config: guard.GuardConfig = field(default_factory=guard_config)
    reaction: float = 2
    """Seconds from a change to a watched node to the sync it wakes (watch delivery and the 1 s settle)."""
    watch: bool = True
    """False: the replicas only poll, every sync interval (the guard before its watch)."""
    cluster: Cluster = field(init=False)
    karpenter: Karpenter = field(init=False)
    replicas: list[Replica] = field(default_factory=list)
    hooks: list[Callable[["World"], None]] = field(default_factory=list)
    """Run every step before the actors (scripted incidents)."""
    log: list[tuple[float, str, str]] = field(default_factory=list)
    _watched_key: tuple[int, int] | None = field(default=None, init=False, repr=False)
    _watched: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.cluster = Cluster(self.clock)
        self.karpenter = Karpenter(self.cluster)

    def replica(self, name: str) -> Replica:
        replica = Replica(name, self)
        replica.start()
        self.replicas.append(replica)
        return replica

    def run(self, seconds: float) -> None:
        end = self.clock.seconds + seconds
        while self.clock.seconds < end:
            for hook in self.hooks:
                hook(self)
            for lifecycle in list(self.karpenter.lifecycles.values()):
                lifecycle.step(self.cluster, self.clock)
            self.karpenter.step(self.clock)
            for replica in self.replicas:
                replica.step()
            self.clock.seconds += 1

    def at(self, second: float, action: Callable[["World"], None]) -> None:
        """Do `action` once, at that second."""
        done = False

        def hook(world: "World") -> None:
            nonlocal done
            if not done and world.clock.seconds >= second:
                done = True
                action(world)

        self.hooks.append(hook)

    def watched_change(self) -> float | None:
        """When a node of a MIG pool last changed (what the replicas' watch reports), if any is there."""
        # Every change of a Node is counted but its removal, which changes the set of nodes: the pair says
        # when to look again (the replicas ask every simulated second).
        key = (self.cluster.node_changes, len(self.cluster.nodes))
        if key != self._watched_key:
            gated = {p for p, policy in self.config.pools.items() if policy.mig_gate}
            times = [
                t
                for name, t in self.cluster.node_changed.items()
                if (self.cluster.nodes.get(name, {}).get("metadata", {}).get("labels") or {}).get(
                    guard.NODEPOOL_LABEL
                )
                in gated
            ]
            self._watched_key, self._watched = key, max(times, default=None)
        return self._watched

    def leader(self) -> str:
        return self.cluster.guard_holder()

    def each_replica(self, what: str) -> None:
        """`kill` or `start` every replica (a restart of the whole Deployment)."""
        for replica in self.replicas:
            getattr(replica, what)()

    def leader_metrics(self) -> guard.Metrics | None:
        """The metrics of the live replica the Lease names, if any."""
        holder = self.leader()
        return next((r.process.metrics for r in self.replicas if r.name == holder and r.process), None)
