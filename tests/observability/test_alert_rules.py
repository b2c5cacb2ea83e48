"""The alert rules pass `promtool check rules` and `promtool test rules`: series labelled as the exporters and
the ServiceMonitors this stack configures label them (after relabelling, with the `cluster` label the agent's
remote write adds), that fire each alert and series that must not, across pools (Debian's `prometheus`
package ships promtool; `scripts/setup.sh` installs it).

The thresholds are those of the committed prod pools and a MIG pool (`tests/observability/helpers.py`):
gpu-inference (g5/g6 up to 4 GPUs, limits cpu 1024, memory 4Ti, 64 GPUs; smallest node g5.xlarge),
gpu-training (p4d/p5 8-GPU, EFA, tainted for training; smallest node p4d.24xlarge), gpu-mig (p4d, MIG
all-1g.5gb, 56 devices). The unit tests compare labels only: the rules are tested without their annotations,
and `promtool check rules` checks the annotation templates of the full rules."""

import itertools
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.observability.alerts import RETRY_ERRORS_FOR_SECONDS, RETRY_WINDOW_SECONDS, WATCHDOG
from facts.controller_runtime import RETRY_BASE_SECONDS, RETRY_CAP_SECONDS
from facts.prometheus_stack import SCRAPE_INTERVAL_SECONDS
from facts.xid import APPLICATION_XIDS, FATAL_XIDS
from tests.observability.helpers import (
    CLUSTER,
    all_alert_rules,
    all_recording_rules,
    sample_alert_groups,
    sample_pools,
)

PROMTOOL = shutil.which("promtool")
INFERENCE, TRAINING, MIG = "gpu-inference", "gpu-training", "gpu-mig"
REMOTE = {"cluster": CLUSTER}
"""The agent's external label, on every series the workspace stores."""
NODE = "ip-10-30-1-10.us-west-2.compute.internal"
NODE_B = "ip-10-30-2-11.us-west-2.compute.internal"
DCGM_TARGET = {
    **REMOTE,
    "job": "nvidia-dcgm-exporter",
    "namespace": "gpu-operator",
    "service": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
    "container": "nvidia-dcgm-exporter",
    "pod": "nvidia-dcgm-exporter-x7k2p",
    "instance": "10.30.1.10:9400",
    "node": NODE,
}
"""The DCGM exporter's target labels: the operator's ServiceMonitor (`jobLabel: app`, honorLabels false) and
the `node` relabeling this stack adds."""
GPU = {
    **DCGM_TARGET,
    "gpu": "0",
    "UUID": "GPU-5f0b8a1e-2c3d-4e5f-8a9b-0c1d2e3f4a5b",
    "pci_bus_id": "00000000:00:1E.0",
    "device": "nvidia0",
    "modelName": "NVIDIA A10G",
    "Hostname": "nvidia-dcgm-exporter-x7k2p",
    "DCGM_FI_DRIVER_VERSION": "580.95.05",
}
"""One GPU's series from the DCGM exporter (its own labels)."""
HELD = {"exported_namespace": "ml", "exported_pod": "serve-0", "exported_container": "server"}
"""Pod mapping of a GPU in use: the exporter's `namespace`/`pod`/`container` renamed (honorLabels false)."""
KSM = {**REMOTE, "job": "kube-state-metrics", "instance": "10.30.0.5:8080", "endpoint": "http"}
KSM_NODE = {**KSM, "namespace": "monitoring", "pod": "kube-prometheus-stack-kube-state-metrics-6d8f9-abcde"}
"""kube-state-metrics' node series (honorLabels true: the target's namespace and pod stay where the series has
none)."""
KARPENTER = {
    **REMOTE,
    "job": "karpenter",
    "namespace": "kube-system",
    "pod": "karpenter-7d9f-abcde",
    "instance": "10.30.0.20:8080",
    "endpoint": "http-metrics",
    "service": "karpenter",
}
GUARD = {
    **REMOTE,
    "job": "gpu-node-guard-metrics",
    "namespace": "gpu-node-guard",
    "pod": "gpu-node-guard-5c9d-x",
}
AGENT = {
    **REMOTE,
    "job": "kube-prometheus-stack-prometheus",
    "namespace": "monitoring",
    "pod": "prometheus-kube-prometheus-stack-prometheus-0",
    "service": "kube-prometheus-stack-prometheus",
    "endpoint": "http-web",
}


def _series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    rendered = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{rendered}}}", "values": values}


def _alerts(at: str, name: str, *expected: dict[str, str]) -> dict[str, Any]:
    return {
        "eval_time": at,
        "alertname": name,
        "exp_alerts": [{"exp_labels": {**labels, "cluster": CLUSTER}} for labels in expected],
    }


def _gpu(labels: dict[str, str], severity: str) -> dict[str, str]:
    return {"node": labels["node"], "gpu": labels["gpu"], "severity": severity}


def _node(
    node: str, pool: str, steps: int, *, gpus: int = 1, resource: str = "nvidia_com_gpu"
) -> list[dict[str, str]]:
    """kube-state-metrics' series of an initialized GPU node of `pool`."""
    return [
        _series("kube_node_info", {**KSM_NODE, "node": node}, f"1x{steps}"),
        _series(
            "kube_node_labels",
            {
                **KSM_NODE,
                "node": node,
                "label_karpenter_sh_nodepool": pool,
                "label_karpenter_sh_capacity_type": "on-demand",
                "label_node_kubernetes_io_instance_type": "g5.xlarge",
            },
            f"1x{steps}",
        ),
        _series(
            "kube_node_status_allocatable",
            {**KSM_NODE, "node": node, "resource": resource, "unit": "integer"},
            f"{gpus}x{steps}",
        ),
    ]


