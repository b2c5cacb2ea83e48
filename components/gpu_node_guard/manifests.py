"""The GPU node guard's Kubernetes objects (pure; no Pulumi): namespace, identity and RBAC, the ConfigMap with
the program (`guard.py`), its NetworkPolicy, the two-replica Deployment on the system nodes and its
PodDisruptionBudget, the metrics Service, and with an observability backend the ServiceMonitor that scrapes
it."""

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components import MANAGED_BY
from components.cluster import API_PORT
from config.gpu_node_guard import GpuNodeGuardConfig
from config.kubernetes import MIG_PENDING_TAINT
from config.node_pools import NodePoolConfig
from config.types import duration_seconds
from facts.karpenter_lifecycle import (
    LEADER_ELECTION_LEASE,
    LEADER_LEASE_DURATION_SECONDS,
    REPAIR_UNHEALTHY_PERCENT,
)
from facts.system_pods import GUARD_REPLICAS

NAME = "gpu-node-guard"
"""Name of the ServiceAccount and Deployment, prefix of the ConfigMap's, and (prefixed `gpu-eks-`) the name of
the cluster-scoped RBAC objects."""
CLUSTER_ROLE = f"gpu-eks-{NAME}"
METRICS_SERVICE = f"{NAME}-metrics"
METRICS_PORT = 8080
METRICS_PORT_NAME = "metrics"
"""Named container and Service port of `/metrics` (Prometheus text format), for a ServiceMonitor or scrape
config."""
METRICS_JOB = METRICS_SERVICE
"""`job` of the guard's series: a ServiceMonitor without `jobLabel` takes the Service's name (the
ServiceMonitor CRD of Prometheus Operator v0.93.1, `spec.jobLabel`)."""
EVENT_NAMESPACE = "default"
"""Where the guard records Events about Nodes and NodeClaims (cluster-scoped objects; `kubectl describe` looks
in `default`)."""
MOUNT_PATH = "/opt/gpu-node-guard"
SCRIPT = Path(__file__).with_name("guard.py")
"""The program the Deployment runs, shipped verbatim in the ConfigMap."""
SELECTOR = {"app.kubernetes.io/name": NAME}
LABELS = {**SELECTOR, **MANAGED_BY}
RUN_AS = 65532
"""The distroless `nonroot` user; any non-root UID works, the program writes nothing."""

LEADER_LEASE = NAME
"""The Lease the guard's replicas elect their leader with, in the guard's namespace; it also carries the
circuit breaker's history (annotation `gpu-eks.io/deletions`: per pool the last hour's deletions and the
streak of deletions without a NodeClaim initializing)."""
REPLICAS = GUARD_REPLICAS
"""Leader and standby, on different system nodes (the system node group has at least two)."""
PRIORITY_CLASS = "system-cluster-critical"
"""Without the guard no MIG node's gate is lifted; it must not be the pod a busy system node evicts first
(Karpenter's own chart runs at this priority too)."""
KARPENTER_STALE_SECONDS = 4 * LEADER_LEASE_DURATION_SECONDS
"""Karpenter's leader renews its Lease every 2 s and a standby takes over 15 s after the last renewal: a Lease
not renewed for four lease durations means no Karpenter replica leads."""
KARPENTER_SETTLE_SECONDS = 5 * 60
"""After a Karpenter replica takes over, the guard waits this long before deleting anything, so Karpenter has
reconciled every NodeClaim's conditions once (a full resync of the state it rebuilds on start)."""
MEMORY_REQUEST = "64Mi"
MEMORY_LIMIT = "128Mi"
"""Sized from `scripts/guard_memory.py`, which runs the guard's listing and decisions over fake GPU Nodes and
NodeClaims shaped like real ones (NFD labels, images, managed fields: 27 MiB of JSON for 1,000 of each) and
prints the interpreter's peak resident memory: 35 MiB for 1,000 Nodes and 1,000 NodeClaims, 60 MiB for 5,000
of each (Python 3.11; docs/performance.md). The request covers a thousand-node cluster, the limit five
thousand and the HTTP server, watch and TLS buffers besides. Before the guard filtered by pool, cut each
object down to what it reads and paged by 100, keeping 1,000 full objects of each took 104 MiB."""

