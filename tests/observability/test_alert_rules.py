"""The alert rules pass `promtool check rules` and `promtool test rules`: synthetic series that fire each
alert and series that must not (Debian's `prometheus` package ships promtool; `scripts/setup.sh` installs it).

The unit tests compare labels only: the rules are tested without their annotations (promtool would compare
the expanded texts too), and `promtool check rules` checks the annotation templates of the full rules."""

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.observability.alerts import NODE_NOT_INITIALIZED_SECONDS
from tests.observability.helpers import POOLS, all_alert_rules, sample_alert_groups

PROMTOOL = shutil.which("promtool")
GPU = {"node": "ip-10-30-1-10", "gpu": "0", "job": "nvidia-dcgm-exporter", "namespace": "gpu-operator"}
KARPENTER = {"job": "karpenter", "namespace": "kube-system", "pod": "karpenter-7d9f-abcde"}


def _series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    rendered = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{rendered}}}", "values": values}


def _alerts(at: str, name: str, *expected: dict[str, str]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in expected]}


def _gpu(labels: dict[str, str], severity: str) -> dict[str, str]:
    return {"node": labels["node"], "gpu": labels["gpu"], "severity": severity}


def _tests() -> list[dict[str, Any]]:
    healthy_gpu = {**GPU, "node": "ip-10-30-1-11"}
    gpu_tests = {
        "interval": "1m",
        "input_series": [
            _series("DCGM_FI_DEV_XID_ERRORS", GPU, "0x5 79x30"),  # XID 79 at minute 6, then kept
            _series("DCGM_FI_DEV_XID_ERRORS", healthy_gpu, "0x35"),
            _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", GPU, "0x5 1x10"),
            _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", healthy_gpu, "0x15"),
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", GPU, "0x30 1x90"),
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", healthy_gpu, "0x120"),
        ],
        "alert_rule_test": [
            _alerts("4m", "GpuXidError"),
            _alerts("8m", "GpuXidError", _gpu(GPU, "warning")),
            _alerts("19m", "GpuXidError", _gpu(GPU, "warning")),
            # 15 minutes after the XID, the gauge still says 79 but nothing new happened.
            _alerts("30m", "GpuXidError"),
            _alerts("4m", "GpuRowRemapFailure"),
            _alerts("8m", "GpuRowRemapFailure", _gpu(GPU, "critical")),
            _alerts("20m", "GpuUncorrectableMemoryError"),
            _alerts("40m", "GpuUncorrectableMemoryError", _gpu(GPU, "warning")),
            # An hour after the remap the increase is 0 again.
            _alerts("100m", "GpuUncorrectableMemoryError"),
        ],
    }
    # Exporter restarts: a restarted container (same series) reads 0 again; a new pod's series starts at 0
    # or, with the standalone DCGM host engine, at the code it still holds. Neither is a new XID.
    old_pod = {**GPU, "pod": "nvidia-dcgm-exporter-x7k2p"}
    new_pod = {**GPU, "pod": "nvidia-dcgm-exporter-q4w8n"}
    other_gpu = {**old_pod, "gpu": "1"}
    xid_restart_tests = {
        "interval": "1m",
        "input_series": [
            _series("DCGM_FI_DEV_XID_ERRORS", old_pod, "0x2 79x10"),  # XID at minute 3; pod gone at 12
            _series("DCGM_FI_DEV_XID_ERRORS", new_pod, "_x13 79x30"),  # the new pod still reads 79
            _series("DCGM_FI_DEV_XID_ERRORS", other_gpu, "0x2 13x10 0x30"),  # container restart at 13
        ],
        "alert_rule_test": [
            _alerts("5m", "GpuXidError", _gpu(old_pod, "warning"), _gpu(other_gpu, "warning")),
            _alerts("14m", "GpuXidError", _gpu(old_pod, "warning")),
            _alerts("30m", "GpuXidError"),
        ],
    }
    exporter = {**GPU, "pod": "nvidia-dcgm-exporter-x7k2p"}
    other_namespace = {**exporter, "namespace": "monitoring", "job": "nvidia-dcgm-exporter"}
    exporter_tests = {
        "interval": "1m",
        "input_series": [
            _series("up", exporter, "1x5 0x20"),
            _series("up", other_namespace, "0x25"),  # not the GPU Operator's exporter
        ],
        "alert_rule_test": [
            _alerts("12m", "DcgmExporterDown"),  # down for 6 minutes: not yet
            _alerts("20m", "DcgmExporterDown", {**exporter, "severity": "warning"}),
        ],
    }
    stuck = {
        "type": "Initialized",
        "status": "Unknown",
        "karpenter_sh_nodepool": POOLS[0],
        "name": "gpu-inference-x1",
    }
    cpu_pool = {**stuck, "karpenter_sh_nodepool": "cpu-burst", "name": "cpu-burst-a1"}
    done = {**stuck, "status": "True", "name": "gpu-inference-x2"}
    steps = NODE_NOT_INITIALIZED_SECONDS // 60 + 10
    node_tests = {
        "interval": "1m",
        "input_series": [
            _series("operator_nodeclaim_status_condition_current_status_seconds", labels, f"0+60x{steps}")
            for labels in (stuck, cpu_pool, done)
        ],
        "alert_rule_test": [
            _alerts("14m", "GpuNodeNotInitialized"),
            _alerts(
                "17m",
                "GpuNodeNotInitialized",
                {"name": stuck["name"], "karpenter_sh_nodepool": POOLS[0], "severity": "warning"},
            ),
        ],
    }
    pending = [
        _series(
            "kube_pod_container_resource_requests",
            {
                "namespace": "ml",
                "pod": "train-0",
                "container": "main",
                "resource": "nvidia_com_gpu",
                "unit": "integer",
            },
            "1x30",
        ),
        _series("kube_pod_status_unschedulable", {"namespace": "ml", "pod": "train-0", "uid": "u1"}, "1x30"),
    ]

    def pool_at(pool: str, usage: int, limit: int, resource: str = "nvidia.com/gpu") -> list[dict[str, str]]:
        labels = {"resource_type": resource, **KARPENTER, "nodepool": pool}
        return [
            _series("karpenter_nodepools_usage", labels, f"{usage}x30"),
            _series("karpenter_nodepools_limit", labels, f"{limit}x30"),
        ]

    at_limit = {"nodepool": POOLS[0], "resource_type": "nvidia.com/gpu", "severity": "warning"}
    limit_tests = {
        "interval": "1m",
        "input_series": [*pool_at(POOLS[0], 64, 64), *pool_at(POOLS[1], 16, 64), *pending],
        "alert_rule_test": [
            _alerts("5m", "GpuPoolAtLimitWithPendingPods"),
            _alerts("12m", "GpuPoolAtLimitWithPendingPods", at_limit),
        ],
    }
    # A mixed-strategy MIG pool: its nodes advertise only nvidia.com/mig-<profile> (Karpenter's
    # `resource_type` nvidia.com/mig_1g.10gb), so its nvidia.com/gpu usage stays 0 under the same limit; the
    # pending pod asks for the MIG resource (kube-state-metrics' `nvidia_com_mig_1g_10gb`).
    mig = "nvidia.com/mig_1g.10gb"
    mig_pending = [
        _series(
            "kube_pod_container_resource_requests",
            {"namespace": "ml", "pod": "serve-0", "container": "main", "resource": "nvidia_com_mig_1g_10gb"},
            "1x30",
        ),
        _series("kube_pod_status_unschedulable", {"namespace": "ml", "pod": "serve-0", "uid": "u3"}, "1x30"),
    ]
    mig_limit_tests = {
        "interval": "1m",
        "input_series": [*pool_at(POOLS[1], 0, 28), *pool_at(POOLS[1], 28, 28, mig), *mig_pending],
        "alert_rule_test": [
            _alerts(
                "12m",
                "GpuPoolAtLimitWithPendingPods",
                {"nodepool": POOLS[1], "resource_type": mig, "severity": "warning"},
            ),
        ],
    }
    no_pending_tests = {
        "interval": "1m",
        "input_series": [
            *pool_at(POOLS[0], 64, 64),
            _series(
                "kube_pod_status_unschedulable", {"namespace": "ml", "pod": "cpu-job", "uid": "u2"}, "1x30"
            ),
        ],
        "alert_rule_test": [_alerts("20m", "GpuPoolAtLimitWithPendingPods")],
    }
    guard = {"job": "gpu-node-guard-metrics", "namespace": "gpu-node-guard", "pod": "gpu-node-guard-5c9d-x"}
    deleted = "gpu_eks_node_guard_nodeclaims_deleted_total"
    guard_deletions = {
        "interval": "1m",
        "input_series": [
            _series(deleted, {**guard, "nodepool": POOLS[0]}, "0x10 1x80"),  # one deletion at minute 11
            _series(deleted, {**guard, "nodepool": POOLS[1]}, "2x20 0x70"),  # a guard restart resets it
            _series(deleted, {**guard, "nodepool": "cpu-burst"}, "0x10 3x80"),  # no GPU pool
        ],
        "alert_rule_test": [
            _alerts("5m", "GpuNodeGuardReplacedNodeClaims"),
            _alerts("15m", "GpuNodeGuardReplacedNodeClaims", {"nodepool": POOLS[0], "severity": "warning"}),
            _alerts("80m", "GpuNodeGuardReplacedNodeClaims"),  # an hour later: nothing new
        ],
    }
    synced = "gpu_eks_node_guard_last_sync_success_timestamp_seconds"
    guard_down = {
        "interval": "1m",
        "input_series": [_series("up", guard, "1x5 0x20"), _series(synced, guard, "0+60x5")],
        "alert_rule_test": [
            _alerts("8m", "GpuNodeGuardDown"),  # unreachable for 3 minutes: not yet
            _alerts("14m", "GpuNodeGuardDown", {"severity": "warning"}),
        ],
    }
    # Reachable, but its syncs stop succeeding at minute 10 (the timestamp is the sample time until then).
    guard_stuck = {
        "interval": "1m",
        "input_series": [_series("up", guard, "1x30"), _series(synced, guard, "0+60x10 600x20")],
        "alert_rule_test": [
            _alerts("18m", "GpuNodeGuardDown"),
            _alerts("25m", "GpuNodeGuardDown", {"severity": "warning"}),
        ],
    }
    guard_healthy = {
        "interval": "1m",
        "input_series": [_series("up", guard, "1x30"), _series(synced, guard, "0+60x30")],
        "alert_rule_test": [_alerts("25m", "GpuNodeGuardDown")],
    }
    controller_down = {
        "interval": "1m",
        "input_series": [_series("up", KARPENTER, "1x5 0x15")],
        "alert_rule_test": [
            _alerts("8m", "KarpenterControllerDown"),
            _alerts("12m", "KarpenterControllerDown", {"severity": "critical"}),
        ],
    }
    controller_up = {
        "interval": "1m",
        "input_series": [
            _series("up", KARPENTER, "1x20"),
            _series("up", {**KARPENTER, "pod": "karpenter-7d9f-fghij"}, "0x20"),  # the standby may restart
        ],
        "alert_rule_test": [_alerts("15m", "KarpenterControllerDown")],
    }

    def buckets(slow: bool) -> list[dict[str, str]]:
        # One message a minute: within 10 s, or (slow) between 30 and 60 s.
        counts = {"10": "0x30" if slow else "0+1x30", "30": "0x30" if slow else "0+1x30", "60": "0+1x30"}
        counts["+Inf"] = "0+1x30"
        return [
            _series(
                "karpenter_interruption_message_queue_duration_seconds_bucket", {**KARPENTER, "le": le}, v
            )
            for le, v in counts.items()
        ]

    interruption_slow = {
        "interval": "1m",
        "input_series": buckets(slow=True),
        "alert_rule_test": [
            _alerts("3m", "KarpenterInterruptionMessagesDelayed"),
            _alerts("15m", "KarpenterInterruptionMessagesDelayed", {"severity": "warning"}),
        ],
    }
    interruption_fast = {
        "interval": "1m",
        "input_series": buckets(slow=False),
        "alert_rule_test": [_alerts("15m", "KarpenterInterruptionMessagesDelayed")],
    }
    errors = {**KARPENTER, "controller": "interruption"}
    queue_errors = {
        "interval": "1m",
        "input_series": [
            _series("controller_runtime_reconcile_errors_total", errors, "0+1x30"),
            _series(
                "controller_runtime_reconcile_errors_total",
                {**errors, "controller": "nodeclaim.lifecycle"},
                "0+1x30",
            ),
        ],
        "alert_rule_test": [
            _alerts("10m", "KarpenterInterruptionQueueErrors"),
            _alerts("20m", "KarpenterInterruptionQueueErrors", {"severity": "warning"}),
        ],
    }
    other_errors = {
        "interval": "1m",
        "input_series": [
            _series(
                "controller_runtime_reconcile_errors_total",
                {**errors, "controller": "nodeclaim.lifecycle"},
                "0+1x30",
            )
        ],
        "alert_rule_test": [_alerts("20m", "KarpenterInterruptionQueueErrors")],
    }
    return [
        gpu_tests,
        xid_restart_tests,
        exporter_tests,
        node_tests,
        limit_tests,
        mig_limit_tests,
        no_pending_tests,
        guard_deletions,
        guard_down,
        guard_stuck,
        guard_healthy,
        controller_down,
        controller_up,
        interruption_slow,
        interruption_fast,
        queue_errors,
        other_errors,
    ]


