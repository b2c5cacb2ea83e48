"""The Grafana dashboards (pure): one per GPU pool and an overview of all pools, as dashboard JSON.

Grafana's dashboard sidecar loads them from ConfigMaps labelled `grafana_dashboard: "1"` (the component
creates one per dashboard). Every panel says in its description what question it answers; the queries use
only metrics the pinned exporters export (`facts.metrics`, checked in the tests with a PromQL parser).

Where the cost comes from: `karpenter_nodepools_cost_total` is Karpenter's own sum, per pool, of the hourly
price of every NodeClaim's offering (instance type, zone, capacity type). Karpenter takes on-demand prices
from the AWS Price List API and spot prices from EC2's spot price history, falling back to the price list
compiled into its release where those APIs are unreachable; reserved capacity is priced near zero (the
reservation is paid anyway). It ignores Savings Plans, Reserved Instances, private pricing, EBS and data
transfer: an estimate of list price, not a bill.
"""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.observability.queries import (
    CONDITION_POOL_LABEL,
    KARPENTER_GPU,
    Targets,
    any_of,
    leader_max,
    matchers,
    on_pool_nodes,
    pending_gpu_pods,
)

DASHBOARD_LABEL = "grafana_dashboard"
DASHBOARD_LABEL_VALUE = "1"
"""Label (and value) of the ConfigMaps Grafana's dashboard sidecar loads (kube-prometheus-stack's default)."""

DATASOURCE_UID = "prometheus"
"""UID of the Grafana data source the panels query (the chart's default Prometheus data source, or the
Amazon Managed Service for Prometheus one the managed backend provisions under the same UID)."""

INTERRUPTION_REASONS = (
    "spot_interrupted",
    "scheduled_change",
    "instance_stopped",
    "instance_terminated",
    "capacity_reservation_interrupted",
    "instance_status",
    "system_status",
    "event_status",
)
"""`reason` of `karpenter_nodeclaims_disrupted_total` when Karpenter's AWS provider deletes a NodeClaim
itself: the message kinds of aws/karpenter-provider-aws v1.14.1
pkg/controllers/interruption/messages/types.go that `actionForMessage` (utils.go) acts on. The first five
come from interruption queue messages. The last three come from its instance status controller, which polls
DescribeInstanceStatus with or without a queue: an instance or system status check impaired for two minutes
(replaced without a graceful drain) and a scheduled maintenance event. Rebalance recommendations only raise
events."""

_WIDTH = 24
_HEIGHT = 8
_SCHEMA_VERSION = 39


@dataclass(frozen=True)
class Target:
    """One query of a panel."""

    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    """One panel: what it answers (`description`), how it is drawn, and its queries."""

    title: str
    description: str
    targets: tuple[Target, ...]
    kind: str = "timeseries"
    unit: str = "short"
    width: int = 12
    content: str = ""
    """The Markdown of a `text` panel (which has no queries)."""


def uid(name: str) -> str:
    """A Grafana dashboard UID (at most 40 characters) that stays the same for the same dashboard name."""
    if len(name) <= 40:
        return name
    return f"{name[:31]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _panel_json(panel: Panel, panel_id: int, x: int, y: int, datasource: dict[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {
        "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull"]}
    }
    if panel.kind in ("stat", "bargauge"):
        options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    if panel.kind == "text":
        options = {"mode": "markdown", "content": panel.content}
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": datasource,
        "gridPos": {"x": x, "y": y, "w": panel.width, "h": _HEIGHT},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": options,
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": datasource, "expr": t.expr, "legendFormat": t.legend}
            for i, t in enumerate(panel.targets)
        ],
    }


def _dashboard(name: str, title: str, panels: Sequence[Panel], datasource_type: str) -> dict[str, Any]:
    datasource = {"type": datasource_type, "uid": DATASOURCE_UID}
    placed, x, y = [], 0, 0
    for index, panel in enumerate(panels, start=1):
        if x + panel.width > _WIDTH:
            x, y = 0, y + _HEIGHT
        placed.append(_panel_json(panel, index, x, y, datasource))
        x += panel.width
    return {
        "uid": uid(name),
        "title": title,
        "tags": ["gpu-eks"],
        "editable": False,
        "timezone": "utc",
        "schemaVersion": _SCHEMA_VERSION,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": []},
        "panels": placed,
    }


def _pending_gpu_pods() -> str:
    # `count` of nothing is no series, which Grafana shows as "No data"; nothing waiting is 0.
    return f"{pending_gpu_pods()} or vector(0)"


