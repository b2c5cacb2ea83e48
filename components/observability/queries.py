"""Label names and PromQL building blocks shared by the alert rules and the dashboards (pure).

Where each label comes from:
- Karpenter's metrics label a pool `nodepool` and a resource `resource_type` (the resource name lower-cased,
  `-` -> `_`: `nvidia.com/gpu`; sigs.k8s.io/karpenter pkg/controllers/metrics/{node,nodepool}/controller.go).
  Its NodeClaim status-condition metrics label the pool `karpenter_sh_nodepool` (awslabs/operatorpkg
  status/controller.go `toPrometheusLabel` of the `karpenter.sh/nodepool` label).
- kube-state-metrics labels an extended resource with every character outside `[a-zA-Z0-9_]` replaced by `_`
  (`nvidia_com_gpu`, internal/store/pod.go of v2.20.0) and node labels as `label_<sanitised key>` on
  `kube_node_labels`, for the keys in its allow list (`NODE_LABELS_ALLOWLIST`, set in the chart values).
- DCGM exporter series carry `gpu` (the GPU index on its node) and, through the ServiceMonitor relabeling of
  `components.gpu_operator_values.DCGM_NODE_RELABELING`, `node`.
- The GPU node guard's per-pool series carry `nodepool` (components/gpu_node_guard/guard.py `Metrics`).
- kube-state-metrics labels a pod's series `namespace`, `pod` and `uid`; `kube_pod_tolerations` has one series
  per toleration (`key`, `operator`, `value`, `effect`; an unset operator or effect is ""), and the opt-in
  `kube_pod_nodeselectors` one series per pod with a `nodeselector_<sanitised key>` label per selector
  (internal/store/pod.go of v2.20.0). Its ServiceMonitor keeps these labels (`honorLabels: true`).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from config.kubernetes import Taint
from pools.alerting import PoolAlerting

KARPENTER_GPU = "~nvidia\\.com/(gpu|mig_.+)"
"""`resource_type` of GPU resources on Karpenter's metrics (a regex matcher value): `nvidia.com/gpu` (whole
GPUs, time-slices, MIG devices of `mig.strategy: single`) and the `nvidia.com/mig-<profile>` resources of
`mixed` pools, whose nodes advertise no `nvidia.com/gpu` (`pools.sharing`)."""
KSM_GPU = "~nvidia_com_(gpu|mig_.+)"
"""`resource` of the same GPU resources on kube-state-metrics' metrics (a regex matcher value)."""

NODE_LABELS_ALLOWLIST = (
    "karpenter.sh/nodepool",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/instance-type",
)
"""Node labels kube-state-metrics exports on `kube_node_labels` (its `--metric-labels-allowlist`)."""
KSM_POOL_LABEL = "label_karpenter_sh_nodepool"
CONDITION_POOL_LABEL = "karpenter_sh_nodepool"

DCGM_JOB = "nvidia-dcgm-exporter"
"""`job` of the DCGM exporter's series: its ServiceMonitor takes the job from the Service's `app` label
(`jobLabel: app`, assets/state-dcgm-exporter/0500_service_monitor.yaml of gpu-operator v26.7.0)."""


PROMETHEUS_JOB = "kube-prometheus-stack-prometheus"
"""`job` of the in-cluster Prometheus' (or agent's) own series: the chart's self-monitoring ServiceMonitor
selects the Service `<release>-prometheus` and sets no `jobLabel`, so the job is the Service's name."""


@dataclass(frozen=True)
class Targets:
    """What the alerts and dashboards select: the GPU pools, and where each scraped component runs with the
    `job` its ServiceMonitor gives its series."""

    pools: tuple[PoolAlerting, ...]
    """The GPU pools, with what the alerts derive from each (`pools.alerting`)."""
    cluster: str
    """The cluster's name: a label on every alert, so that a notification says which cluster it is about."""
    managed: bool
    """The rules run in an Amazon Managed Service for Prometheus workspace, fed by an in-cluster agent (whose
    absence then looks like every target's absence), rather than in the in-cluster Prometheus."""
    monitoring_namespace: str
    """Where the monitoring stack (and its Prometheus or agent) runs."""
    gpu_operator_namespace: str
    gpu_node_guard_namespace: str
    gpu_node_guard_job: str
    karpenter_namespace: str
    karpenter_job: str
    interruption_handling: bool
    """Whether Karpenter reads an interruption queue (its alerts exist only then)."""

    @property
    def gpu_pools(self) -> tuple[str, ...]:
        """The GPU pools' names."""
        return tuple(p.name for p in self.pools)

    @property
    def dcgm_pools(self) -> tuple[str, ...]:
        """The GPU pools whose nodes report DCGM metrics (not Bottlerocket)."""
        return tuple(p.name for p in self.pools if p.dcgm)


def matchers(**labels: str) -> str:
    """`{a="x",b=~"y"}` from keyword arguments; a value starting with `~` is a regex match, `!` a negation."""
    parts = []
    for name, raw in labels.items():
        operator, value = {"~": ("=~", raw[1:]), "!": ("!=", raw[1:])}.get(raw[:1], ("=", raw))
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{name}{operator}"{escaped}"')
    return "{" + ", ".join(parts) + "}"


