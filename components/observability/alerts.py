"""The alert rules (pure): Prometheus rule groups for the GPU pools, Karpenter and the alerting path itself.

`alert_groups(...)` returns the `groups` of a Prometheus rule file; the same list is the `spec.groups` of a
PrometheusRule (`inCluster`) and the `data` of an Amazon Managed Service for Prometheus rule group namespace
(`managed`). Every expression selects only metrics that the pinned exporters export (`facts.metrics`), and
`tests/observability/test_alert_rules.py` runs `promtool test rules` with series labelled as the exporters and
ServiceMonitors label them, that fire and do not fire each alert.

Each alert names what needs action (the pool, node, GPU or namespace), says what to do, and links its
runbook section in docs/observability.md. Pool-specific thresholds come from `pools.alerting`: the smallest
node each pool can launch, the GPU node guard's timeout per pool, `consolidateAfter`.

What is and is not observable from inside the cluster:
- GPU faults: the DCGM exporter, with the collectors file the GPU Operator configures, exports the last XID
  (`DCGM_FI_DEV_XID_ERRORS`) and the row-remapping state of the GPU memory. DCGM's own health verdict
  (`DCGM_EXP_GPU_HEALTH_STATUS`) is not in that file, so a failing or missing exporter is alerted on instead.
- The interruption queue: Karpenter exports how long each message waited on the queue before it processed
  it (`karpenter_interruption_message_queue_duration_seconds`) and the errors of its interruption controller.
  The queue's own depth and oldest-message age are CloudWatch metrics of SQS, which nothing in the cluster
  scrapes; a controller that stops reading the queue is caught by `KarpenterControllerDown` and the errors.
- Why a pod is unschedulable: Karpenter says it in Events (`FailedScheduling`, `NoCompatibleInstanceTypes`)
  that no exporter turns into series; the alerts see that GPU pods wait, for which pool, and whether that
  pool is at its limits, and their descriptions say where the reason is written.
"""

from collections.abc import Sequence
from typing import Any

from components.observability.queries import (
    CONDITION_POOL_LABEL,
    DCGM_JOB,
    KARPENTER_GPU,
    KSM_GPU,
    KSM_POOL_LABEL,
    PROMETHEUS_JOB,
    Targets,
    any_of,
    leader_max,
    matchers,
    pending_gpu_pod_series,
    pool_launch_blocked,
    pool_pods,
    with_label,
)
from config.types import go_duration
from facts.controller_runtime import RETRY_CAP_SECONDS
from facts.prometheus_stack import AMP_RULE_EVALUATION_SECONDS, SCRAPE_INTERVAL_SECONDS
from facts.xid import FATAL_XIDS
from pools.alerting import PoolAlerting

RUNBOOK = "docs/observability.md"
"""The page whose sections are the alerts' runbooks (`runbook_url` is `<page>#<alert name, lower-cased>`)."""

GPU_GROUP = "gpu-eks.gpus"
POOL_GROUP = "gpu-eks.pools"
KARPENTER_GROUP = "gpu-eks.karpenter"
META_GROUP = "gpu-eks.alerting"

WATCHDOG = "Watchdog"
"""Always firing: the dead man's switch an external heartbeat service watches (`severity: none`)."""
AGENT_DOWN = "PrometheusAgentDown"