def _pod(
    name: str,
    steps: int,
    *,
    pool: str | None = None,
    tolerations: tuple[dict[str, str], ...] = ({"key": "nvidia.com/gpu", "operator": "Exists"},),
    gpus: int = 1,
    resource: str = "nvidia_com_gpu",
    namespace: str = "ml",
) -> list[dict[str, str]]:
    """kube-state-metrics' series of an unschedulable pod asking for GPUs, with its nodeSelector and
    tolerations (an unset operator or effect is "")."""
    pod = {**KSM, "namespace": namespace, "pod": name, "uid": f"uid-{name}"}
    selector = {"nodeselector_karpenter_sh_nodepool": pool} if pool else {}
    series = [
        _series(
            "kube_pod_container_resource_requests",
            {**pod, "container": "main", "resource": resource, "unit": "integer", "node": ""},
            f"{gpus}x{steps}",
        ),
        _series("kube_pod_status_unschedulable", pod, f"1x{steps}"),
        _series("kube_pod_nodeselectors", {**pod, **selector}, f"1x{steps}"),
    ]
    for toleration in tolerations:
        labels = {
            "key": "",
            "operator": "",
            "value": "",
            "effect": "",
            "toleration_seconds": "",
            **toleration,
        }
        series.append(_series("kube_pod_tolerations", {**pod, **labels}, f"1x{steps}"))
    return series


TOLERATES_TRAINING = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "gpu-eks.io/workload", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
)


def _pool_usage(pool: str, steps: int, **usage: tuple[Decimal | int, Decimal | int]) -> list[dict[str, str]]:
    """Karpenter's `karpenter_nodepools_usage` and `_limit` per resource (`nvidia_com_gpu` stands for
    `nvidia.com/gpu`): resource -> (usage, limit), in Karpenter's units (cores, bytes, devices)."""
    series = []
    for key, (used, limit) in usage.items():
        resource = key.replace("nvidia_com_", "nvidia.com/")
        labels = {**KARPENTER, "nodepool": pool, "resource_type": resource}
        series += [
            _series("karpenter_nodepools_usage", labels, f"{used}x{steps}"),
            _series("karpenter_nodepools_limit", labels, f"{limit}x{steps}"),
        ]
    return series


TI = 2**40


