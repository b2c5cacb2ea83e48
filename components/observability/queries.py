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
"""

from collections.abc import Iterable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Targets:
    """What the alerts and dashboards select: the GPU pools, and where each scraped component runs with the
    `job` its ServiceMonitor gives its series."""

    gpu_pools: tuple[str, ...]
    mig_pools: tuple[str, ...]
    """The GPU pools that partition their GPUs with MIG (`mig` set): DCGM reports no GPU utilisation for MIG
    devices, so their dashboards read the graphics engine activity instead."""
    gpu_operator_namespace: str
    gpu_node_guard_namespace: str
    gpu_node_guard_job: str
    karpenter_namespace: str
    karpenter_job: str
    interruption_handling: bool
    """Whether Karpenter reads an interruption queue (its alerts exist only then)."""

    def __post_init__(self) -> None:
        if unknown := sorted(set(self.mig_pools) - set(self.gpu_pools)):
            raise ValueError(f"MIG pools that are no GPU pools: {unknown}")


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


def pending_gpu_pods() -> str:
    """How many pods asking for GPUs (or MIG devices) the scheduler could not place (cluster-wide: a pending
    pod belongs to no pool yet). Each container's request is one series; `max by (namespace, pod)` makes it
    one per pod."""
    return (
        "count(max by (namespace, pod) "
        f"(kube_pod_container_resource_requests{matchers(resource=KSM_GPU)}) "
        "and on (namespace, pod) (kube_pod_status_unschedulable == 1))"
    )


def leader_max(metric: str, by: Iterable[str], **labels: str) -> str:
    """`max by (...)` of a Karpenter metric: every controller replica is a target with its own `pod` and
    `instance` labels, and around a leader change two replicas may report the same series; `max` keeps one
    per label set whichever replica reports it."""
    return f"max by ({', '.join(by)}) ({metric}{matchers(**labels)})"