GUARD_STALE_SECONDS = 5 * 60
"""No successful sync of the GPU node guard for this long: it cannot list or act (its sync interval is at
most 5 minutes, and its own health check fails after three intervals)."""
XID_WINDOW = "15m"
"""How long `GpuXidError` fires after a GPU reported a new application XID: long enough to be notified, short
enough that it clears (the exporter's gauge keeps the last code until it restarts)."""
FATAL_XID_MEMORY = "24h"
DCGM_STEP = "30s"
"""The DCGM exporter's collection interval (`-c 30000`): the resolution of subqueries over its gauges."""
FATAL_XID_RECORDED = "gpu_eks:dcgm_fatal_xid:max5m"
"""`GpuFatalXidError` remembers a fatal code this long even when a later code (often XID 45, the cleanup of
the processes that died) replaced it in the exporter's gauge, or the exporter restarted. A recording rule
keeps the fatal codes each GPU reported over the last 5 minutes, read at the exporter's collection interval
(dcgm-exporter `-c 30000`) so no value it reported is skipped whatever the evaluation interval (up to 5
minutes); the alert looks back over that record, which reads a GPU's record points once per evaluation,
where a 24-hour subquery over the raw gauge would re-evaluate 2,880. While the gauge still holds the fatal
code the alert fires however old it is; it resolves once the node is gone. Each record point carries the
instance it was read on (`provider_id`, joined from kube_node_info at that step), and the memory only counts
for that instance: a replacement that gets the same private IP, so the same node name, starts clean."""
INTERRUPTION_DELAY_SECONDS = 30
"""99th percentile of the time interruption messages wait on the queue: a spot interruption warning gives
two minutes, and every second waited is a second less to drain the node."""
IDLE_ENGINE_SHARE = 0.05
IDLE_WINDOW = "1h"
"""A GPU (or MIG device) held by a pod whose graphics engine was active less than this share of the time over
this window is idle (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, 0 to 1)."""
PENDING_UNMATCHED_SECONDS = 15 * 60
"""GPU pods that no GPU pool can take (their nodeSelector and tolerations fit none) never schedule: a
quarter hour rules out a pool being added or a selector being fixed meanwhile."""
EXPORTER_MISSING_SECONDS = 15 * 60
"""An initialized GPU node without a DCGM exporter target for this long: the DaemonSet's pod starts once the
operator's validations pass, minutes after the node is initialized."""
TARGET_DOWN_FOR_SECONDS = 5 * 60
"""How long a target (Karpenter, the GPU node guard) must be absent before its `...Down` alert fires."""
GROUP_WAIT_SECONDS = 30
"""The Alertmanager waits this long before it sends a new group's first notification (routing.py)."""
AGENT_DOWN_LEAD_SECONDS = SCRAPE_INTERVAL_SECONDS + AMP_RULE_EVALUATION_SECONDS + GROUP_WAIT_SECONDS
"""How much sooner `PrometheusAgentDown` must fire than the alerts it inhibits: when the agent stops, each
target's last sample may be a scrape interval older than the agent's own (so it goes absent sooner), the
workspace evaluates the groups up to a minute apart, and the inhibition must be in place before the target's
group wait ends. Otherwise `KarpenterControllerDown` pages first, for a Karpenter that is only unseen."""
AGENT_DOWN_FOR = go_duration(TARGET_DOWN_FOR_SECONDS - AGENT_DOWN_LEAD_SECONDS)
RETRY_WINDOW_SECONDS = -(-(RETRY_CAP_SECONDS + 2 * SCRAPE_INTERVAL_SECONDS) // 60) * 60
"""The window over which a controller's reconcile errors are counted: a reconcile that keeps failing is
retried at most `RETRY_CAP_SECONDS` apart (controller-runtime's backoff), and an error shows as a step between
two scrapes, so every window this long holds one (the cap plus a scrape interval on each side, in whole
minutes: 18m). A shorter window (a 5m rate) empties between retries once they are minutes apart, and the
alert's `for` starts again: it would never fire for a controller that never recovers."""
RETRY_ERRORS_FOR_SECONDS = RETRY_WINDOW_SECONDS + 5 * 60
"""How long reconcile errors must be seen in every window before the alert fires: a single error is seen for
less than a window, and the quick retries of a failure that clears within 5 minutes (SQS throttling, a brief
outage) for less than this. A controller that keeps failing pages about 25 minutes after its first error."""

_WAIT_REASONS = (
    "kubectl describe pod names the reason in its events: Karpenter's FailedScheduling (incompatible with "
    "every NodePool's requirements, a taint not tolerated, no instance type with enough of what it "
    "requests) and launch failures (InsufficientCapacity for the pool's instance types and zones, an "
    "unavailable offering); karpenter_scheduler_unschedulable_pods_count counts the pods Karpenter found no "
    "place for"
)


def _rule(
    name: str,
    expr: str,
    *,
    for_: str,
    severity: str,
    summary: str,
    description: str,
    cluster: str,
    pool: str | None = None,
) -> dict[str, Any]:
    """One alert rule; `pool`: a rule of one pool's own (its thresholds), labelled with it (`nodepool`), which
    also keeps the rules of several pools under one alert name apart."""
    labels = {"severity": severity, "cluster": cluster} | ({"nodepool": pool} if pool else {})
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": labels,
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOK}#{name.lower()}",
        },
    }