def _utilisation(pool: str, *, mig: bool) -> Panel:
    # DCGM_FI_DEV_GPU_UTIL is 0 or absent for MIG devices; NVIDIA's maintainers point to the DCP metric
    # DCGM_FI_PROF_GR_ENGINE_ACTIVE instead (NVIDIA/dcgm-exporter#216, #430), which every MIG-capable GPU
    # supports and the GPU Operator's collectors file exports, per MIG device and per whole GPU.
    if mig:
        return Panel(
            "GPU utilisation",
            "Are the GPUs busy? DCGM's graphics engine activity (share of time it was busy) per MIG device, "
            "and per GPU for GPUs left whole; near 0 with GPUs requested means pods hold MIG devices they do "
            "not use.",
            (
                Target(
                    on_pool_nodes("DCGM_FI_PROF_GR_ENGINE_ACTIVE", pool),
                    "{{node}} GPU {{gpu}} {{GPU_I_PROFILE}} {{GPU_I_ID}}",
                ),
            ),
            unit="percentunit",
        )
    return Panel(
        "GPU utilisation",
        "Are the GPUs busy? DCGM's GPU utilisation (time a kernel was running) per GPU; near 0 with GPUs "
        "requested means pods hold GPUs they do not use.",
        (Target(on_pool_nodes("DCGM_FI_DEV_GPU_UTIL", pool), "{{node}} GPU {{gpu}}"),),
        unit="percent",
    )


BOTTLEROCKET_NOTE = (
    "**No GPU metrics on this pool.** Its nodes run Bottlerocket, where no GPU Operator operand runs, the "
    "DCGM "
    "exporter included, so there is no GPU utilisation, memory or XID data, and no DCGM alert covers these "
    "GPUs. Allocation, limits, launches and cost below come from Karpenter. For GPU metrics use an AL2023 "
    "pool "
    "(`ami: al2023@...`; docs/gpu-pools.md)."
)


def _gpu_metrics_note() -> Panel:
    return Panel(
        "GPU metrics",
        "Why are there no GPU utilisation and memory panels? The pool's nodes report no DCGM metrics.",
        (),
        kind="text",
        width=24,
        content=BOTTLEROCKET_NOTE,
    )


