"""The alert rules (pure): Prometheus rule groups for the GPU pools and Karpenter.

`alert_groups(...)` returns the `groups` of a Prometheus rule file; the same list is the `spec.groups` of a
PrometheusRule (`inCluster`) and the `data` of an Amazon Managed Service for Prometheus rule group namespace
(`managed`). Every expression selects only metrics that the pinned exporters export (`facts.metrics`), and
`tests/observability/test_alert_rules.py` runs `promtool test rules` with series that fire and do not fire
each alert.

What is and is not observable from inside the cluster:
- GPU faults: the DCGM exporter, with the collectors file the GPU Operator configures, exports the last XID
  (`DCGM_FI_DEV_XID_ERRORS`) and the row-remapping state of the GPU memory. DCGM's own health verdict
  (`DCGM_EXP_GPU_HEALTH_STATUS`) is not in that file, so a failing exporter (its `/health` probe is what
  takes it down) is alerted on instead.
- The interruption queue: Karpenter exports how long each message waited on the queue before it processed
  it (`karpenter_interruption_message_queue_duration_seconds`) and the errors of its interruption controller.
  The queue's own depth and oldest-message age are CloudWatch metrics of SQS, which nothing in the cluster
  scrapes; a controller that stops reading the queue is caught by `KarpenterControllerDown` and the errors.
- Stuck GPU nodes: `GpuNodeNotInitialized` warns while a node is stuck; the GPU node guard deletes it after
  the pool's `initializationTimeout` (`GpuNodeGuardReplacedNodeClaims` says so), and `GpuNodeGuardDown`
  says when nothing would.
"""

from collections.abc import Sequence
from typing import Any

from components.observability.queries import (
    CONDITION_POOL_LABEL,
    DCGM_JOB,
    KARPENTER_GPU,
    Targets,
    any_of,
    leader_max,
    matchers,
    pending_gpu_pods,
)

RUNBOOK = "docs/observability.md#alerts"
"""Where the alerts' runbook hints are expanded (the project's documentation page)."""

GPU_GROUP = "gpu-eks.gpus"
KARPENTER_GROUP = "gpu-eks.karpenter"

NODE_NOT_INITIALIZED_SECONDS = 15 * 60
"""A GPU node Karpenter launched that is not initialized after this long: the GPU Operator has not made
`nvidia.com/gpu` allocatable (or a startup taint stays). Launch, boot and operator setup take 3-8 minutes."""
GUARD_STALE_SECONDS = 5 * 60
"""No successful sync of the GPU node guard for this long: it cannot list or act (its sync interval is at
most 5 minutes, and its own health check fails after three intervals)."""
XID_WINDOW = "15m"
"""How long `GpuXidError` fires after a GPU reported a new XID: long enough to be notified, short enough that
a harmless XID does not keep it firing (the exporter's gauge keeps the last code until it restarts)."""
INTERRUPTION_DELAY_SECONDS = 30
"""99th percentile of the time interruption messages wait on the queue: a spot interruption warning gives
two minutes, and every second waited is a second less to drain the node."""


def _rule(
    name: str, expr: str, *, for_: str, severity: str, summary: str, description: str
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description, "runbook_url": RUNBOOK},
    }