CLUSTER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch", "watch"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["delete", "list"]},
)
"""What the guard may do cluster-wide: list and watch Nodes and patch them (the MIG gate: taint, device-plugin
label, progress annotation), list NodeClaims and delete them (the watchdog). No get, update or create: the
program lists (filtered by pool) and patches."""
EVENT_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
)
"""What the guard may do in `EVENT_NAMESPACE`: record Events."""
LEADER_RULES: tuple[Mapping[str, Any], ...] = (
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": [LEADER_LEASE],
        "verbs": ["get", "update"],
    },
    # RBAC cannot restrict create by name (the name is not in the request's path).
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
)
"""What the guard may do in its own namespace: create, read and renew its leader Lease."""
KARPENTER_LEASE_RULES: tuple[Mapping[str, Any], ...] = (
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": [LEADER_ELECTION_LEASE],
        "verbs": ["get"],
    },
)
"""What the guard may do in Karpenter's namespace: read Karpenter's leader Lease."""
ROLES = {"events": EVENT_RULES, "leader-election": LEADER_RULES, "lease-reader": KARPENTER_LEASE_RULES}
"""The guard's Roles by purpose (their namespaces: `role_namespaces`)."""


_TOKEN_NEEDED = (
    "CKV_K8S_38=the guard calls the Kubernetes API with its ServiceAccount's token (lists and watches Nodes, "
    "lists NodeClaims, patches Nodes, deletes NodeClaims, records Events, holds its leader Lease)"
)
_EVENTS_IN_DEFAULT = (
    "CKV_K8S_21=Events about Nodes and NodeClaims (cluster-scoped) belong in default, where kubectl "
    "describe finds them; the Role only creates Events there"
)
CHECKOV_SKIPS = {
    "Deployment": {"checkov.io/skip1": _TOKEN_NEEDED},
    "Role": {"checkov.io/skip1": _EVENTS_IN_DEFAULT},
    "RoleBinding": {"checkov.io/skip1": _EVENTS_IN_DEFAULT},
}
"""Findings of checkov that do not apply to the guard, each with its reason, next to the object (checkov's
syntax), by kind."""

SETTINGS_ENV = "GPU_NODE_GUARD_SETTINGS"
"""Environment variable of the guard's container holding its settings as JSON (`guard_settings`)."""


def pool_policy(pool: NodePoolConfig, config: GpuNodeGuardConfig) -> tuple[int | None, bool]:
    """How the guard treats a GPU pool: its initialization timeout in seconds (None for `Never`) and whether
    its nodes are MIG-gated."""
    mig_gate = MIG_PENDING_TAINT in pool.effective_startup_taints
    timeout = config.timeout_for(pool.initialization_timeout, mig_gate)
    return (None if timeout == "Never" else duration_seconds(timeout)), mig_gate


def pool_policies(pools: Sequence[NodePoolConfig], config: GpuNodeGuardConfig) -> dict[str, dict[str, Any]]:
    """Per GPU pool, `pool_policy` as the program reads it."""
    policies: dict[str, dict[str, Any]] = {}
    for pool in pools:
        if pool.kind == "gpu":
            timeout, mig_gate = pool_policy(pool, config)
            policies[pool.name] = {"initializationTimeoutSeconds": timeout, "migGate": mig_gate}
    return policies