def _xid_is(codes: Sequence[int]) -> str:
    return " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {code}" for code in codes)


def _on_pools(selector: str, pools: Sequence[str]) -> str:
    """Series of `selector` (carrying `node`) from nodes of `pools`, with the pool as `nodepool`."""
    nodes = f"max by (node, {KSM_POOL_LABEL}) (kube_node_labels{matchers(**{KSM_POOL_LABEL: any_of(pools)})})"
    joined = f"({selector}) * on (node) group_left ({KSM_POOL_LABEL}) {nodes}"
    return f'label_replace({joined}, "nodepool", "$1", "{KSM_POOL_LABEL}", "(.+)")'


def dcgm_rules(targets: Targets) -> list[dict[str, Any]]:
    """Alerts on the GPUs themselves, from the DCGM exporter (only where a pool's nodes run it)."""
    dcgm_pools = targets.dcgm_pools
    cluster = targets.cluster
    exporter = matchers(job=DCGM_JOB, namespace=targets.gpu_operator_namespace)
    fatal = _xid_is(sorted(FATAL_XIDS))
    listed = ", ".join(str(code) for code in sorted(FATAL_XIDS))
    engine = f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{matchers(exported_pod='!')}"
    held = ["node", "gpu", "GPU_I_ID", "exported_namespace", "exported_pod"]
    allocatable = f"max by (node) (kube_node_status_allocatable{matchers(resource=KSM_GPU)} > 0)"
    idle = f"(avg_over_time({engine}[{IDLE_WINDOW}]) < {IDLE_ENGINE_SHARE}) and {engine} offset {IDLE_WINDOW}"
    return [
        # Before the alert that reads it: the rules of a group are evaluated in order.
        # The record carries the instance (kube_node_info's provider_id): EKS names a node by its private IP,
        # and a replacement that gets the address within FATAL_XID_MEMORY must not inherit the fault.
        {
            "record": FATAL_XID_RECORDED,
            "expr": f"max by (node, gpu, provider_id) (max_over_time((({fatal}) * on (node) group_left "
            f"(provider_id) max by (node, provider_id) (kube_node_info))[5m:{DCGM_STEP}]))",
        },
        _rule(
            "GpuFatalXidError",
            f"max by (node, gpu) (({fatal}) or (max_over_time({FATAL_XID_RECORDED}[{FATAL_XID_MEMORY}]) "
            "and on (node, provider_id) kube_node_info)) and on (node) max by (node) (kube_node_info)",
            for_="0m",
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} reported fatal XID {{ $value }}: "
            "replace the node",
            description=(
                f"The NVIDIA driver reported XID {{{{ $value }}}}, one of the codes ({listed}) after which "
                "the GPU needs a reset or the node a reboot (NVIDIA's XID catalog). Jobs on it fail or hang. "
                "Drain the node (kubectl drain {{ $labels.node }} --ignore-daemonsets "
                "--delete-emptydir-data) and delete its NodeClaim (kubectl get nodeclaims -o wide shows "
                "which) so Karpenter replaces the instance. The alert stays firing while the node exists and "
                "resolves when it is gone."
            ),
            cluster=cluster,
        ),
        # DCGM_FI_DEV_XID_ERRORS is a gauge of the last XID, not a count: fire while a GPU's gauge changed
        # within XID_WINDOW and now holds a non-zero, non-fatal code (the left side, so `$value` is the XID).
        # The change is looked for per GPU (its UUID, which a replacement node reusing the name does not
        # share), not per series: the exporter labels a GPU's series with the pod that holds it, and a job
        # killed by the fault releases its GPU, so the code often first shows on a new series (no
        # `exported_pod`), where a per-series `changes()` sees nothing. An exporter restart
        # does not fire it: the GPU's gauge goes on at 0 or at the code DCGM still holds (no change), and a
        # restarted container's drop to 0 is a change to 0. Missed: the same code again (the gauge does not
        # change), all but the last of several codes within one collection interval.
        _rule(
            "GpuXidError",
            f"max by (node, gpu) ((DCGM_FI_DEV_XID_ERRORS != 0) unless ({fatal})) and on (node, gpu) "
            f"(changes((max by (node, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS))[{XID_WINDOW}:{DCGM_STEP}]) > 0)",
            for_="0m",
            severity="warning",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} reported application XID {{ $value }}",
            description=(
                f"The NVIDIA driver reported XID {{{{ $value }}}} on this GPU in the last {XID_WINDOW}: an "
                "application fault (e.g. 13 graphics engine exception, 31 MMU fault, 43 or 45 a job that was "
                "stopped); the GPU stays usable. Look at the job that used the GPU (its logs, CUDA errors) "
                "and "
                "restart it. The alert clears after that time; repeated XIDs from many jobs on one GPU "
                "suggest the hardware after all (see docs.nvidia.com/deploy/xid-errors)."
            ),
            cluster=cluster,
        ),
        _rule(
            "GpuRowRemapFailure",
            "max by (node, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            for_="0m",
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} cannot remap failing memory rows",
            description=(
                "Row remapping failed: the GPU's memory has uncorrectable faults it can no longer hide. "
                "Drain "
                "the node and delete its NodeClaim so Karpenter replaces the instance; EC2 retires the host."
            ),
            cluster=cluster,
        ),
        _rule(
            "GpuUncorrectableMemoryError",
            # Per GPU (its UUID), not per series, as GpuXidError: the error that remaps a row often ends
            # the job holding the GPU, and the count goes on in a series without its pod.
            "max by (node, gpu) (increase((max by (node, gpu, UUID) "
            f"(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS))[1h:{DCGM_STEP}])) > 0",
            for_="0m",
            severity="warning",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} remapped rows after uncorrectable errors",
            description=(
                "An uncorrectable memory error was remapped in the last hour; the remapping takes effect "
                "only "
                "after a GPU reset. Drain the node at the next chance (delete its NodeClaim to replace it)."
            ),
            cluster=cluster,
        ),
        _rule(
            "DcgmExporterDown",
            f"up{exporter} == 0",
            for_="10m",
            severity="warning",
            summary="No GPU metrics from {{ $labels.node }} for 10 minutes",
            description=(
                "The DCGM exporter on this node does not answer: DCGM lost the GPUs, the driver is wedged, "
                "or "
                "the exporter crashed (kubectl -n {{ $labels.namespace }} logs {{ $labels.pod }}). The "
                "node's "
                "GPU panels are empty and its XID alerts cannot fire meanwhile."
            ),
            cluster=cluster,
        ),
        _rule(
            "GpuNodeWithoutDcgmExporter",
            f"max by (nodepool, node) ({_on_pools(allocatable, dcgm_pools)}) unless on (node) up{exporter}",
            for_=go_duration(EXPORTER_MISSING_SECONDS),
            severity="warning",
            summary="GPU node {{ $labels.node }} of pool {{ $labels.nodepool }} has no DCGM exporter",
            description=(
                "The node offers GPUs but no DCGM exporter is scraped from it: its GPU faults (XIDs, memory "
                "errors) and utilisation go unseen. The exporter's DaemonSet pod is missing or not ready: "
                f"kubectl -n {targets.gpu_operator_namespace} get pods -o wide --field-selector "
                "spec.nodeName={{ $labels.node }}; a taint the operator's daemonsets do not tolerate, or a "
                "failing operator validation, keeps it off."
            ),
            cluster=cluster,
        ),
        _rule(
            "GpuAllocatedButIdle",
            f"max by (nodepool, {', '.join(held)}) ({_on_pools(idle, dcgm_pools)})",
            for_="0m",
            severity="warning",
            summary="Pod {{ $labels.exported_namespace }}/{{ $labels.exported_pod }} holds a GPU it has "
            f"barely used for {IDLE_WINDOW}",
            description=(
                "GPU {{ $labels.gpu }} (MIG instance {{ $labels.GPU_I_ID }}, if any) on node "
                "{{ $labels.node }} of pool {{ $labels.nodepool }} is allocated to this pod, but its "
                "graphics "
                f"engine was active {{{{ $value | humanizePercentage }}}} of the last {IDLE_WINDOW} (under "
                f"{IDLE_ENGINE_SHARE:.0%}). The GPU bills and no other pod can use it: ask the owner to "
                "scale the workload down or to release the GPU (a notebook left open, a stuck job); "
                "time-slicing or MIG suits light loads."
            ),
            cluster=cluster,
        ),
    ]