def gpu_rules(*, gpu_pools: Sequence[str], gpu_operator_namespace: str) -> list[dict[str, Any]]:
    """Alerts on the GPUs and the GPU nodes of `gpu_pools`."""
    pools = any_of(gpu_pools)
    by = ["nodepool", "resource_type"]
    usage = leader_max("karpenter_nodepools_usage", by, resource_type=KARPENTER_GPU, nodepool=pools)
    limit = leader_max("karpenter_nodepools_limit", by, resource_type=KARPENTER_GPU, nodepool=pools)
    return [
        # DCGM_FI_DEV_XID_ERRORS is a gauge of the last XID, not a count: fire while a series changed within
        # XID_WINDOW and now holds a non-zero code (the left side, so `$value` is the XID). An exporter
        # restart does not fire it: a new pod's series starts at 0 or at the code DCGM still holds (no
        # change), and a restarted container's drop to 0 is a change to 0. Missed: the same code again (the
        # gauge does not change), all but the last of several codes within one scrape interval, and a code
        # already in a series' first sample (an XID before the exporter's first scrape).
        _rule(
            "GpuXidError",
            "max by (node, gpu) ((DCGM_FI_DEV_XID_ERRORS != 0) and "
            f"(changes(DCGM_FI_DEV_XID_ERRORS[{XID_WINDOW}]) > 0))",
            for_="0m",
            severity="warning",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }}",
            description=(
                f"The NVIDIA driver reported XID {{{{ $value }}}} on this GPU in the last {XID_WINDOW} (the "
                "alert resolves after that; the same code again does not fire it anew, and the overview "
                "dashboard shows each GPU's last XID). NVIDIA's XID catalog "
                "(docs.nvidia.com/deploy/xid-errors) gives each code's immediate action: restart the job for "
                "application faults; for a GPU reset or node replacement, drain the node and delete its "
                "NodeClaim so Karpenter replaces the instance."
            ),
        ),
        _rule(
            "GpuRowRemapFailure",
            "max by (node, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            for_="0m",
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} cannot remap failing memory rows",
            description=(
                "Row remapping failed: the GPU's memory has uncorrectable faults it can no longer hide. "
                "Drain the "
                "node and delete its NodeClaim so Karpenter replaces the instance; EC2 retires the host."
            ),
        ),
        _rule(
            "GpuUncorrectableMemoryError",
            "max by (node, gpu) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h])) > 0",
            for_="0m",
            severity="warning",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} remapped rows after uncorrectable errors",
            description=(
                "An uncorrectable memory error was remapped in the last hour; the remapping takes effect "
                "only "
                "after a GPU reset. Drain the node at the next chance (delete its NodeClaim to replace it)."
            ),
        ),
        _rule(
            "DcgmExporterDown",
            f"up{matchers(job=DCGM_JOB, namespace=gpu_operator_namespace)} == 0",
            for_="10m",
            severity="warning",
            summary="No GPU metrics from {{ $labels.node }} for 10 minutes",
            description=(
                "The DCGM exporter on this node does not answer: DCGM lost the GPUs, the driver is wedged, "
                "or the "
                "exporter crashed (kubectl -n {{ $labels.namespace }} logs {{ $labels.pod }}). The node's "
                "GPU "
                "panels are empty and its XID alerts cannot fire meanwhile."
            ),
        ),
        _rule(
            "GpuNodeNotInitialized",
            f"max by (name, {CONDITION_POOL_LABEL}) "
            "(operator_nodeclaim_status_condition_current_status_seconds"
            f"{matchers(type='Initialized', status='!True', **{CONDITION_POOL_LABEL: pools})})"
            f" > {NODE_NOT_INITIALIZED_SECONDS}",
            for_="0m",
            severity="warning",
            summary="GPU NodeClaim {{ $labels.name }} of pool {{ $labels." + CONDITION_POOL_LABEL + " }} "
            "is not initialized after 15 minutes",
            description=(
                "Karpenter launched the instance but nvidia.com/gpu is not allocatable yet, so no GPU pod "
                "runs there and Karpenter will not consolidate it: it bills and does nothing. Usually the "
                "GPU Operator has not finished on the node (kubectl -n gpu-operator get pods -o wide; a "
                "taint its DaemonSets do not tolerate, missing NFD labels, a failing validator), or on a MIG "
                "pool the MIG manager has not partitioned the GPUs. The GPU node guard deletes the NodeClaim "
                "once the pool's initializationTimeout has passed."
            ),
        ),
        _rule(
            "GpuPoolAtLimitWithPendingPods",
            f"({usage} >= {limit}) and on () ({pending_gpu_pods()} > 0)",
            for_="10m",
            severity="warning",
            summary="GPU pool {{ $labels.nodepool }} is at its {{ $labels.resource_type }} limit while GPU "
            "pods wait",
            description=(
                "The pool has provisioned its limit of this GPU resource, so Karpenter launches no more "
                "nodes for it, and pods asking for GPUs have been unschedulable for 10 minutes. Raise the "
                "pool's limits.nvidia.com/gpu in the stack config, or free GPUs (time-sliced and MIG pools "
                "count slices: see docs/gpu-operator.md)."
            ),
        ),
    ]