def _gpu_tests() -> list[dict[str, Any]]:
    healthy_gpu = {**GPU, "node": NODE_B, "instance": "10.30.2.11:9400", "pod": "nvidia-dcgm-exporter-q4w8n"}
    other_gpu = {**GPU, "gpu": "1", "UUID": "GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae", "device": "nvidia1"}
    fatal = {
        "interval": "1m",
        "input_series": [
            # XID 79 at minute 6, then the cleanup XID 45 of the processes that died (the gauge keeps the
            # last).
            _series("DCGM_FI_DEV_XID_ERRORS", GPU, "0x5 79x2 45x62 _x30"),
            _series("DCGM_FI_DEV_XID_ERRORS", other_gpu, "0x5 13x64 _x30"),  # an application XID only
            _series("DCGM_FI_DEV_XID_ERRORS", healthy_gpu, "0x100"),
            # The node is replaced at minute 70: its series end.
            _series("kube_node_info", {**KSM_NODE, "node": NODE}, "1x70"),
            _series("kube_node_info", {**KSM_NODE, "node": NODE_B}, "1x100"),
        ],
        "alert_rule_test": [
            _alerts("4m", "GpuFatalXidError"),
            _alerts("7m", "GpuFatalXidError", _gpu(GPU, "critical")),
            # The gauge now says 45; the fatal code is remembered while the node exists.
            _alerts("40m", "GpuFatalXidError", _gpu(GPU, "critical")),
            _alerts("69m", "GpuFatalXidError", _gpu(GPU, "critical")),
            _alerts("80m", "GpuFatalXidError"),
            # The application XIDs warn and clear; XID 45 right after the fatal 79 is held back by the
            # inhibition of the routing (tests/observability/test_alerting.py), not by the rule.
            _alerts("10m", "GpuXidError", _gpu(other_gpu, "warning"), _gpu(GPU, "warning")),
            _alerts("30m", "GpuXidError"),
        ],
    }
    # A fatal XID alone does not also raise the application alert.
    fatal_only = {
        "interval": "1m",
        "input_series": [
            _series("DCGM_FI_DEV_XID_ERRORS", GPU, "0x5 48x30"),
            _series("kube_node_info", {**KSM_NODE, "node": NODE}, "1x35"),
        ],
        "alert_rule_test": [
            _alerts("10m", "GpuXidError"),
            _alerts("10m", "GpuFatalXidError", _gpu(GPU, "critical")),
        ],
    }
    memory = {
        "interval": "1m",
        "input_series": [
            _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", GPU, "0x5 1x10"),
            _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", healthy_gpu, "0x15"),
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", GPU, "0x30 1x90"),
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", healthy_gpu, "0x120"),
        ],
        "alert_rule_test": [
            _alerts("4m", "GpuRowRemapFailure"),
            _alerts("8m", "GpuRowRemapFailure", _gpu(GPU, "critical")),
            _alerts("20m", "GpuUncorrectableMemoryError"),
            _alerts("40m", "GpuUncorrectableMemoryError", _gpu(GPU, "warning")),
            _alerts("100m", "GpuUncorrectableMemoryError"),  # an hour after the remap
        ],
    }
    # Exporter restarts: a restarted container (same series) reads 0 again; a new pod's series starts at 0
    # or, with the standalone DCGM host engine, at the code it still holds. Neither is a new XID.
    old_pod = {**GPU, "pod": "nvidia-dcgm-exporter-x7k2p"}
    new_pod = {**GPU, "pod": "nvidia-dcgm-exporter-q4w8n"}
    restarted = {**old_pod, "gpu": "1"}
    xid_restart = {
        "interval": "1m",
        "input_series": [
            _series("DCGM_FI_DEV_XID_ERRORS", old_pod, "0x2 13x10"),  # XID at minute 3; pod gone at 12
            _series("DCGM_FI_DEV_XID_ERRORS", new_pod, "_x13 13x30"),  # the new pod still reads 13
            _series("DCGM_FI_DEV_XID_ERRORS", restarted, "0x2 31x10 0x30"),  # container restart at 13
        ],
        "alert_rule_test": [
            _alerts("5m", "GpuXidError", _gpu(old_pod, "warning"), _gpu(restarted, "warning")),
            _alerts("14m", "GpuXidError", _gpu(old_pod, "warning")),
            _alerts("30m", "GpuXidError"),
        ],
    }
    # The node is replaced by one that gets the same private IP, so the same name: the new instance's GPU
    # does not inherit the old one's fatal XID. (Two Nodes of one name never coexist: the old series end
    # with a stale marker, as Prometheus writes one when a scrape no longer has them.)
    old_instance = {**KSM_NODE, "node": NODE, "provider_id": "aws:///us-west-2a/i-0a1b2c3d4e5f60718"}
    new_instance = {**KSM_NODE, "node": NODE, "provider_id": "aws:///us-west-2a/i-0f9e8d7c6b5a49382"}
    new_gpu = {**GPU, "UUID": "GPU-9c8b7a6f-5e4d-4c3b-8a29-1f0e9d8c7b6a", "pod": "nvidia-dcgm-exporter-z9y8x"}
    name_reused = {
        "interval": "1m",
        "input_series": [
            _series("DCGM_FI_DEV_XID_ERRORS", GPU, "0x4 79x15 stale"),  # fatal at minute 5; gone at 20
            _series("kube_node_info", old_instance, "1x20 stale"),
            _series("kube_node_info", new_instance, "_x22 1x40"),
            _series("DCGM_FI_DEV_XID_ERRORS", new_gpu, "_x24 13x40"),  # a code its DCGM reports at start
            # Rows the old GPU had remapped, and rows the new one arrives with: neither is a new remap.
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", GPU, "5x19 stale"),
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", new_gpu, "_x24 2x40"),
        ],
        "alert_rule_test": [
            _alerts("10m", "GpuFatalXidError", _gpu(GPU, "critical")),
            _alerts("40m", "GpuFatalXidError"),
            _alerts("30m", "GpuXidError"),
            _alerts("30m", "GpuUncorrectableMemoryError"),
        ],
    }
    # A job killed by the fault releases its GPU before the exporter's next collection: the code and the
    # count show on the GPU's series without the pod (a new series), not on the one the job held.
    held = {**GPU, **HELD}
    released = {
        "interval": "1m",
        "input_series": [
            _series("DCGM_FI_DEV_XID_ERRORS", held, "0x5"),
            _series("DCGM_FI_DEV_XID_ERRORS", GPU, "_x6 13x40"),
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", held, "0x5"),
            _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", GPU, "_x6 1x80"),
        ],
        "alert_rule_test": [
            _alerts("5m", "GpuXidError"),
            _alerts("8m", "GpuXidError", _gpu(GPU, "warning")),
            _alerts("25m", "GpuXidError"),  # 15 minutes after the change
            _alerts("8m", "GpuUncorrectableMemoryError", _gpu(GPU, "warning")),
            _alerts("70m", "GpuUncorrectableMemoryError"),  # an hour after the remap
        ],
    }
    exporter = {
        "interval": "1m",
        "input_series": [
            _series("up", DCGM_TARGET, "1x5 0x20"),
            _series(
                "up", {**DCGM_TARGET, "namespace": "monitoring", "node": NODE_B}, "0x25"
            ),  # not the operator's
        ],
        "alert_rule_test": [
            _alerts("12m", "DcgmExporterDown"),  # down for 6 minutes: not yet
            _alerts("20m", "DcgmExporterDown", {**DCGM_TARGET, "severity": "warning"}),
        ],
    }
    bottlerocket_node = "ip-10-30-3-12.us-west-2.compute.internal"
    booting = "ip-10-30-4-13.us-west-2.compute.internal"
    missing_exporter = {
        "interval": "1m",
        "input_series": [
            *_node(NODE, INFERENCE, 40),  # no exporter target at all
            *_node(NODE_B, INFERENCE, 40),
            _series("up", {**DCGM_TARGET, "node": NODE_B}, "1x40"),  # its exporter runs
            *_node(bottlerocket_node, "gpu-br", 40),  # Bottlerocket: no exporter, by design
            *_node(booting, TRAINING, 40, gpus=0),  # not initialized yet: no GPU allocatable
        ],
        "alert_rule_test": [
            _alerts("10m", "GpuNodeWithoutDcgmExporter"),
            _alerts(
                "20m",
                "GpuNodeWithoutDcgmExporter",
                {"node": NODE, "nodepool": INFERENCE, "severity": "warning"},
            ),
        ],
    }
    engine = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    busy = {**GPU, "gpu": "1", "node": NODE, **HELD, "exported_pod": "train-0"}
    mig_device = {
        **GPU,
        "node": NODE_B,
        "modelName": "NVIDIA A100-SXM4-40GB",
        "GPU_I_PROFILE": "1g.5gb",
        "GPU_I_ID": "7",
        "exported_namespace": "ml",
        "exported_pod": "notebook-1",
        "exported_container": "jupyter",
    }
    young = {**GPU, "gpu": "2", **HELD, "exported_pod": "serve-1"}
    idle_gpus = {
        "interval": "1m",
        "input_series": [
            *_node(NODE, INFERENCE, 150),
            *_node(NODE_B, MIG, 150, gpus=56, resource="nvidia_com_gpu"),
            _series(engine, {**GPU, **HELD}, "0.01x150"),  # held, 1% busy
            _series(engine, busy, "0.6x150"),  # held and busy
            _series(engine, {**GPU, "gpu": "3"}, "0x150"),  # idle but held by nobody
            _series(engine, mig_device, "0.6x30 0.02x120"),  # a MIG device that went idle at minute 31
            _series(engine, young, "_x60 0x90"),  # a pod that got its GPU at minute 61
        ],
        "alert_rule_test": [
            _alerts("50m", "GpuAllocatedButIdle"),
            _alerts(
                "65m",
                "GpuAllocatedButIdle",
                {"node": NODE, "gpu": "0", "nodepool": INFERENCE, **_held(HELD), "severity": "warning"},
            ),
            _alerts(
                "110m",
                "GpuAllocatedButIdle",
                {"node": NODE, "gpu": "0", "nodepool": INFERENCE, **_held(HELD), "severity": "warning"},
                {
                    "node": NODE_B,
                    "gpu": "0",
                    "GPU_I_ID": "7",
                    "nodepool": MIG,
                    **_held(mig_device),
                    "severity": "warning",
                },
            ),
        ],
    }
    return [
        fatal,
        fatal_only,
        name_reused,
        memory,
        xid_restart,
        released,
        exporter,
        missing_exporter,
        idle_gpus,
    ]