def _groups(annotations: bool) -> list[dict[str, Any]]:
    groups = sample_alert_groups()
    if not annotations:
        for group in groups:
            for rule in group["rules"]:
                rule.pop("annotations")
    return groups


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL, "promtool is missing: run `bash scripts/setup.sh` (installs Debian's prometheus package)"
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def test_rules_are_valid_with_their_annotation_templates(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _groups(annotations=True)}))
    result = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(all_alert_rules())} rules found" in result.stdout


def test_every_alert_fires_and_stays_quiet_as_it_should(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _groups(annotations=False)}))
    tests = _tests()
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    result = _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    fired = {a["alertname"] for t in tests for a in t["alert_rule_test"] if a["exp_alerts"]}
    quiet = {a["alertname"] for t in tests for a in t["alert_rule_test"] if not a["exp_alerts"]}
    every = {rule["alert"] for rule in all_alert_rules()}
    assert fired == every, "an alert without a test that makes it fire"
    assert quiet == every, "an alert without a test that keeps it quiet"


@pytest.mark.parametrize("interruption_handling", [True, False])
def test_interruption_alerts_exist_only_with_interruption_handling(interruption_handling: bool) -> None:
    names = {rule["alert"] for rule in all_alert_rules(interruption_handling)}
    assert ("KarpenterInterruptionMessagesDelayed" in names) is interruption_handling
    assert ("KarpenterInterruptionQueueErrors" in names) is interruption_handling
    assert {
        "GpuXidError",
        "GpuPoolAtLimitWithPendingPods",
        "GpuNodeNotInitialized",
        "GpuNodeGuardReplacedNodeClaims",
        "GpuNodeGuardDown",
        "KarpenterControllerDown",
    } <= names


def test_no_gpu_pools_no_gpu_alerts() -> None:
    groups = sample_alert_groups(gpu_pools=())
    assert [g["name"] for g in groups] == ["gpu-eks.karpenter"]