def guard_settings(
    pools: Sequence[NodePoolConfig], config: GpuNodeGuardConfig, *, karpenter_namespace: str
) -> dict[str, Any]:
    """The settings the program reads from `SETTINGS_ENV` (`GuardConfig.from_json`)."""
    return {
        "pools": pool_policies(pools, config),
        "migTaint": MIG_PENDING_TAINT.model_dump(),
        "leaderLease": {"namespace": config.namespace, "name": LEADER_LEASE},
        "karpenterLease": {"namespace": karpenter_namespace, "name": LEADER_ELECTION_LEASE},
        "karpenterStaleSeconds": KARPENTER_STALE_SECONDS,
        "karpenterSettleSeconds": KARPENTER_SETTLE_SECONDS,
        "maxDeletionsPerHour": config.max_deletions_per_hour,
        "maxConsecutiveDeletions": config.max_consecutive_deletions,
        "unhealthyPercent": REPAIR_UNHEALTHY_PERCENT,
        "eventNamespace": EVENT_NAMESPACE,
        "syncIntervalSeconds": config.sync_interval_seconds,
        "metricsPort": METRICS_PORT,
    }


def role_namespaces(config: GpuNodeGuardConfig, karpenter_namespace: str) -> dict[str, str]:
    """Where each of the guard's Roles (`ROLES`) lives."""
    return {
        "events": EVENT_NAMESPACE,
        "leader-election": config.namespace,
        "lease-reader": karpenter_namespace,
    }


def role_name(purpose: str) -> str:
    """The events Role keeps its first name (an object's name is its identity: renaming replaces it)."""
    return CLUSTER_ROLE if purpose == "events" else f"{CLUSTER_ROLE}-{purpose}"


def logical_name(manifest: Mapping[str, Any]) -> str:
    """The suffix of an object's Pulumi logical name: its kind, and for a Role or RoleBinding its purpose
    (`role-events`, `rolebinding-leader-election`, ...), so that adding a Role renames none."""
    kind = str(manifest["kind"]).lower()
    if manifest["kind"] not in ("Role", "RoleBinding"):
        return kind
    name = manifest["metadata"]["name"]
    purpose = next(p for p in ROLES if role_name(p) == name)
    return f"{kind}-{purpose}"


def _metadata(name: str, namespace: str | None = None, kind: str = "") -> dict[str, Any]:
    skips = CHECKOV_SKIPS.get(kind)
    return {
        "name": name,
        **({"namespace": namespace} if namespace else {}),
        "labels": dict(LABELS),
        **({"annotations": dict(skips)} if skips else {}),
    }