def _held(labels: dict[str, str]) -> dict[str, str]:
    return {key: labels[key] for key in ("exported_namespace", "exported_pod")}


def _nodeclaim(pool: str, name: str, status: str) -> dict[str, str]:
    return {**KARPENTER, "type": "Initialized", "status": status, "karpenter_sh_nodepool": pool, "name": name}


def _pool_tests() -> list[dict[str, Any]]:
    pools = sample_pools()
    inference_s = pools[INFERENCE].not_initialized_seconds // 60  # 25 (25m30s)
    training_s = pools[TRAINING].not_initialized_seconds // 60  # 35 (35m30s)
    metric = "operator_nodeclaim_status_condition_current_status_seconds"
    steps = training_s + 10
    not_initialized = {
        "interval": "1m",
        "input_series": [
            _series(metric, _nodeclaim(INFERENCE, "gpu-inference-x1", "Unknown"), f"0+60x{steps}"),
            _series(metric, _nodeclaim(TRAINING, "gpu-training-y1", "Unknown"), f"0+60x{steps}"),
            _series(metric, _nodeclaim(INFERENCE, "gpu-inference-x2", "True"), f"0+60x{steps}"),
            _series(metric, _nodeclaim("cpu-burst", "cpu-burst-a1", "Unknown"), f"0+60x{steps}"),
        ],
        "alert_rule_test": [
            # 20 minutes is the guard's timeout for the inference pool: the guard acts first.
            _alerts(f"{inference_s - 5}m", "GpuNodeNotInitialized"),
            # Past the inference pool's threshold, within the training pool's (30m timeout, EFA nodes).
            _alerts(
                f"{inference_s + 2}m",
                "GpuNodeNotInitialized",
                {"name": "gpu-inference-x1", "nodepool": INFERENCE, "severity": "warning"},
            ),
            _alerts(
                f"{training_s + 2}m",
                "GpuNodeNotInitialized",
                {"name": "gpu-inference-x1", "nodepool": INFERENCE, "severity": "warning"},
                {"name": "gpu-training-y1", "nodepool": TRAINING, "severity": "warning"},
            ),
        ],
    }
    # GPU pools at their limits, each in another resource, against pods that can and cannot go there.
    steps = 40
    at_limit = {
        "interval": "1m",
        "input_series": [
            # Inference: GPUs to spare, but 2 of its 1024 vCPUs left (the smallest node needs 4).
            *_pool_usage(
                INFERENCE, steps, cpu=(1022, 1024), memory=(2 * TI, 4 * TI), nvidia_com_gpu=(40, 64)
            ),
            # Training: at its GPU limit as well, but only pods that tolerate its taint count for it.
            *_pool_usage(TRAINING, steps, cpu=(768, 1536), memory=(8 * TI, 16 * TI), nvidia_com_gpu=(64, 64)),
            *_pod("serve-0", steps),  # tolerates nvidia.com/gpu only: inference (and MIG) pool
            *_pod("serve-1", steps, gpus=2),
        ],
        "alert_rule_test": [
            _alerts("5m", "GpuPoolAtLimitWithPendingPods"),
            _alerts("15m", "GpuPoolAtLimitWithPendingPods", {"nodepool": INFERENCE, "severity": "warning"}),
            # The same pods are the at-limit alert's, not waiting "for other reasons" on the inference pool
            # (the MIG pool, which could take them too, has a longer threshold than this window).
            _alerts("30m", "GpuPodsUnschedulable"),
        ],
    }
    memory_bound = {
        "interval": "1m",
        "input_series": [
            # 10 GiB left of 4 TiB: less than a g5.xlarge's 14.8 GiB (after the VM overhead).
            *_pool_usage(
                INFERENCE,
                steps,
                cpu=(500, 1024),
                memory=(4 * TI - 10 * 2**30, 4 * TI),
                nvidia_com_gpu=(30, 64),
            ),
            *_pod("serve-0", steps),
        ],
        "alert_rule_test": [
            _alerts("15m", "GpuPoolAtLimitWithPendingPods", {"nodepool": INFERENCE, "severity": "warning"}),
        ],
    }
    exactly_one_node = {
        "interval": "1m",
        "input_series": [
            # Room for exactly one g5.xlarge (4 vCPUs, 15891169280 bytes, 1 GPU): Karpenter can still launch.
            *_pool_usage(
                INFERENCE,
                steps,
                cpu=(1020, 1024),
                memory=(4 * TI - 15891169280, 4 * TI),
                nvidia_com_gpu=(63, 64),
            ),
            *_pod("serve-0", steps),
        ],
        "alert_rule_test": [_alerts("15m", "GpuPoolAtLimitWithPendingPods")],
    }
    # Training is full; a pod that selects the training pool waits: it is training's, not inference's, even
    # though inference is full too and the pod tolerates nvidia.com/gpu.
    selected = {
        "interval": "1m",
        "input_series": [
            *_pool_usage(INFERENCE, steps, nvidia_com_gpu=(64, 64)),
            *_pool_usage(TRAINING, steps, nvidia_com_gpu=(60, 64)),  # 4 left: less than one 8-GPU node
            *_pod("train-0", steps, pool=TRAINING, tolerations=TOLERATES_TRAINING, gpus=8),
        ],
        "alert_rule_test": [
            _alerts("15m", "GpuPoolAtLimitWithPendingPods", {"nodepool": TRAINING, "severity": "warning"}),
        ],
    }
    # Pods that wait for the full training pool but do not tolerate its taint are not its; none waits for
    # the full inference pool.
    wrong_pool = {
        "interval": "1m",
        "input_series": [
            *_pool_usage(TRAINING, steps, nvidia_com_gpu=(64, 64)),
            *_pool_usage(INFERENCE, steps, nvidia_com_gpu=(10, 64)),
            *_pod("serve-0", steps),
        ],
        "alert_rule_test": [_alerts("15m", "GpuPoolAtLimitWithPendingPods")],
    }
    # A MIG pool counts devices: 56 of 56 used; its pod asks for a MIG device (single strategy:
    # nvidia.com/gpu).
    mig_full = {
        "interval": "1m",
        "input_series": [
            *_pool_usage(MIG, steps, nvidia_com_gpu=(56, 56)),
            *_pool_usage(INFERENCE, steps, nvidia_com_gpu=(10, 64)),
            *_pod("mig-0", steps, pool=MIG),
        ],
        "alert_rule_test": [
            _alerts("15m", "GpuPoolAtLimitWithPendingPods", {"nodepool": MIG, "severity": "warning"}),
        ],
    }
    no_pending = {
        "interval": "1m",
        "input_series": [
            *_pool_usage(INFERENCE, steps, nvidia_com_gpu=(64, 64)),
            # A pod waits, but asks for no GPU.
            _series(
                "kube_pod_status_unschedulable",
                {**KSM, "namespace": "ml", "pod": "cpu-job", "uid": "u2"},
                "1x40",
            ),
        ],
        "alert_rule_test": [_alerts("20m", "GpuPoolAtLimitWithPendingPods")],
    }
    steps = pools[MIG].not_initialized_seconds // 60 + 10
    waiting = {
        "interval": "1m",
        "input_series": [
            *_pool_usage(INFERENCE, steps, nvidia_com_gpu=(10, 64)),
            *_pool_usage(TRAINING, steps, nvidia_com_gpu=(8, 64)),
            # Tolerates nvidia.com/gpu: the inference and the MIG pool could take it.
            *_pod("serve-0", steps),
            # Selects the training pool.
            *_pod(
                "train-0", steps, pool=TRAINING, tolerations=TOLERATES_TRAINING, gpus=8, namespace="research"
            ),
        ],
        "alert_rule_test": [
            _alerts(f"{inference_s - 2}m", "GpuPodsUnschedulable"),
            _alerts(
                f"{inference_s + 2}m",
                "GpuPodsUnschedulable",
                {"nodepool": INFERENCE, "namespace": "ml", "severity": "warning"},
            ),
            _alerts(
                f"{steps - 2}m",
                "GpuPodsUnschedulable",
                {"nodepool": INFERENCE, "namespace": "ml", "severity": "warning"},
                {"nodepool": TRAINING, "namespace": "research", "severity": "warning"},
                {"nodepool": MIG, "namespace": "ml", "severity": "warning"},
            ),
            # Every pod here fits some pool.
            _alerts(f"{steps - 2}m", "GpuPodsMatchNoPool"),
        ],
    }
    no_pool = {
        "interval": "1m",
        "input_series": [
            *_pod("old-0", 30, pool="gpu-old", namespace="legacy"),  # names a pool that does not exist
            *_pod("bare-0", 30, tolerations=(), namespace="legacy"),  # tolerates no GPU taint
            *_pod("train-1", 30, tolerations=TOLERATES_TRAINING, namespace="research"),  # fits training
        ],
        "alert_rule_test": [
            _alerts("10m", "GpuPodsMatchNoPool"),
            _alerts("20m", "GpuPodsMatchNoPool", {"namespace": "legacy", "severity": "warning"}),
        ],
    }
    requests = "karpenter_nodes_total_pod_requests"
    allocatable = "karpenter_nodes_allocatable"

    def node(pool: str, name: str) -> dict[str, str]:
        return {
            **KARPENTER,
            "nodepool": pool,
            "node_name": name,
            "resource_type": "nvidia.com/gpu",
            "instance_type": "g5.xlarge",
            "capacity_type": "spot",
            "zone": "us-west-2a",
            "arch": "amd64",
        }

    idle_nodes = {
        "interval": "1m",
        "input_series": [
            _series(allocatable, node(INFERENCE, NODE), "1x100"),
            _series(requests, node(INFERENCE, NODE), "1x10 0x90"),  # its GPU pod ended at minute 11
            _series(allocatable, node(INFERENCE, NODE_B), "1x100"),
            _series(requests, node(INFERENCE, NODE_B), "1x100"),  # busy
            # A training node (consolidateAfter 1h: 1h15m before it counts) idle since minute 11 too.
            _series(allocatable, node(TRAINING, "ip-10-30-3-12.us-west-2.compute.internal"), "8x100"),
            _series(requests, node(TRAINING, "ip-10-30-3-12.us-west-2.compute.internal"), "8x10 0x90"),
        ],
        "alert_rule_test": [
            _alerts("60m", "GpuNodeIdle"),
            _alerts("75m", "GpuNodeIdle", {"nodepool": INFERENCE, "node_name": NODE, "severity": "warning"}),
        ],
    }
    return [
        not_initialized,
        at_limit,
        memory_bound,
        exactly_one_node,
        selected,
        wrong_pool,
        mig_full,
        no_pending,
        waiting,
        no_pool,
        idle_nodes,
    ]