def gpu_node_guard_rules(*, gpu_pools: Sequence[str], namespace: str, job: str) -> list[dict[str, Any]]:
    """Alerts on the GPU node guard (installed with any GPU pool): what its watchdog deleted, and the guard
    itself not syncing."""
    deleted = matchers(nodepool=any_of(gpu_pools))
    target = matchers(job=job, namespace=namespace)
    return [
        _rule(
            "GpuNodeGuardReplacedNodeClaims",
            f"sum by (nodepool) (increase(gpu_eks_node_guard_nodeclaims_deleted_total{deleted}[1h])) > 0",
            for_="0m",
            severity="warning",
            summary="The GPU node guard deleted GPU NodeClaims of pool {{ $labels.nodepool }} that never "
            "initialized",
            description=(
                "In the last hour the guard deleted NodeClaims of this pool (about {{ $value | humanize }}) "
                "that were still not initialized after the pool's initializationTimeout; Karpenter launched "
                "others for the pending pods. Each one billed until then. The guard's Warning events say why "
                "(kubectl get events -n default --field-selector reason=InitializationTimeout); repeated "
                "deletions mean the pool's nodes cannot become ready (GPU Operator, MIG manager, AMI): "
                "see GpuNodeNotInitialized."
            ),
        ),
        _rule(
            "GpuNodeGuardDown",
            f"absent(up{target} == 1) or "
            f"(time() - max(gpu_eks_node_guard_last_sync_success_timestamp_seconds{target}) > "
            f"{GUARD_STALE_SECONDS})",
            for_="5m",
            severity="warning",
            summary="The GPU node guard has not synced for 5 minutes",
            description=(
                "The guard is down or cannot list Nodes and NodeClaims: MIG nodes keep their startup taint "
                "(no pod lands on them) and GPU NodeClaims that never initialize bill until expireAfter. "
                f"kubectl -n {namespace} logs deploy/gpu-node-guard names the cause (API access, RBAC)."
            ),
        ),
    ]


def karpenter_rules(
    *, karpenter_namespace: str, karpenter_job: str, interruption_handling: bool
) -> list[dict[str, Any]]:
    """Alerts on the Karpenter controller and, with interruption handling, its interruption queue."""
    target = matchers(job=karpenter_job, namespace=karpenter_namespace)
    interruption_errors = matchers(
        job=karpenter_job, namespace=karpenter_namespace, controller="interruption"
    )
    rules = [
        _rule(
            "KarpenterControllerDown",
            f"absent(up{target} == 1)",
            for_="5m",
            severity="critical",
            summary="No Karpenter controller has been reachable for 5 minutes",
            description=(
                "Nothing launches nodes for pending pods, nothing consolidates idle GPU nodes (they keep "
                "billing) "
                f"and interruption warnings go unhandled. kubectl -n {karpenter_namespace} get pods "
                "-l app.kubernetes.io/name=karpenter; its logs name the cause (IAM, the API server, OOM)."
            ),
        ),
    ]
    if interruption_handling:
        rules += [
            _rule(
                "KarpenterInterruptionMessagesDelayed",
                "histogram_quantile(0.99, sum by (le) "
                f"(rate(karpenter_interruption_message_queue_duration_seconds_bucket{target}[10m])))"
                f" > {INTERRUPTION_DELAY_SECONDS}",
                for_="5m",
                severity="warning",
                summary="Interruption messages wait {{ $value | humanizeDuration }} on the queue (p99)",
                description=(
                    "Karpenter reads spot interruption warnings and health events late, leaving less of the "
                    "two "
                    "minutes to drain nodes. The controller is overloaded or throttled by SQS (check its CPU "
                    "limit and aws_sdk_go_request_retry_count)."
                ),
            ),
            _rule(
                "KarpenterInterruptionQueueErrors",
                f"sum(rate(controller_runtime_reconcile_errors_total{interruption_errors}[5m])) > 0",
                for_="15m",
                severity="warning",
                summary="Karpenter's interruption controller has been failing for 15 minutes",
                description=(
                    "The controller cannot read or delete messages of the interruption queue, so messages "
                    "pile "
                    "up and interruptions go unhandled. Its logs say why: usually the queue policy or the "
                    "controller role's sqs:ReceiveMessage/DeleteMessage permissions."
                ),
            ),
        ]
    return rules


def alert_groups(targets: Targets) -> list[dict[str, Any]]:
    """The rule groups: GPU and GPU node guard alerts (only with GPU pools) and Karpenter alerts."""
    groups = []
    if targets.gpu_pools:
        rules = gpu_rules(gpu_pools=targets.gpu_pools, gpu_operator_namespace=targets.gpu_operator_namespace)
        rules += gpu_node_guard_rules(
            gpu_pools=targets.gpu_pools,
            namespace=targets.gpu_node_guard_namespace,
            job=targets.gpu_node_guard_job,
        )
        groups.append({"name": GPU_GROUP, "rules": rules})
    groups.append(
        {
            "name": KARPENTER_GROUP,
            "rules": karpenter_rules(
                karpenter_namespace=targets.karpenter_namespace,
                karpenter_job=targets.karpenter_job,
                interruption_handling=targets.interruption_handling,
            ),
        }
    )
    return groups
