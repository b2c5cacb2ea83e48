"""The GPU node guard's Kubernetes objects (pure; no Pulumi): namespace, identity and RBAC, the ConfigMap with
the program (`guard.py`) and its settings, its NetworkPolicy, the Deployment on the system nodes, the metrics
Service, and with an observability backend the ServiceMonitor that scrapes it."""

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.cluster import API_PORT
from config.gpu_node_guard import GpuNodeGuardConfig
from config.kubernetes import MIG_PENDING_TAINT
from config.node_pools import NodePoolConfig
from config.types import duration_seconds

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
LABELS = {**SELECTOR, "app.kubernetes.io/managed-by": "gpu-eks"}
RUN_AS = 65532
"""The distroless `nonroot` user; any non-root UID works, the program writes nothing."""

CLUSTER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["delete", "list"]},
)
"""What the guard may do cluster-wide: list Nodes and patch them (the MIG taint), list NodeClaims and delete
them (the watchdog). No get, watch, update or create: the program polls lists and patches."""
EVENT_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
)
"""What the guard may do in `EVENT_NAMESPACE`: record Events."""


_TOKEN_NEEDED = (
    "CKV_K8S_38=the guard calls the Kubernetes API with its ServiceAccount's token (lists Nodes and "
    "NodeClaims, patches Nodes, deletes NodeClaims, records Events)"
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


def pool_policies(pools: Sequence[NodePoolConfig], config: GpuNodeGuardConfig) -> dict[str, dict[str, Any]]:
    """Per GPU pool: the initialization timeout in seconds (None for `Never`) and whether it is MIG-gated."""
    policies: dict[str, dict[str, Any]] = {}
    for pool in pools:
        if pool.kind != "gpu":
            continue
        mig_gate = MIG_PENDING_TAINT in pool.effective_startup_taints
        timeout = config.timeout_for(pool.initialization_timeout, mig_gate)
        policies[pool.name] = {
            "initializationTimeoutSeconds": None if timeout == "Never" else duration_seconds(timeout),
            "migGate": mig_gate,
        }
    return policies


def guard_settings(pools: Sequence[NodePoolConfig], config: GpuNodeGuardConfig) -> dict[str, Any]:
    """The settings the program reads from `SETTINGS_ENV` (`GuardConfig.from_json`)."""
    return {
        "pools": pool_policies(pools, config),
        "migTaint": MIG_PENDING_TAINT.model_dump(),
        "eventNamespace": EVENT_NAMESPACE,
        "syncIntervalSeconds": config.sync_interval_seconds,
        "metricsPort": METRICS_PORT,
    }


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
    scraped: bool = False,
) -> list[dict[str, Any]]:
    """Every object of the guard, in creation order; with `scraped` (a Prometheus Operator scrapes the
    cluster) the ServiceMonitor too."""
    namespace = config.namespace
    data = {"guard.py": SCRIPT.read_text()}
    # The ConfigMap holds only the program, is immutable and named after its content: a new program creates a
    # new one (Pulumi replaces a changed ConfigMap anyway) and rolls the pod onto it; the old one goes after.
    # The settings (which change with the pools) travel in the Deployment, so adding a pool is an update.
    config_map = f"{NAME}-{hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]}"
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    probe = {
        "httpGet": {"path": "/healthz", "port": METRICS_PORT_NAME},
        "periodSeconds": 30,
        "timeoutSeconds": 5,
    }
    container = {
        "name": "guard",
        "image": config.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", f"{MOUNT_PATH}/guard.py"],
        "env": [
            {"name": SETTINGS_ENV, "value": json.dumps(guard_settings(pools, config), sort_keys=True)},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "livenessProbe": {**probe, "failureThreshold": 3},
        "readinessProbe": {**probe, "failureThreshold": 1},
        "resources": {
            "requests": {"cpu": "10m", "memory": "64Mi"},
            "limits": {"cpu": "200m", "memory": "128Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "program", "mountPath": MOUNT_PATH, "readOnly": True}],
    }
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
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(CLUSTER_ROLE, EVENT_NAMESPACE, "Role"),
            "rules": [dict(r) for r in EVENT_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(CLUSTER_ROLE, EVENT_NAMESPACE, "RoleBinding"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CLUSTER_ROLE},
            "subjects": subject,
        },
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
                # One replica: every action is idempotent, so no leader election; Recreate never runs two.
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": dict(SELECTOR)},
                "template": {
                    "metadata": {"labels": dict(LABELS)},
                    "spec": {
                        "serviceAccountName": NAME,
                        "automountServiceAccountToken": True,
                        # On the system node group, never on a node it may delete.
                        "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector},
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