def pool_panels(pool: str, *, mig: bool, dcgm: bool = True) -> list[Panel]:
    """The panels of one GPU pool's dashboard; `mig`: the pool partitions its GPUs with MIG; `dcgm`: its nodes
    report DCGM metrics (not on Bottlerocket, which gets a note instead of the GPU panels)."""
    gpu = {"nodepool": pool, "resource_type": KARPENTER_GPU}
    per_node = ["node_name", "resource_type"]
    allocatable = f"sum by (resource_type) ({leader_max('karpenter_nodes_allocatable', per_node, **gpu)})"
    requested = (
        f"sum by (resource_type) ({leader_max('karpenter_nodes_total_pod_requests', per_node, **gpu)})"
    )
    guard = matchers(nodepool=pool)
    fb_used = on_pool_nodes("DCGM_FI_DEV_FB_USED", pool)
    fb_free = on_pool_nodes("DCGM_FI_DEV_FB_FREE", pool)
    # MIG devices of one GPU share its `gpu` label: the instance tells them apart.
    per_gpu = "{{node}} GPU {{gpu}}" + (" {{GPU_I_PROFILE}} {{GPU_I_ID}}" if mig else "")
    nodes = leader_max(
        "karpenter_nodes_allocatable",
        ["node_name", "instance_type", "capacity_type"],
        nodepool=pool,
        resource_type="cpu",
    )
    initialized = (
        "operator_nodeclaim_status_condition_transition_seconds_bucket"
        f"{matchers(type='Initialized', status='Unknown', **{CONDITION_POOL_LABEL: pool})}"
    )
    gpu_metrics = [
        _utilisation(pool, mig=mig),
        Panel(
            "GPU memory used",
            "How full is each GPU's memory? Framebuffer used over used + free, per GPU (per MIG device on "
            "MIG "
            "pools; DCGM). Near 100% risks out-of-memory errors; low with whole GPUs suggests smaller GPUs, "
            "time-slicing or MIG.",
            (Target(f"{fb_used} / ({fb_used} + {fb_free})", per_gpu),),
            unit="percentunit",
        ),
    ]
    return [
        Panel(
            "GPUs allocatable vs requested",
            "Are the pool's GPUs in use? Allocatable: GPUs the pool's nodes offer (a time-sliced or MIG GPU "
            "counts once per slice; a mixed-strategy MIG pool shows its MIG resources); requested: what pods "
            "on them asked for. A wide gap for longer than consolidateAfter means idle GPUs Karpenter cannot "
            "remove (pods that block eviction, or a WhenEmpty pool).",
            (
                Target(allocatable, "allocatable {{resource_type}}"),
                Target(requested, "requested {{resource_type}}"),
            ),
        ),
        *(gpu_metrics if dcgm else [_gpu_metrics_note()]),
        Panel(
            "Pods waiting for a GPU",
            "Is anything waiting for GPU capacity? Pods requesting nvidia.com/gpu (or a MIG resource) that "
            "the scheduler could not place, cluster-wide (a pending pod belongs to no pool until it is "
            "scheduled). Staying above 0 while the pool is at its limit fires "
            "GpuPoolAtLimitWithPendingPods.",
            (Target(_pending_gpu_pods(), "unschedulable GPU pods"),),
        ),
        Panel(
            "NodeClaims launched and terminated (per hour)",
            "How much churn? NodeClaims Karpenter created (by reason) and terminated in the pool per hour. "
            "Steady "
            "launch-terminate pairs mean consolidation fights bursts: raise consolidateAfter.",
            (
                Target(
                    "sum by (reason) "
                    f"(increase(karpenter_nodeclaims_created_total{matchers(nodepool=pool)}[1h]))",
                    "launched: {{reason}}",
                ),
                Target(
                    f"sum(increase(karpenter_nodeclaims_terminated_total{matchers(nodepool=pool)}[1h]))",
                    "terminated",
                ),
            ),
        ),
        Panel(
            "Launch to ready",
            "How long from launch until a node can run GPU pods? Time a NodeClaim spent before it was "
            "initialized "
            "(nvidia.com/gpu allocatable, startup taints gone), 50th and 90th percentile over 6 hours. Past "
            "the "
            "pool's initializationTimeout the GPU node guard replaces a node; GpuNodeNotInitialized fires if "
            "it did not.",
            tuple(
                Target(f"histogram_quantile({q}, sum by (le) (rate({initialized}[6h])))", f"p{int(q * 100)}")
                for q in (0.5, 0.9)
            ),
            unit="s",
        ),
        Panel(
            "Interruptions (per hour)",
            "How often does AWS take nodes away? NodeClaims Karpenter deleted on interruption messages or "
            "failed EC2 health checks, by reason (spot_interrupted: the two-minute spot warning; "
            "instance_status, system_status: a failed status check, replaced without a graceful drain; "
            "event_status: a scheduled EC2 maintenance event).",
            (
                Target(
                    "sum by (reason) (increase(karpenter_nodeclaims_disrupted_total"
                    f"{matchers(nodepool=pool, reason=any_of(INTERRUPTION_REASONS))}[1h]))",
                    "{{reason}}",
                ),
            ),
        ),
        Panel(
            "Stuck GPU nodes (GPU node guard)",
            "Do the pool's nodes become ready? NodeClaims launched but not initialized yet, NodeClaims the "
            "GPU node guard deleted per hour because they stayed uninitialized past the pool's "
            "initializationTimeout (GpuNodeGuardReplacedNodeClaims), and, on MIG pools, nodes whose MIG "
            "partitioning failed. Steady deletions mean the pool's nodes cannot become ready.",
            (
                Target(f"max(gpu_eks_node_guard_uninitialized_nodeclaims{guard})", "not initialized yet"),
                Target(
                    f"sum(increase(gpu_eks_node_guard_nodeclaims_deleted_total{guard}[1h]))",
                    "deleted (never initialized) per hour",
                ),
                Target(f"max(gpu_eks_node_guard_mig_failed_nodes{guard})", "MIG partitioning failed"),
            ),
        ),
        Panel(
            "Usage against the pool's limits",
            "How close is the pool to its caps? Provisioned resources over the pool's limits (GPUs, CPU, "
            "memory). At "
            "100% Karpenter launches nothing more for the pool.",
            (
                Target(
                    f"{leader_max('karpenter_nodepools_usage', ['resource_type'], nodepool=pool)} / "
                    f"{leader_max('karpenter_nodepools_limit', ['resource_type'], nodepool=pool)}",
                    "{{resource_type}}",
                ),
            ),
            kind="bargauge",
            unit="percentunit",
        ),
        Panel(
            "Estimated hourly cost",
            "What does the pool cost right now? Karpenter's sum of the hourly list price of the pool's "
            "instances "
            "(on-demand from the AWS price list, spot from the spot price history; no Savings Plans, RIs, "
            "EBS "
            "or data transfer).",
            (Target(f"max(karpenter_nodepools_cost_total{matchers(nodepool=pool)})", "USD per hour"),),
            kind="stat",
            unit="currencyUSD",
            width=6,
        ),
        Panel(
            "Nodes by instance type",
            "What is running? The pool's nodes by instance type and capacity type (spot, on-demand, "
            "reserved).",
            (
                Target(
                    f"count by (instance_type, capacity_type) ({nodes})",
                    "{{instance_type}} {{capacity_type}}",
                ),
            ),
            width=18,
        ),
    ]