def pool_rules(pool: PoolAlerting, targets: Targets) -> list[dict[str, Any]]:
    """The alerts whose thresholds are the pool's own: launch blocked by its limits, NodeClaims that never
    initialize, nodes without GPU work, pods that wait for it."""
    name = pool.name
    cluster = targets.cluster
    pods = pool_pods(pool, pending_gpu_pod_series())
    blocked = pool_launch_blocked(pool)
    rules = []
    waiting = f"count by (nodepool, namespace) ({with_label(pods, 'nodepool', name)})"

    def gpus(metric: str) -> str:
        return leader_max(metric, ["nodepool", "node_name"], nodepool=name, resource_type=KARPENTER_GPU)

    if blocked is not None:
        smallest = ", ".join(node.instance_type for node in pool.smallest_nodes)
        limits = ", ".join(f"{resource} {amount}" for resource, amount in pool.limits.items())
        rules.append(
            _rule(
                "GpuPoolAtLimitWithPendingPods",
                f"count by (nodepool) ({with_label(pods, 'nodepool', name)}) and on (nodepool) ({blocked})",
                for_="10m",
                severity="warning",
                summary=f"GPU pool {name} is at its limits while {{{{ $value }}}} GPU pods wait for it",
                description=(
                    f"What is left of the pool's limits ({limits}) is less than the smallest node it can "
                    f"launch ({smallest}) needs of at least one of them, so Karpenter launches nothing for "
                    "it, "
                    "and GPU pods that only this pool can take (their nodeSelector names it, or they "
                    "tolerate "
                    "its taints and name no pool) have been unschedulable for 10 minutes. Raise the binding "
                    f"limit of nodePools[{name}].limits in the stack config (the pool dashboard's Usage "
                    "against the pool's limits shows which), or free capacity: time-sliced and MIG pools "
                    "count slices (docs/gpu-operator.md)."
                ),
                cluster=cluster,
                pool=name,
            )
        )
        # Pods the pool could take, waiting while it is not blocked: something else holds them.
        waiting = f"{waiting} unless on (nodepool) ({blocked})"
    rules += [
        _rule(
            "GpuPodsUnschedulable",
            waiting,
            for_=go_duration(pool.not_initialized_seconds),
            severity="warning",
            summary=f"{{{{ $value }}}} GPU pods in {{{{ $labels.namespace }}}} have waited for pool {name} "
            f"longer than its nodes take to start",
            description=(
                f"The pods could run on pool {name} and it is not at its limits, yet they have been "
                f"unschedulable for {go_duration(pool.not_initialized_seconds)}, longer than a node of the "
                "pool takes to launch and initialize. "
                + _WAIT_REASONS
                + ". kubectl -n {{ $labels.namespace }} get pods --field-selector=status.phase=Pending."
            ),
            cluster=cluster,
            pool=name,
        ),
        _rule(
            "GpuNodeNotInitialized",
            "max by (name) (operator_nodeclaim_status_condition_current_status_seconds"
            f"{matchers(type='Initialized', status='!True', **{CONDITION_POOL_LABEL: name})})"
            f" > {pool.not_initialized_seconds}",
            for_="0m",
            severity="warning",
            summary="GPU NodeClaim {{ $labels.name }} of pool "
            + name
            + f" is not initialized after {go_duration(pool.not_initialized_seconds)}",
            description=(
                "Karpenter launched the instance but nvidia.com/gpu is not allocatable (or a startup taint "
                "stays), so no GPU pod runs there and Karpenter will not consolidate it: it bills and does "
                "nothing. "
                + (
                    "The GPU node guard should have deleted it "
                    f"{go_duration(pool.initialization_timeout_seconds)} "
                    "after launch and did not: see GpuNodeGuardDown, and its events (kubectl get events -n "
                    "default --field-selector involvedObject.name={{ $labels.name }}). "
                    if pool.initialization_timeout_seconds is not None
                    else "The pool's initializationTimeout is Never, so nothing replaces it. "
                )
                + "Usually the GPU Operator has not finished on the node (kubectl -n "
                f"{targets.gpu_operator_namespace} get pods -o wide: a taint its DaemonSets do not tolerate, "
                "missing NFD labels, a failing validator) or, on a MIG pool, the MIG manager has not "
                "partitioned the GPUs. Delete the NodeClaim (kubectl delete nodeclaim {{ $labels.name }}) "
                "to let Karpenter launch another."
            ),
            cluster=cluster,
            pool=name,
        ),
        _rule(
            "GpuNodeIdle",
            f"max by (nodepool, node_name) ({gpus('karpenter_nodes_allocatable')} > 0) unless on (nodepool, "
            f"node_name) ({gpus('karpenter_nodes_total_pod_requests')} > 0)",
            for_=go_duration(pool.idle_node_seconds),
            severity="warning",
            summary="GPU node {{ $labels.node_name }} of pool " + name + " has had no GPU pod for "
            f"{go_duration(pool.idle_node_seconds)}",
            description=(
                "No pod on this node requests a GPU, yet Karpenter has not removed it (its consolidation "
                "would have by now): a pod that does not request a GPU keeps it (a WhenEmpty pool, or a pod "
                "Karpenter may not evict: karpenter.sh/do-not-disrupt, a PodDisruptionBudget), or a "
                "disruption budget blocks. kubectl get pods -A -o wide --field-selector "
                "spec.nodeName={{ $labels.node_name }} shows what runs there; move it off or delete the "
                "NodeClaim."
            ),
            cluster=cluster,
            pool=name,
        ),
    ]
    return rules