def any_of(names: Iterable[str]) -> str:
    """A regex matcher value (`~a|b`) for exactly these names (DNS labels: no regex metacharacters)."""
    return "~" + "|".join(sorted(names))


def on_pool_nodes(selector: str, pool: str) -> str:
    """Series of `selector` (which must carry `node`) from the nodes of one pool."""
    return f"({selector} and on (node) kube_node_labels{matchers(**{KSM_POOL_LABEL: pool})})"


def pending_gpu_pod_series() -> str:
    """One series per pod (`namespace`, `pod`) that asks for GPUs (or MIG devices) and that the scheduler
    could not place. Each container's request is one series; `max by (namespace, pod)` makes it one per
    pod."""
    return (
        "(max by (namespace, pod) "
        f"(kube_pod_container_resource_requests{matchers(resource=KSM_GPU)}) "
        "and on (namespace, pod) (kube_pod_status_unschedulable == 1))"
    )


def pending_gpu_pods() -> str:
    """How many pods asking for GPUs the scheduler could not place, cluster-wide (no series when none)."""
    return f"count{pending_gpu_pod_series()}"


def karpenter_resource_type(resource: str) -> str:
    """`resource_type` of a Kubernetes resource on Karpenter's metrics: lower-cased, `-` -> `_`
    (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/metrics/nodepool/controller.go `buildMetrics`)."""
    return resource.lower().replace("-", "_")


def _number(value: Decimal) -> str:
    """A PromQL number literal for an exact decimal (no exponent)."""
    return format(value.normalize(), "f")


def _remaining(pool: str, resource: str) -> str:
    """What is left of the pool's limit of one resource, in Karpenter's units (cores, bytes, devices)."""
    labels = {"nodepool": pool, "resource_type": karpenter_resource_type(resource)}
    return (
        f"({leader_max('karpenter_nodepools_limit', ['nodepool'], **labels)} - "
        f"{leader_max('karpenter_nodepools_usage', ['nodepool'], **labels)})"
    )


def pool_launch_blocked(pool: PoolAlerting) -> str | None:
    """A series `{nodepool}` while the pool can launch no node: for every one of its smallest candidates,
    some limit has less left than that node counts against it (Karpenter launches only a node that fits
    under what is left of every limit). None for a pool without limits."""
    if not pool.smallest_nodes:
        return None
    terms = []
    for node in pool.smallest_nodes:
        checks = []
        for resource in ("cpu", "memory"):
            if resource in pool.limits:
                checks.append(f"{_remaining(pool.name, resource)} < {_number(node.counts[resource])}")
        if "nvidia.com/gpu" in pool.limits:
            for resource, scale in pool.gpu_limit_resources:
                need = node.counts["nvidia.com/gpu"] * scale
                checks.append(f"{_remaining(pool.name, resource)} < {_number(need)}")
        terms.append("(" + " or ".join(checks) + ")")
    return " and ".join(terms)


def _tolerating(taint: Taint) -> str:
    """Pods (`namespace`, `pod`) with a toleration that tolerates `taint` (Kubernetes' matching: the key, or
    an empty key with `Exists`; `Exists`, or `Equal` (the default) with the value; the effect, or none)."""
    effect = f"~|{taint.effect}"
    selectors = [
        matchers(key="", operator="Exists", effect=effect),
        matchers(key=taint.key, operator="Exists", effect=effect),
    ]
    if taint.value is not None:
        selectors.append(matchers(key=taint.key, operator="~|Equal", value=taint.value, effect=effect))
    return "max by (namespace, pod) (" + " or ".join(f"kube_pod_tolerations{s}" for s in selectors) + ")"


NODEPOOL_SELECTOR_LABEL = "nodeselector_karpenter_sh_nodepool"
"""The `karpenter.sh/nodepool` key of a pod's `nodeSelector` on `kube_pod_nodeselectors`."""


def pool_pods(pool: PoolAlerting, pods: str) -> str:
    """The series of `pods` (one per `namespace`, `pod`) that the pool can take: those whose nodeSelector
    names it, and those naming no pool that tolerate every taint of its nodes. Node affinity is not exported
    by kube-state-metrics: a pod that picks its pool by affinity is matched by its tolerations only."""
    named = f"kube_pod_nodeselectors{matchers(**{NODEPOOL_SELECTOR_LABEL: pool.name})}"
    unnamed = f"kube_pod_nodeselectors{matchers(**{NODEPOOL_SELECTOR_LABEL: ''})}"
    for taint in pool.taints:
        unnamed = f"({unnamed} and on (namespace, pod) {_tolerating(taint)})"
    return f"({pods} and on (namespace, pod) ({named} or {unnamed}))"


def with_label(expr: str, label: str, value: str) -> str:
    """`expr` with a constant label added (`label_replace` of an always-matching empty source)."""
    return f'label_replace({expr}, "{label}", "{value}", "", "")'


def leader_max(metric: str, by: Iterable[str], **labels: str) -> str:
    """`max by (...)` of a Karpenter metric: every controller replica is a target with its own `pod` and
    `instance` labels, and around a leader change two replicas may report the same series; `max` keeps one
    per label set whichever replica reports it."""
    return f"max by ({', '.join(by)}) ({metric}{matchers(**labels)})"
