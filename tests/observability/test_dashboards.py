"""The dashboards: one per GPU pool and an overview, every panel saying what it answers."""

import json
from dataclasses import replace
from typing import Any

import promql_parser

from components.observability.dashboards import (
    INTERRUPTION_REASONS,
    dashboard_json,
    dashboards,
    pool_panels,
    queries,
    uid,
)
from components.observability.queries import pending_gpu_pod_series, pending_gpu_pods
from facts.metrics import dcgm_exporter_metrics
from tests.observability.helpers import (
    MIG_POOLS,
    POOLS,
    all_alert_rules,
    all_dashboards,
    label_matchers,
    sample_pools,
    selected_metrics,
    targets,
)


def test_one_dashboard_per_pool_and_an_overview() -> None:
    boards = all_dashboards()
    assert set(boards) == {"gpu-eks-overview", *(f"gpu-eks-pool-{p}" for p in (*POOLS, "gpu-br"))}
    for name, board in boards.items():
        assert board["uid"] == name
        ids = [panel["id"] for panel in board["panels"]]
        assert len(ids) == len(set(ids)), name
        for panel in board["panels"]:
            assert panel["description"].endswith((".", ")")), panel["title"]
            assert panel["targets"] or panel["type"] == "text", panel["title"]
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24


def test_pool_dashboard_answers_the_questions_of_the_issue() -> None:
    titles = [panel.title for panel in pool_panels("gpu-inference", mig=False)]
    assert titles == [
        "GPUs allocatable vs requested",
        "GPU utilisation",
        "GPU memory used",
        "Pods waiting for a GPU",
        "NodeClaims launched and terminated (per hour)",
        "Launch to ready",
        "Interruptions (per hour)",
        "Stuck GPU nodes (GPU node guard)",
        "Usage against the pool's limits",
        "Estimated hourly cost",
        "Nodes by instance type",
    ]
    # Every pool-scoped query selects the pool (the cluster-wide pending-pods panel is the exception).
    for panel in [*pool_panels("gpu-inference", mig=False), *pool_panels("gpu-inference", mig=True)]:
        if panel.title != "Pods waiting for a GPU":
            assert all("gpu-inference" in t.expr for t in panel.targets), panel.title


def test_interruptions_count_every_reason_karpenter_deletes_nodeclaims_for() -> None:
    # aws/karpenter-provider-aws v1.14.1 pkg/controllers/interruption/utils.go: `actionForMessage` drains
    # or terminates on these message kinds (messages/types.go), and `deleteNodeClaim` counts each as `reason`;
    # instance_status, system_status and event_status come from instancestatus_controller.go, which
    # pkg/controllers/controllers.go registers with or without an interruption queue.
    assert sorted(INTERRUPTION_REASONS) == [
        "capacity_reservation_interrupted",
        "event_status",
        "instance_status",
        "instance_stopped",
        "instance_terminated",
        "scheduled_change",
        "spot_interrupted",
        "system_status",
    ]
    (panel,) = [p for p in pool_panels("gpu-inference", mig=False) if p.title == "Interruptions (per hour)"]
    (target,) = panel.targets
    (selector,) = label_matchers(target.expr, "karpenter_nodeclaims_disrupted_total")
    assert selector["nodepool"] == ("=", "gpu-inference")
    operator, reasons = selector["reason"]
    assert operator == "=~"
    assert sorted(reasons.split("|")) == sorted(INTERRUPTION_REASONS)


def _panel(board: dict[str, Any], title: str) -> dict[str, Any]:
    (panel,) = [p for p in board["panels"] if p["title"] == title]
    return panel