def unmatched_pods_rule(targets: Targets) -> dict[str, Any]:
    """GPU pods that no GPU pool can take: they wait forever, whatever the pools' limits."""
    pending = pending_gpu_pod_series()
    for pool in targets.pools:
        pending = f"({pending} unless on (namespace, pod) {pool_pods(pool, pending_gpu_pod_series())})"
    return _rule(
        "GpuPodsMatchNoPool",
        f"count by (namespace) {pending}",
        for_=go_duration(PENDING_UNMATCHED_SECONDS),
        severity="warning",
        summary="{{ $value }} GPU pods in {{ $labels.namespace }} fit no GPU pool",
        description=(
            f"These pods request GPUs, but no GPU pool ({', '.join(targets.gpu_pools)}) can take them: their "
            "nodeSelector names another pool, or they do not tolerate the taints of any pool's nodes "
            "(nvidia.com/gpu=true:NoSchedule unless the pool says otherwise; see the gpuToleration stack "
            "output). They stay unschedulable until their spec changes. " + _WAIT_REASONS + "."
        ),
        cluster=targets.cluster,
    )


def gpu_node_guard_rules(targets: Targets) -> list[dict[str, Any]]:
    """Alerts on the GPU node guard (installed with any GPU pool): what its watchdog deleted, what its circuit
    breaker holds for a person, and the guard itself not syncing."""
    namespace = targets.gpu_node_guard_namespace
    deleted = matchers(nodepool=any_of(targets.gpu_pools))
    target = matchers(job=targets.gpu_node_guard_job, namespace=namespace)
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
                "deletions mean the pool's nodes cannot become ready (GPU Operator, MIG manager, AMI)."
            ),
            cluster=targets.cluster,
        ),
        _rule(
            "GpuNodeGuardHoldingNodeClaims",
            f"max by (nodepool) (gpu_eks_node_guard_nodeclaims_held{deleted}) > 0",
            for_="5m",
            severity="warning",
            summary="The GPU node guard holds {{ $value }} stuck NodeClaims of pool {{ $labels.nodepool }} "
            "for a person",
            description=(
                "Its circuit breaker is open: the pool's nodes fail alike (gpuNodeGuard."
                "maxConsecutiveDeletions deletions in a row with no node of the pool initializing since, "
                "which holds until one does or a person resets it; more deletions in the last hour than "
                "gpuNodeGuard.maxDeletionsPerHour allows; or over 20 % of the pool uninitialized), so "
                "replacing them would only bill one boot after another. The held NodeClaims keep billing "
                "until someone acts. Find what they share (kubectl get events -n default --field-selector "
                "reason=DeletionHeld; the NodePool's GuardBreakerOpen event; kubectl -n "
                f"{targets.gpu_operator_namespace} get pods -o wide on one of their nodes: a failing "
                "operand, MIG failed, an image that never pulls, one instance type), fix it, then delete "
                "the held NodeClaims (kubectl delete nodeclaim <name>): a replacement that initializes "
                "resets the breaker."
            ),
            cluster=targets.cluster,
        ),
        _rule(
            "GpuNodeGuardDown",
            f"absent(up{target} == 1) or "
            f"(time() - max(gpu_eks_node_guard_last_sync_success_timestamp_seconds{target}) > "
            f"{GUARD_STALE_SECONDS})",
            for_=go_duration(TARGET_DOWN_FOR_SECONDS),
            severity="warning",
            summary="The GPU node guard has not synced for 5 minutes",
            description=(
                "The guard is down or cannot list Nodes and NodeClaims: MIG nodes keep their startup taint "
                "(no pod lands on them) and GPU NodeClaims that never initialize bill until expireAfter. "
                f"kubectl -n {namespace} logs deploy/gpu-node-guard names the cause (API access, RBAC)."
            ),
            cluster=targets.cluster,
        ),
    ]


