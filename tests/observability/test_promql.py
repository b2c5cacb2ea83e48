"""Every PromQL expression (alerts and dashboard panels) parses with a real PromQL parser and selects only
metrics the pinned DCGM exporter, Karpenter 1.14, kube-state-metrics v2.20.0 or Prometheus itself export."""

import pytest

from components.cluster import SYSTEM_NODE_SELECTOR
from components.gpu_node_guard.guard import METRICS as GUARD_METRICS
from components.gpu_node_guard.guard import Metrics
from components.observability.chart_values import stack_values
from components.storage import DEFAULT_STORAGE_CLASS
from config.observability import ObservabilityConfig
from facts.metrics import (
    GPU_NODE_GUARD_METRICS,
    KUBE_STATE_METRICS_OPT_IN,
    dcgm_exporter_metrics,
    exporter_of,
    karpenter_metrics,
    kube_state_metrics,
)
from tests.observability.helpers import (
    all_recording_rules,
    every_expression,
    selected_metrics,
    unknown_metrics,
)

EXPRESSIONS = list(every_expression())


@pytest.mark.parametrize(
    ("where", "expr"), EXPRESSIONS, ids=[f"{w}:{i}" for i, (w, _) in enumerate(EXPRESSIONS)]
)
def test_expression_parses_and_uses_exported_metrics(where: str, expr: str) -> None:
    if where != "alert Watchdog":  # the dead man's switch: always firing, on no metric
        assert selected_metrics(expr), f"{where}: selects no metric"
    assert unknown_metrics(expr) == [], where


def test_every_exporter_is_used() -> None:
    """The dashboards and alerts draw on each source (a renamed metric would silently empty a panel)."""
    recorded = {rule["record"] for rule in all_recording_rules()}
    used = {exporter_of(n) for _, expr in EXPRESSIONS for n in selected_metrics(expr) if n not in recorded}
    assert used == {"dcgm-exporter", "karpenter", "kube-state-metrics", "gpu-node-guard", "prometheus"}


def test_the_check_catches_what_the_exporters_do_not_export() -> None:
    # Commented out in the GPU Operator's collectors file, so never exported.
    assert unknown_metrics("DCGM_FI_PROF_SM_ACTIVE > 0") == ["DCGM_FI_PROF_SM_ACTIVE"]
    # A label entry of the collectors file, not a metric.
    assert unknown_metrics("DCGM_FI_DRIVER_VERSION") == ["DCGM_FI_DRIVER_VERSION"]
    # A gauge has no histogram series; a histogram has no series of its bare name.
    assert unknown_metrics("karpenter_nodepools_usage_bucket") == ["karpenter_nodepools_usage_bucket"]
    assert unknown_metrics("karpenter_interruption_message_queue_duration_seconds") == [
        "karpenter_interruption_message_queue_duration_seconds"
    ]
    assert unknown_metrics("rate(karpenter_interruption_message_queue_duration_seconds_count[5m])") == []
    assert unknown_metrics("kube_pod_container_resource_request") == ["kube_pod_container_resource_request"]
    with pytest.raises(ValueError, match="unclosed left parenthesis"):
        selected_metrics("sum(rate(karpenter_nodes_allocatable[5m])")


def test_the_gpu_node_guard_metrics_are_what_the_guard_serves() -> None:
    """The guard ships alone in a ConfigMap (standard library only), so facts/metrics.py lists its names
    again; they must stay the names `/metrics` renders."""
    assert set(GUARD_METRICS) == GPU_NODE_GUARD_METRICS
    rendered = Metrics().render(["gpu-a"])
    served = {line.split("{")[0].split(" ")[0] for line in rendered.splitlines() if not line.startswith("#")}
    assert served == GPU_NODE_GUARD_METRICS


def test_vendored_metric_lists_hold_what_they_claim() -> None:
    """Spot checks against the upstream sources named in the data files' headers."""
    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_XID_ERRORS",
    } <= dcgm_exporter_metrics()
    assert "DCGM_FI_PROF_SM_ACTIVE" not in dcgm_exporter_metrics()  # commented out upstream
    assert len(dcgm_exporter_metrics()) == 25
    assert {
        "karpenter_nodepools_cost_total",
        "karpenter_nodes_allocatable",
        "leader_election_master_status",
    } <= (karpenter_metrics())
    assert len(karpenter_metrics()) == 120
    assert {"kube_node_labels", "kube_pod_status_unschedulable"} <= kube_state_metrics()


def test_opt_in_metrics_the_rules_use_are_turned_on() -> None:
    """kube-state-metrics exports an opt-in metric only when `--metric-opt-in-list` names it."""
    used = {name for _, expr in EXPRESSIONS for name in selected_metrics(expr)} & KUBE_STATE_METRICS_OPT_IN
    assert used == {"kube_pod_nodeselectors"}
    config = ObservabilityConfig.model_validate({"backend": "inCluster"})
    values = stack_values(
        config,
        cluster_name="c",
        region="us-west-2",
        system_node_selector=SYSTEM_NODE_SELECTOR,
        storage_class=DEFAULT_STORAGE_CLASS,
    )
    (flag,) = values["kube-state-metrics"]["extraArgs"]
    assert flag.startswith("--metric-opt-in-list=")
    assert used <= set(flag.removeprefix("--metric-opt-in-list=").split(","))