HOUR = 3600


def _retries(start: float, end: float) -> list[float]:
    """When a reconcile that fails from `start` until `end` (seconds) reports its errors: at `start`, then
    after each of controller-runtime's delays (doubling from its base, capped)."""
    times, delay = [], RETRY_BASE_SECONDS
    while start < end:
        times.append(start)
        start += delay
        delay = min(2 * delay, RETRY_CAP_SECONDS)
    return times


def _scraped(errors: list[float], seconds: int) -> str:
    """The errors counter as Prometheus scrapes it, from 0 to `seconds`."""
    scrapes = range(0, seconds + 1, SCRAPE_INTERVAL_SECONDS)
    return " ".join(str(sum(1 for t in errors if t <= at)) for at in scrapes)


def _control_plane_tests() -> list[dict[str, Any]]:
    deleted = "gpu_eks_node_guard_nodeclaims_deleted_total"
    guard_deletions = {
        "interval": "1m",
        "input_series": [
            _series(deleted, {**GUARD, "nodepool": INFERENCE}, "0x10 1x80"),  # one deletion at minute 11
            _series(deleted, {**GUARD, "nodepool": TRAINING}, "2x20 0x70"),  # a guard restart resets it
            _series(deleted, {**GUARD, "nodepool": "cpu-burst"}, "0x10 3x80"),  # no GPU pool
        ],
        "alert_rule_test": [
            _alerts("5m", "GpuNodeGuardReplacedNodeClaims"),
            _alerts("15m", "GpuNodeGuardReplacedNodeClaims", {"nodepool": INFERENCE, "severity": "warning"}),
            _alerts("80m", "GpuNodeGuardReplacedNodeClaims"),
        ],
    }
    held = "gpu_eks_node_guard_nodeclaims_held"
    standby = {**GUARD, "pod": "gpu-node-guard-5c9d-y"}
    # The leader's breaker holds two training NodeClaims from minute 10; the standby reports no pool state.
    guard_holding = {
        "interval": "1m",
        "input_series": [
            _series(held, {**GUARD, "nodepool": TRAINING}, "0x10 2x20"),
            _series(held, {**GUARD, "nodepool": INFERENCE}, "0x30"),
        ],
        "alert_rule_test": [
            _alerts("12m", "GpuNodeGuardHoldingNodeClaims"),
            _alerts("20m", "GpuNodeGuardHoldingNodeClaims", {"nodepool": TRAINING, "severity": "warning"}),
        ],
    }
    synced = "gpu_eks_node_guard_last_sync_success_timestamp_seconds"
    # Leader and standby both scraped: the standby exports 0 as its last sync, the leader syncs every minute.
    guard_pair = {
        "interval": "1m",
        "input_series": [
            _series("up", GUARD, "1x30"),
            _series("up", standby, "1x30"),
            _series(synced, GUARD, "0+60x30"),
            _series(synced, standby, "0x30"),
        ],
        "alert_rule_test": [_alerts("25m", "GpuNodeGuardDown")],
    }
    guard_down = {
        "interval": "1m",
        "input_series": [_series("up", GUARD, "1x5 0x20"), _series(synced, GUARD, "0+60x5")],
        "alert_rule_test": [
            _alerts("8m", "GpuNodeGuardDown"),
            _alerts("14m", "GpuNodeGuardDown", {"severity": "warning"}),
        ],
    }
    guard_stuck = {
        "interval": "1m",
        "input_series": [_series("up", GUARD, "1x30"), _series(synced, GUARD, "0+60x10 600x20")],
        "alert_rule_test": [
            _alerts("18m", "GpuNodeGuardDown"),
            _alerts("25m", "GpuNodeGuardDown", {"severity": "warning"}),
        ],
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
    other = {**errors, "controller": "nodeclaim.lifecycle"}
    queue_errors = "controller_runtime_reconcile_errors_total"
    # sqs:ReceiveMessage denied from 1m15s on, for good: the errors come ever further apart, then every
    # 1000 s. The alert fires 25 minutes after the first error and stays firing.
    denied = {
        "interval": f"{SCRAPE_INTERVAL_SECONDS}s",
        "input_series": [
            _series(queue_errors, errors, _scraped(_retries(75, 2 * HOUR), 2 * HOUR)),
            _series(queue_errors, other, _scraped([], 2 * HOUR)),
        ],
        "alert_rule_test": [
            _alerts("24m", "KarpenterInterruptionQueueErrors"),
            *(
                _alerts(at, "KarpenterInterruptionQueueErrors", {"severity": "warning"})
                for at in ("26m", "40m", "55m", "1h10m", "1h25m", "1h40m", "1h59m")
            ),
        ],
    }
    # The same, fixed at 1h: the last error (at 56m26s) leaves the window 18 minutes later.
    fixed = {
        "interval": f"{SCRAPE_INTERVAL_SECONDS}s",
        "input_series": [_series(queue_errors, errors, _scraped(_retries(75, HOUR), 2 * HOUR))],
        "alert_rule_test": [
            _alerts("59m", "KarpenterInterruptionQueueErrors", {"severity": "warning"}),
            _alerts("1h16m", "KarpenterInterruptionQueueErrors"),
        ],
    }
    # One failed reconcile whose first retry succeeds, and a failure that clears within 5 minutes (its 16
    # quick retries): neither pages.
    transient = [
        {
            "interval": f"{SCRAPE_INTERVAL_SECONDS}s",
            "input_series": [_series(queue_errors, errors, _scraped(failing, HOUR))],
            "alert_rule_test": [
                _alerts(at, "KarpenterInterruptionQueueErrors")
                for at in ("6m", "10m", "15m", "20m", "23m", "25m", "30m", "59m")
            ],
        }
        for failing in (_retries(315, 316), _retries(315, 315 + 5 * 60))
    ]
    other_errors = {
        "interval": "1m",
        "input_series": [_series(queue_errors, other, "0+1x60")],
        "alert_rule_test": [_alerts("59m", "KarpenterInterruptionQueueErrors")],
    }
    # The agent stops at minute 10: nothing reaches the workspace any more, Karpenter's target included.
    agent_down = {
        "interval": "1m",
        "input_series": [_series("up", AGENT, "1x10"), _series("up", KARPENTER, "1x10")],
        "alert_rule_test": [
            _alerts("8m", "PrometheusAgentDown"),
            _alerts("25m", "PrometheusAgentDown", {"severity": "critical"}),
            # Also firing, and held back by the routing's inhibition (test_alerting.py).
            _alerts("25m", "KarpenterControllerDown", {"severity": "critical"}),
            _alerts("25m", WATCHDOG, {"severity": "none"}),
        ],
    }
    # The race the inhibition must win: Karpenter's target goes absent up to a scrape interval before the
    # agent's own, and the workspace evaluates the two groups up to a minute apart (promtool evaluates all
    # groups at once, so Karpenter's last sample here is a minute older than the agent's). The agent's alert
    # must already fire when Karpenter's does (alerts.AGENT_DOWN_LEAD_SECONDS).
    agent_down_first = {
        "interval": f"{SCRAPE_INTERVAL_SECONDS}s",
        "input_series": [_series("up", KARPENTER, "1x19"), _series("up", AGENT, "1x21")],
        "alert_rule_test": [
            _alerts("19m", "KarpenterControllerDown"),
            _alerts("20m", "PrometheusAgentDown", {"severity": "critical"}),
            _alerts("20m", "KarpenterControllerDown", {"severity": "critical"}),
        ],
    }
    return [
        agent_down_first,
        guard_deletions,
        guard_holding,
        guard_pair,
        guard_down,
        guard_stuck,
        controller_down,
        controller_up,
        interruption_slow,
        interruption_fast,
        denied,
        fixed,
        *transient,
        other_errors,
        agent_down,
    ]


def _healthy_cluster() -> dict[str, Any]:
    """Three hours of a healthy cluster: busy GPUs, pools with headroom, nodes initialized in time, pods that
    wait only while a node launches, every component up. Nothing but the Watchdog may fire."""
    steps = 180
    busy = {**GPU, **HELD}
    series = [
        _series("up", DCGM_TARGET, f"1x{steps}"),
        _series("up", {**DCGM_TARGET, "node": NODE_B, "pod": "nvidia-dcgm-exporter-q4w8n"}, f"1x{steps}"),
        _series("up", KARPENTER, f"1x{steps}"),
        _series("up", GUARD, f"1x{steps}"),
        _series("up", AGENT, f"1x{steps}"),
        _series("gpu_eks_node_guard_last_sync_success_timestamp_seconds", GUARD, f"0+60x{steps}"),
        _series(
            "gpu_eks_node_guard_nodeclaims_deleted_total", {**GUARD, "nodepool": INFERENCE}, f"0x{steps}"
        ),
        *_node(NODE, INFERENCE, steps),
        *_node(NODE_B, TRAINING, steps, gpus=8),
        _series("DCGM_FI_DEV_XID_ERRORS", busy, f"0x{steps}"),
        _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", busy, f"0x{steps}"),
        _series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", busy, f"0x{steps}"),
        _series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", busy, f"0.4+0.001x{steps}"),
        *_pool_usage(INFERENCE, steps, cpu=(4, 1024), memory=(16 * 2**30, 4 * TI), nvidia_com_gpu=(1, 64)),
        *_pool_usage(TRAINING, steps, cpu=(96, 1536), memory=(1152 * 2**30, 16 * TI), nvidia_com_gpu=(8, 64)),
        _series(
            "karpenter_nodes_allocatable",
            {**KARPENTER, "nodepool": INFERENCE, "node_name": NODE, "resource_type": "nvidia.com/gpu"},
            f"1x{steps}",
        ),
        _series(
            "karpenter_nodes_total_pod_requests",
            {**KARPENTER, "nodepool": INFERENCE, "node_name": NODE, "resource_type": "nvidia.com/gpu"},
            f"1x{steps}",
        ),
        # A NodeClaim that initialized after 9 minutes, at minute 100.
        _series(
            "operator_nodeclaim_status_condition_current_status_seconds",
            _nodeclaim(TRAINING, "gpu-training-z9", "Unknown"),
            "_x90 0+60x9",
        ),
        _series(
            "operator_nodeclaim_status_condition_current_status_seconds",
            _nodeclaim(TRAINING, "gpu-training-z9", "True"),
            "_x99 0+60x80",
        ),
        # A training pod that waited 10 minutes for that node.
        *[
            {**s, "values": "_x90 " + s["values"]}
            for s in _pod("train-2", 10, tolerations=TOLERATES_TRAINING, gpus=8)
        ],
        _series(
            "controller_runtime_reconcile_errors_total",
            {**KARPENTER, "controller": "interruption"},
            f"3x{steps}",
        ),
    ]
    quiet = sorted({rule["alert"] for rule in all_alert_rules()} - {WATCHDOG})
    checks = [_alerts(f"{minute}m", name) for minute in (30, 95, 105, 179) for name in quiet]
    checks += [_alerts(f"{minute}m", WATCHDOG, {"severity": "none"}) for minute in (1, 179)]
    return {"interval": "1m", "input_series": series, "alert_rule_test": checks}


def _tests() -> list[dict[str, Any]]:
    return [*_gpu_tests(), *_pool_tests(), *_control_plane_tests(), _healthy_cluster()]


def _groups(annotations: bool) -> list[dict[str, Any]]:
    groups = sample_alert_groups()
    if not annotations:
        for group in groups:
            for rule in group["rules"]:
                rule.pop("annotations", None)
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
    assert f"SUCCESS: {len(all_alert_rules()) + len(all_recording_rules())} rules found" in result.stdout


def _rule_files_of(test: dict[str, Any], groups: list[dict[str, Any]]) -> list[str]:
    """The rule files (one per group) a scenario needs: the groups of the alerts it names, and the groups of
    the recording rules those use. promtool evaluates every loaded rule at every step of every scenario, so
    loading only these is what keeps the run short; a group's alerts depend on no other group's (promtool
    checks each named alert against the rules loaded, so one left out would pass quietly: every named alert's
    group is loaded by construction)."""
    named = {a["alertname"] for a in test["alert_rule_test"]}
    recorded = {
        rule["record"]: group["name"] for group in groups for rule in group["rules"] if "record" in rule
    }
    needed = {group["name"] for group in groups for rule in group["rules"] if rule.get("alert") in named}
    while True:
        exprs = " ".join(r["expr"] for g in groups if g["name"] in needed for r in g["rules"])
        more = {group for name, group in recorded.items() if re.search(rf"\b{re.escape(name)}\b", exprs)}
        if more <= needed:
            return [f"rules-{group['name']}.yaml" for group in groups if group["name"] in needed]
        needed |= more


def test_every_alert_fires_and_stays_quiet_as_it_should(tmp_path: Path) -> None:
    groups = _groups(annotations=False)
    for group in groups:
        (tmp_path / f"rules-{group['name']}.yaml").write_text(yaml.safe_dump({"groups": [group]}))
    tests = _tests()
    by_rule_files: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for test in tests:
        by_rule_files.setdefault(tuple(_rule_files_of(test, groups)), []).append(test)
    test_files = []
    for index, (rule_files, scenarios) in enumerate(sorted(by_rule_files.items())):
        test_files.append(f"tests-{index}.yaml")
        (tmp_path / test_files[-1]).write_text(
            yaml.safe_dump({"rule_files": list(rule_files), "evaluation_interval": "1m", "tests": scenarios})
        )
    assert sum(len(scenarios) for scenarios in by_rule_files.values()) == len(tests)
    result = _promtool("test", "rules", *test_files, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    fired = {a["alertname"] for t in tests for a in t["alert_rule_test"] if a["exp_alerts"]}
    quiet = {a["alertname"] for t in tests for a in t["alert_rule_test"] if not a["exp_alerts"]}
    every = {rule["alert"] for rule in all_alert_rules()}
    assert fired == every, "an alert without a test that makes it fire"
    assert quiet == every - {WATCHDOG}, "an alert without a test that keeps it quiet"


def test_the_application_xids_the_alert_names_are_not_fatal() -> None:
    """GpuXidError's description gives examples of application XIDs: each is one, not a fatal code."""
    assert not APPLICATION_XIDS & FATAL_XIDS.keys()
    (rule,) = [r for r in all_alert_rules() if r["alert"] == "GpuXidError"]
    for code in APPLICATION_XIDS:
        assert re.search(rf"\b{code}\b", rule["annotations"]["description"]), code


def test_every_alert_names_what_needs_action_and_its_runbook() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
    headings = {
        line.lstrip("#").strip().lower() for line in docs.read_text().splitlines() if line.startswith("#")
    }
    for rule in all_alert_rules():
        assert rule["alert"].lower() in headings, f"no runbook section for {rule['alert']}"
        labels, annotations = rule["labels"], rule["annotations"]
        assert labels["severity"] in {"critical", "warning", "none"}, rule["alert"]
        assert labels["cluster"] == CLUSTER
        assert annotations["runbook_url"] == f"docs/observability.md#{rule['alert'].lower()}"
        assert annotations["summary"], rule["alert"]
        assert annotations["description"].endswith((".", ")")), rule["alert"]


@pytest.mark.parametrize("interruption_handling", [True, False])
def test_interruption_alerts_exist_only_with_interruption_handling(interruption_handling: bool) -> None:
    names = {rule["alert"] for rule in all_alert_rules(interruption_handling)}
    assert ("KarpenterInterruptionMessagesDelayed" in names) is interruption_handling
    assert ("KarpenterInterruptionQueueErrors" in names) is interruption_handling


def test_the_agent_alert_exists_only_where_an_agent_feeds_the_rules() -> None:
    assert "PrometheusAgentDown" in {r["alert"] for r in all_alert_rules(managed=True)}
    assert "PrometheusAgentDown" not in {r["alert"] for r in all_alert_rules(managed=False)}


def test_no_gpu_pools_no_gpu_alerts() -> None:
    groups = sample_alert_groups(gpu_pools=())
    assert [g["name"] for g in groups] == ["gpu-eks.karpenter", "gpu-eks.alerting"]


def test_bottlerocket_pools_get_no_dcgm_alerts() -> None:
    """Bottlerocket nodes run no GPU Operator operand: no DCGM series, so no DCGM alert can ever fire."""
    groups = sample_alert_groups(gpu_pools=("gpu-br",))
    names = {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}
    assert not [rule for group in groups for rule in group["rules"] if "record" in rule]
    assert not names & {"GpuFatalXidError", "GpuXidError", "DcgmExporterDown", "GpuNodeWithoutDcgmExporter"}
    assert {"GpuPoolAtLimitWithPendingPods", "GpuNodeNotInitialized", "GpuNodeIdle"} <= names
    mixed = {
        r["alert"]: r
        for g in sample_alert_groups(gpu_pools=(INFERENCE, "gpu-br"))
        for r in g["rules"]
        if "alert" in r
    }
    assert "gpu-br" not in mixed["GpuNodeWithoutDcgmExporter"]["expr"]


def test_the_error_window_outlasts_the_longest_wait_between_retries() -> None:
    """Recomputed from the retry schedule itself: the longest wait between the errors of a reconcile that
    fails for 6 hours, plus a scrape on either side, fits in the window, in whole minutes; the alert waits 5
    minutes longer than the window."""
    errors = _retries(0, 6 * HOUR)
    longest = max(b - a for a, b in itertools.pairwise(errors))
    assert longest == 1000
    assert RETRY_WINDOW_SECONDS - 60 < longest + 2 * SCRAPE_INTERVAL_SECONDS <= RETRY_WINDOW_SECONDS
    assert RETRY_WINDOW_SECONDS == 18 * 60
    (rule,) = [r for r in all_alert_rules() if r["alert"] == "KarpenterInterruptionQueueErrors"]
    assert "[18m]" in rule["expr"]
    assert rule["for"] == "23m"
    assert RETRY_ERRORS_FOR_SECONDS == 23 * 60


def test_what_the_agent_down_alert_inhibits_fires_a_scrape_an_evaluation_and_a_group_wait_later() -> None:
    """Read from what is rendered: the rules' `for` and the routing's group wait."""
    from components.observability.routing import INHIBIT_RULES, route_tree
    from config.types import duration_seconds as seconds
    from facts.prometheus_stack import AMP_RULE_EVALUATION_SECONDS

    rules = {r["alert"]: r for r in all_alert_rules(managed=True)}
    lead = (
        SCRAPE_INTERVAL_SECONDS
        + AMP_RULE_EVALUATION_SECONDS
        + seconds(route_tree(heartbeat=True)["group_wait"])
    )
    [inhibition] = [
        r for r in INHIBIT_RULES if r.get("source_matchers") == ['alertname="PrometheusAgentDown"']
    ]
    [targets] = inhibition["target_matchers"]
    inhibited = re.fullmatch(r'alertname=~"(.+)"', targets).group(1).split("|")  # type: ignore[union-attr]
    assert inhibited == ["KarpenterControllerDown", "GpuNodeGuardDown"]
    for name in inhibited:
        assert seconds(rules[name]["for"]) - seconds(rules["PrometheusAgentDown"]["for"]) >= lead, name
    # docs/observability.md's alert table states both figures.
    agent_for = seconds(rules["PrometheusAgentDown"]["for"]) // 60
    table = (Path(__file__).parents[2] / "docs" / "observability.md").read_text()
    stated = f"for {agent_for} minutes after their last sample aged out; fires {lead // 60} minutes before"
    assert stated in table