def karpenter_rules(targets: Targets) -> list[dict[str, Any]]:
    """Alerts on the Karpenter controller and, with interruption handling, its interruption queue."""
    namespace = targets.karpenter_namespace
    target = matchers(job=targets.karpenter_job, namespace=namespace)
    interruption_errors = matchers(job=targets.karpenter_job, namespace=namespace, controller="interruption")
    rules = [
        _rule(
            "KarpenterControllerDown",
            f"absent(up{target} == 1)",
            for_=go_duration(TARGET_DOWN_FOR_SECONDS),
            severity="critical",
            summary="No Karpenter controller has been reachable for 5 minutes",
            description=(
                "Nothing launches nodes for pending pods, nothing consolidates idle GPU nodes (they keep "
                f"billing) and interruption warnings go unhandled. kubectl -n {namespace} get pods "
                "-l app.kubernetes.io/name=karpenter; its logs name the cause (IAM, the API server, OOM)."
            ),
            cluster=targets.cluster,
        ),
    ]
    if targets.interruption_handling:
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
                    "two minutes to drain nodes. The controller is overloaded or throttled by SQS (check its "
                    "CPU limit and aws_sdk_go_request_retry_count)."
                ),
                cluster=targets.cluster,
            ),
            _rule(
                "KarpenterInterruptionQueueErrors",
                f"sum(increase(controller_runtime_reconcile_errors_total{interruption_errors}"
                f"[{go_duration(RETRY_WINDOW_SECONDS)}])) > 0",
                for_=go_duration(RETRY_ERRORS_FOR_SECONDS),
                severity="warning",
                summary="Karpenter's interruption controller keeps failing",
                description=(
                    "The controller cannot read or delete messages of the interruption queue, so messages "
                    "pile up and interruptions go unhandled. Its logs say why: usually the queue policy or "
                    "the controller role's sqs:ReceiveMessage/DeleteMessage permissions."
                ),
                cluster=targets.cluster,
            ),
        ]
    return rules