def overview_panels(gpu_pools: Sequence[str], *, karpenter_namespace: str, karpenter_job: str) -> list[Panel]:
    """The panels of the overview dashboard (every GPU pool side by side, and Karpenter's health)."""
    pools = any_of(gpu_pools)
    target = matchers(job=karpenter_job, namespace=karpenter_namespace)
    gpu = {"nodepool": pools, "resource_type": KARPENTER_GPU}
    by_resource = ["nodepool", "resource_type"]
    requested = leader_max(
        "karpenter_nodes_total_pod_requests", ["nodepool", "node_name", "resource_type"], **gpu
    )
    return [
        Panel(
            "Estimated hourly cost by pool",
            "What do the GPU pools cost right now, and which costs most? Karpenter's hourly list-price "
            "estimate per "
            "pool (see the pool dashboards for what it includes).",
            (
                Target(
                    f"max by (nodepool) (karpenter_nodepools_cost_total{matchers(nodepool=pools)})",
                    "{{nodepool}}",
                ),
            ),
            unit="currencyUSD",
        ),
        Panel(
            "GPUs provisioned against each pool's limit",
            "Which pool is about to hit its GPU cap? Provisioned GPUs over limits.nvidia.com/gpu (in the "
            "pool's units: slices for time-sliced and MIG pools; the fullest MIG resource of a mixed pool).",
            (
                Target(
                    f"max by (nodepool) ({leader_max('karpenter_nodepools_usage', by_resource, **gpu)} / "
                    f"{leader_max('karpenter_nodepools_limit', by_resource, **gpu)})",
                    "{{nodepool}}",
                ),
            ),
            kind="bargauge",
            unit="percentunit",
        ),
        Panel(
            "GPUs requested by pool",
            "Where do the GPU workloads run? GPUs requested by pods, per pool.",
            (
                Target(
                    f"sum by (nodepool) ({requested})",
                    "{{nodepool}}",
                ),
            ),
        ),
        Panel(
            "Pods waiting for a GPU",
            "Is anything waiting for GPU capacity? Unschedulable pods requesting nvidia.com/gpu (or a MIG "
            "resource), cluster-wide.",
            (Target(_pending_gpu_pods(), "unschedulable GPU pods"),),
        ),
        Panel(
            "GPUs with an XID error",
            "Which GPUs reported a driver error? The last XID per GPU (0: none); see GpuXidError.",
            (Target("max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0", "{{node}} GPU {{gpu}}"),),
        ),
        Panel(
            "Stuck GPU nodes deleted by the GPU node guard (per hour)",
            "Which pool's nodes fail to become ready? NodeClaims the GPU node guard deleted per hour, by "
            "pool, because they stayed uninitialized past the pool's initializationTimeout; see the pool "
            "dashboards and GpuNodeGuardReplacedNodeClaims.",
            (
                Target(
                    "sum by (nodepool) "
                    f"(increase(gpu_eks_node_guard_nodeclaims_deleted_total{matchers(nodepool=pools)}[1h]))",
                    "{{nodepool}}",
                ),
            ),
        ),
        Panel(
            "Karpenter controllers up",
            "Is Karpenter running? Controller replicas Prometheus can scrape (one leads, the others stand "
            "by).",
            (Target(f"sum(up{target})", "replicas up"),),
            kind="stat",
            width=6,
        ),
        Panel(
            "Interruption messages (per hour) and their wait",
            "Is interruption handling keeping up? Messages received from the interruption queue by type, "
            "and the "
            "99th percentile of how long they waited on it before Karpenter processed them.",
            (
                Target(
                    "sum by (message_type) "
                    f"(increase(karpenter_interruption_received_messages_total{target}[1h]))",
                    "{{message_type}}",
                ),
                Target(
                    "histogram_quantile(0.99, sum by (le) "
                    f"(rate(karpenter_interruption_message_queue_duration_seconds_bucket{target}[1h])))",
                    "p99 wait (s)",
                ),
            ),
            width=18,
        ),
    ]


def dashboards(targets: Targets, *, datasource_type: str) -> dict[str, dict[str, Any]]:
    """Dashboard name -> dashboard JSON: `gpu-eks-overview` and `gpu-eks-pool-<pool>` per GPU pool."""
    overview = overview_panels(
        targets.gpu_pools,
        karpenter_namespace=targets.karpenter_namespace,
        karpenter_job=targets.karpenter_job,
    )
    result = {
        "gpu-eks-overview": _dashboard("gpu-eks-overview", "GPU pools: overview", overview, datasource_type)
    }
    for pool in targets.pools:
        name = f"gpu-eks-pool-{pool.name}"
        panels = pool_panels(pool.name, mig=pool.mig, dcgm=pool.dcgm)
        result[name] = _dashboard(name, f"GPU pool: {pool.name}", panels, datasource_type)
    return result


def dashboard_json(dashboard: dict[str, Any]) -> str:
    """The JSON text a ConfigMap carries (stable key order, so that a diff shows only real changes)."""
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard's panels."""
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
