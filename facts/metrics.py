"""Metric names that the exporters this stack runs really export (pure; no Pulumi).

Every PromQL expression the program writes (alert rules, dashboard panels) may only select these names; the
tests parse each expression with a real PromQL parser and check its selectors against them. The lists are
data files under `facts/data/`, each with a header naming its upstream repository, path and commit:

- DCGM exporter: `dcgm-exporter-dcp-metrics-included.csv`, the collectors file the GPU Operator v26.7.0
  configures (`DCGM_EXPORTER_COLLECTORS=/etc/dcgm-exporter/dcp-metrics-included.csv`). Only uncommented
  entries are exported, and `label` entries are labels on the other metrics, not metrics.
- Karpenter 1.14: `karpenter-1.14-metrics.txt`, the names of the published metrics reference.
- kube-state-metrics v2.20.0: `kube-state-metrics-v2.20.0-metrics.txt`, the names of its metrics docs.
- The GPU node guard (this project's own controller): `GPU_NODE_GUARD_METRICS`, the names its `/metrics`
  serves (`METRICS` of `components/gpu_node_guard/guard.py`, which ships without this package; a test keeps
  the two lists equal).
- Prometheus itself: the series it adds to every scrape target (`PROMETHEUS_TARGET_METRICS`).
"""

import csv
import functools
from pathlib import Path

DATA = Path(__file__).parent / "data"
DCGM_COLLECTORS_CSV = DATA / "dcgm-exporter-dcp-metrics-included.csv"
KARPENTER_METRICS_TXT = DATA / "karpenter-1.14-metrics.txt"
KUBE_STATE_METRICS_TXT = DATA / "kube-state-metrics-v2.20.0-metrics.txt"

PROMETHEUS_TARGET_METRICS = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
    }
)
"""Series Prometheus records for every target it scrapes (github.com/prometheus/prometheus
`docs/concepts/jobs_instances.md`, "Automatically generated labels and time series")."""

GPU_NODE_GUARD_METRICS = frozenset(
    {
        "gpu_eks_node_guard_nodeclaims_deleted_total",
        "gpu_eks_node_guard_startup_taints_removed_total",
        "gpu_eks_node_guard_device_plugin_paused_total",
        "gpu_eks_node_guard_uninitialized_nodeclaims",
        "gpu_eks_node_guard_mig_failed_nodes",
        "gpu_eks_node_guard_breaker_open",
        "gpu_eks_node_guard_nodeclaims_held",
        "gpu_eks_node_guard_karpenter_unavailable",
        "gpu_eks_node_guard_leader",
        "gpu_eks_node_guard_sync_errors_total",
        "gpu_eks_node_guard_last_sync_success_timestamp_seconds",
    }
)
"""What the GPU node guard exports (components/gpu_node_guard/guard.py `METRICS`); the per-pool ones carry a
`nodepool` label."""

KUBE_STATE_METRICS_OPT_IN = frozenset({"kube_pod_nodeselectors"})
"""kube-state-metrics v2.20.0 metrics that are off unless named in `--metric-opt-in-list` (the "Opt-in" column
of docs/metrics/**/*-metrics.md at that tag: only this one)."""

HISTOGRAMS = frozenset(
    {
        # aws/karpenter-provider-aws v1.14.1 pkg/controllers/interruption/metrics.go (NewPrometheusHistogram).
        "karpenter_interruption_message_queue_duration_seconds",
        # status/metrics.go of awslabs/operatorpkg (conditionDurationMetric), registered per kind by
        # sigs.k8s.io/karpenter pkg/controllers/controllers.go (status.NewController[*v1.NodeClaim]).
        "operator_nodeclaim_status_condition_transition_seconds",
    }
)
"""Histograms among the names above that the program queries: only these may be selected with the
`_bucket`, `_sum` and `_count` series a histogram exposes."""

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def _names(path: Path) -> frozenset[str]:
    return frozenset(
        line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")
    )


@functools.cache
def dcgm_exporter_metrics() -> frozenset[str]:
    """Metrics the DCGM exporter exports with the GPU Operator's collectors file (uncommented, non-label)."""
    rows = [
        row
        for row in csv.reader(DCGM_COLLECTORS_CSV.read_text().splitlines(), skipinitialspace=True)
        if row and not row[0].lstrip().startswith("#")
    ]
    return frozenset(row[0].strip() for row in rows if row[1].strip() != "label")


@functools.cache
def karpenter_metrics() -> frozenset[str]:
    """Metrics Karpenter 1.14 documents."""
    return _names(KARPENTER_METRICS_TXT)


@functools.cache
def kube_state_metrics() -> frozenset[str]:
    """Metrics kube-state-metrics v2.20.0 documents."""
    return _names(KUBE_STATE_METRICS_TXT)


def exporter_of(metric: str) -> str | None:
    """Which exporter exports `metric` (`dcgm-exporter`, `karpenter`, `kube-state-metrics`,
    `gpu-node-guard`, `prometheus`), or None when none does. Histogram series (`<name>_bucket`, ...) count
    for the histograms in `HISTOGRAMS`."""
    for suffix in HISTOGRAM_SUFFIXES:
        if metric.endswith(suffix) and metric.removesuffix(suffix) in HISTOGRAMS:
            metric = metric.removesuffix(suffix)
            break
    else:
        if metric in HISTOGRAMS:
            return None  # a histogram has no series of its bare name
    sources = {
        "dcgm-exporter": dcgm_exporter_metrics(),
        "karpenter": karpenter_metrics(),
        "kube-state-metrics": kube_state_metrics(),
        "gpu-node-guard": GPU_NODE_GUARD_METRICS,
        "prometheus": PROMETHEUS_TARGET_METRICS,
    }
    return next((source for source, names in sources.items() if metric in names), None)