def meta_rules(targets: Targets) -> list[dict[str, Any]]:
    """The dead man's switch, and (managed) the agent whose absence silences every other rule."""
    rules = [
        _rule(
            WATCHDOG,
            "vector(1)",
            for_="0m",
            severity="none",
            summary="Alerting works: this alert always fires",
            description=(
                "A dead man's switch: it fires all the time, and the alert routing sends it to the heartbeat "
                "service (alerting.heartbeatUrl), which pages when it stops arriving: when rule evaluation, "
                "the Alertmanager or the path to the receivers is broken."
            ),
            cluster=targets.cluster,
        )
    ]
    if targets.managed:
        agent = matchers(job=PROMETHEUS_JOB, namespace=targets.monitoring_namespace)
        rules.append(
            _rule(
                AGENT_DOWN,
                f"absent(up{agent} == 1)",
                for_=AGENT_DOWN_FOR,
                severity="critical",
                summary=f"No metrics from cluster {targets.cluster} reach the workspace",
                description=(
                    "The in-cluster Prometheus agent writes nothing to the workspace, so every alert about "
                    "the "
                    "cluster is blind (those that look for a missing target are held back: Karpenter and the "
                    f"GPU node guard are not known to be down). kubectl -n {targets.monitoring_namespace} "
                    "get "
                    "pods -l app.kubernetes.io/name=prometheus; its logs say why (remote write refused: the "
                    "Pod Identity role's aps:RemoteWrite; OOM; the system nodes)."
                ),
                cluster=targets.cluster,
            )
        )
    return rules


def alert_groups(targets: Targets) -> list[dict[str, Any]]:
    """The rule groups: GPUs (where DCGM reports), per-pool alerts and the GPU node guard (with GPU pools),
    Karpenter, and the alerting path."""
    groups = []
    if targets.pools:
        gpu = dcgm_rules(targets) if targets.dcgm_pools else []
        gpu += gpu_node_guard_rules(targets)
        groups.append({"name": GPU_GROUP, "rules": gpu})
        pool_level = [rule for pool in targets.pools for rule in pool_rules(pool, targets)]
        groups.append({"name": POOL_GROUP, "rules": [*pool_level, unmatched_pods_rule(targets)]})
    groups.append({"name": KARPENTER_GROUP, "rules": karpenter_rules(targets)})
    groups.append({"name": META_GROUP, "rules": meta_rules(targets)})
    return groups