def test_mig_pools_show_graphics_engine_activity_instead_of_gpu_utilisation() -> None:
    """DCGM reports no GPU utilisation for MIG devices (NVIDIA/dcgm-exporter#216, #430)."""
    boards = all_dashboards()
    for pool in POOLS:
        panel = _panel(boards[f"gpu-eks-pool-{pool}"], "GPU utilisation")
        (target,) = panel["targets"]
        metrics = selected_metrics(target["expr"]) - {"kube_node_labels"}
        if pool in MIG_POOLS:
            assert metrics == {"DCGM_FI_PROF_GR_ENGINE_ACTIVE"}, pool
            assert panel["fieldConfig"]["defaults"]["unit"] == "percentunit"  # a 0-1 ratio
            assert "{{GPU_I_PROFILE}}" in target["legendFormat"]  # one series per MIG device
        else:
            assert metrics == {"DCGM_FI_DEV_GPU_UTIL"}, pool
            assert panel["fieldConfig"]["defaults"]["unit"] == "percent"
        assert label_matchers(target["expr"], "kube_node_labels") == [
            {"label_karpenter_sh_nodepool": ("=", pool)}
        ]
    # The GPU Operator's collectors file exports it (it would fail the PromQL checks otherwise).
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in dcgm_exporter_metrics()


def test_pods_waiting_for_a_gpu_shows_0_when_nothing_waits_but_the_alert_does_not() -> None:
    pending = promql_parser.parse(pending_gpu_pods()).prettify()
    boards = all_dashboards()
    for name, board in boards.items():
        (target,) = _panel(board, "Pods waiting for a GPU")["targets"]
        expr = promql_parser.parse(target["expr"])
        assert str(expr.op) == "or", name
        assert expr.lhs.prettify() == pending, name
        assert expr.rhs.func.name == "vector", name
        assert [arg.val for arg in expr.rhs.args] == [0.0], name
    # The alerts count the waiting pods themselves (a pool at its limits fires only while its pods wait).
    for rule in all_alert_rules():
        if rule["alert"] in ("GpuPoolAtLimitWithPendingPods", "GpuPodsUnschedulable", "GpuPodsMatchNoPool"):
            assert pending_gpu_pod_series() in rule["expr"]
            assert "vector(" not in rule["expr"]


def test_uids_fit_grafana_and_stay_stable() -> None:
    long_pool = "p" * 63
    name = f"gpu-eks-pool-{long_pool}"
    assert len(uid(name)) <= 40
    assert uid(name) == uid(name)
    assert uid(name) != uid(f"gpu-eks-pool-{'q' * 63}")
    pool = replace(sample_pools()["gpu-inference"], name=long_pool)
    board = dashboards(replace(targets(), pools=(pool,)), datasource_type="prometheus")[name]
    assert board["uid"] == uid(name)


def test_json_is_stable_and_round_trips() -> None:
    board = all_dashboards()["gpu-eks-overview"]
    text = dashboard_json(board)
    assert json.loads(text) == board
    assert text == dashboard_json(json.loads(text))
    assert queries(board)


def test_bottlerocket_pools_get_a_note_instead_of_gpu_metrics() -> None:
    """Bottlerocket nodes run no DCGM exporter: its panels would stay empty forever."""
    board = all_dashboards()["gpu-eks-pool-gpu-br"]
    titles = [panel["title"] for panel in board["panels"]]
    assert "GPU utilisation" not in titles
    assert "GPU memory used" not in titles
    note = _panel(board, "GPU metrics")
    assert note["type"] == "text"
    assert "Bottlerocket" in note["options"]["content"]
    assert not any(name.startswith("DCGM_") for expr in queries(board) for name in selected_metrics(expr))
    assert "GPU memory used" in [p["title"] for p in all_dashboards()["gpu-eks-pool-gpu-inference"]["panels"]]


def test_mig_memory_legends_tell_the_devices_of_a_gpu_apart() -> None:
    boards = all_dashboards()
    (mig,) = _panel(boards["gpu-eks-pool-gpu-mig"], "GPU memory used")["targets"]
    assert mig["legendFormat"] == "{{node}} GPU {{gpu}} {{GPU_I_PROFILE}} {{GPU_I_ID}}"
    (whole,) = _panel(boards["gpu-eks-pool-gpu-inference"], "GPU memory used")["targets"]
    assert whole["legendFormat"] == "{{node}} GPU {{gpu}}"