def service_monitor(namespace: str) -> dict[str, Any]:
    """The ServiceMonitor of the guard's metrics Service (`/metrics` on the `metrics` port); the NetworkPolicy
    admits scrapers from any namespace on that port."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _metadata(NAME, namespace),
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            "endpoints": [{"port": METRICS_PORT_NAME, "path": "/metrics"}],
        },
    }


def manifests(
    pools: Sequence[NodePoolConfig],
    config: GpuNodeGuardConfig,
    *,
    system_node_selector: Mapping[str, str],
    karpenter_namespace: str,
    scraped: bool = False,
) -> list[dict[str, Any]]:
    """Every object of the guard, in creation order; with `scraped` (a Prometheus Operator scrapes the
    cluster) the ServiceMonitor too. `karpenter_namespace`: where Karpenter's leader Lease is."""
    namespace = config.namespace
    data = {"guard.py": SCRIPT.read_text()}
    # The ConfigMap holds only the program, is immutable and named after its content: a new program creates a
    # new one (Pulumi replaces a changed ConfigMap anyway) and rolls the pods onto it; the old one goes after.
    # The settings (which change with the pools) travel in the Deployment, so adding a pool is an update.
    config_map = f"{NAME}-{hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]}"
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    probe = {
        "httpGet": {"path": "/healthz", "port": METRICS_PORT_NAME},
        "periodSeconds": 30,
        "timeoutSeconds": 5,
    }
    settings = guard_settings(pools, config, karpenter_namespace=karpenter_namespace)
    container = {
        "name": "guard",
        "image": config.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", f"{MOUNT_PATH}/guard.py"],
        "env": [
            {"name": SETTINGS_ENV, "value": json.dumps(settings, sort_keys=True)},
            # Its identity in the leader Lease and in the Events it records.
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "livenessProbe": {**probe, "failureThreshold": 3},
        "readinessProbe": {**probe, "failureThreshold": 1},
        "resources": {
            "requests": {"cpu": "10m", "memory": MEMORY_REQUEST},
            "limits": {"cpu": "500m", "memory": MEMORY_LIMIT},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "program", "mountPath": MOUNT_PATH, "readOnly": True}],
    }
    roles: list[dict[str, Any]] = []
    for purpose, where in role_namespaces(config, karpenter_namespace).items():
        name = role_name(purpose)
        roles += [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": _metadata(name, where, "Role" if where == EVENT_NAMESPACE else ""),
                "rules": [dict(r) for r in ROLES[purpose]],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": _metadata(name, where, "RoleBinding" if where == EVENT_NAMESPACE else ""),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": subject,
            },
        ]
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {
                    **LABELS,
                    **{
                        f"pod-security.kubernetes.io/{mode}": "restricted"
                        for mode in ("enforce", "audit", "warn")
                    },
                },
            },
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(NAME, namespace)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _metadata(CLUSTER_ROLE),
            "rules": [dict(r) for r in CLUSTER_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _metadata(CLUSTER_ROLE),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
            "subjects": subject,
        },
        *roles,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(config_map, namespace),
            "immutable": True,
            "data": data,
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _metadata(NAME, namespace),
            "spec": {
                "podSelector": {"matchLabels": dict(SELECTOR)},
                "policyTypes": ["Ingress", "Egress"],
                # In: /metrics and /healthz (scrapers anywhere, the kubelet's probes).
                "ingress": [{"ports": [{"port": METRICS_PORT, "protocol": "TCP"}]}],
                # Out: the Kubernetes API only. The guard dials KUBERNETES_SERVICE_HOST (an address, no DNS);
                # policies see the API server's endpoints behind that Service, which EKS serves on 443.
                "egress": [{"ports": [{"port": API_PORT, "protocol": "TCP"}]}],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(NAME, namespace, "Deployment"),
            "spec": {
                # Leader and standby (leader election on LEADER_LEASE); a rollout replaces one at a time, and
                # the one that leads hands the Lease over when it stops.
                "replicas": REPLICAS,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                "selector": {"matchLabels": dict(SELECTOR)},
                "template": {
                    "metadata": {"labels": dict(LABELS)},
                    "spec": {
                        "serviceAccountName": NAME,
                        "automountServiceAccountToken": True,
                        "priorityClassName": PRIORITY_CLASS,
                        # On the system node group, never on a node it may delete; the two on different nodes.
                        "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector},
                        "affinity": {
                            "podAntiAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "labelSelector": {"matchLabels": dict(SELECTOR)},
                                        "topologyKey": "kubernetes.io/hostname",
                                    }
                                ]
                            }
                        },
                        "terminationGracePeriodSeconds": 30,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": RUN_AS,
                            "runAsGroup": RUN_AS,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container],
                        "volumes": [{"name": "program", "configMap": {"name": config_map}}],
                    },
                },
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": _metadata(NAME, namespace),
            "spec": {
                # A drain takes one replica at a time; a replica that is not ready may always go.
                "minAvailable": REPLICAS - 1,
                "selector": {"matchLabels": dict(SELECTOR)},
                "unhealthyPodEvictionPolicy": "AlwaysAllow",
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _metadata(METRICS_SERVICE, namespace),
            "spec": {
                "selector": dict(SELECTOR),
                "ports": [
                    {
                        "name": METRICS_PORT_NAME,
                        "port": METRICS_PORT,
                        "targetPort": METRICS_PORT_NAME,
                        "protocol": "TCP",
                    }
                ],
            },
        },
    ]
    if scraped:
        objects.append(service_monitor(namespace))
    return objects
