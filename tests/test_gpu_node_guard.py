"""The GPU node guard: its decisions (pure), the API requests it makes against the RBAC it gets, its metrics,
and the whole chain in a stack with a MIG pool and a Bottlerocket pool (taint on the NodePool, every operand
tolerating it, the guard on the system nodes, manifests valid for Kubernetes)."""

import datetime
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from components.cluster import SYSTEM_NODE_SELECTOR
from components.gpu_node_guard import guard
from components.gpu_node_guard.manifests import (
    CLUSTER_RULES,
    EVENT_NAMESPACE,
    EVENT_RULES,
    KARPENTER_LEASE_RULES,
    KARPENTER_STALE_SECONDS,
    LEADER_RULES,
    METRICS_PORT,
    METRICS_PORT_NAME,
    PRIORITY_CLASS,
    REPLICAS,
    ROLES,
    SCRIPT,
    SETTINGS_ENV,
    manifests,
    role_namespaces,
)
from components.gpu_operator_values import MIG_CONFIG_LABEL, tolerates
from config.errors import ConfigError
from config.gpu_node_guard import (
    DEFAULT_IMAGE,
    DEFAULT_INITIALIZATION_TIMEOUT,
    DEFAULT_MIG_INITIALIZATION_TIMEOUT,
    MIN_INITIALIZATION_TIMEOUT_SECONDS,
    GpuNodeGuardConfig,
)
from config.kubernetes import MIG_PENDING_TAINT
from config.stack import parse_stack_config
from config.types import duration_seconds
from facts.bottlerocket import NVIDIA_SMI_PATH as BOTTLEROCKET_NVIDIA_SMI
from facts.gpu_operator import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    HOST_NVIDIA_SMI_PATHS,
    MIG_CONFIG_STATE_LABEL,
    MIG_STATE_FAILED,
    MIG_STATE_SUCCESS,
    MIG_STATES,
    OPERAND_DAEMONSETS,
    RUNTIME_CLASS_HANDLERS,
)
from facts.karpenter_lifecycle import (
    CONDITION_INITIALIZED,
    CONDITION_LAUNCHED,
    INSTANCE_TYPE_LABEL,
    KNOWN_EPHEMERAL_TAINT_PREFIXES,
    KNOWN_EPHEMERAL_TAINTS,
    LAUNCH_TIMEOUT_SECONDS,
    LEADER_ELECTION_LEASE,
    LEADER_LEASE_DURATION_SECONDS,
    LEADER_RENEW_DEADLINE_SECONDS,
    LEADER_RETRY_PERIOD_SECONDS,
    NODEPOOL_LABEL,
    NODEPOOL_OWNER_KIND,
    REGISTRATION_TIMEOUT_SECONDS,
    REPAIR_POLICIES,
    REPAIR_UNHEALTHY_PERCENT,
)
from scripts import guard_memory
from synth.runner import ProgramRun
from tests.helpers import config, run, run_failing

NOW = datetime.datetime(2026, 9, 1, 12, 0, tzinfo=datetime.UTC)
TAINT = guard.Taint(MIG_PENDING_TAINT.key, MIG_PENDING_TAINT.value or "", MIG_PENDING_TAINT.effect)
GUARD_CONFIG = guard.GuardConfig(
    pools={
        "mig": guard.PoolPolicy(initialization_timeout_seconds=1200, mig_gate=True),
        "plain": guard.PoolPolicy(initialization_timeout_seconds=1200, mig_gate=False),
        "patient": guard.PoolPolicy(initialization_timeout_seconds=None, mig_gate=False),
    },
    mig_taint=TAINT,
    karpenter_lease=guard.LeaseRef("kube-system", LEADER_ELECTION_LEASE),
)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GATE = {"key": TAINT.key, "value": TAINT.value, "effect": TAINT.effect}
PLUGIN = guard.DEVICE_PLUGIN_DEPLOY_LABEL


def stamp(minutes_ago: float) -> str:
    return (NOW - datetime.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def karpenter_lease(renewed_minutes_ago: float = 0, leading_minutes: float = 60, holder: str = "k-1") -> Any:
    """Karpenter's leader Lease as the API server returns it (MicroTime with microseconds)."""
    return {
        "metadata": {"name": LEADER_ELECTION_LEASE, "namespace": "kube-system", "resourceVersion": "7"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": (NOW - datetime.timedelta(minutes=leading_minutes)).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"
            ),
            "renewTime": (NOW - datetime.timedelta(minutes=renewed_minutes_ago)).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"
            ),
        },
    }


LEASE = karpenter_lease()


def node(
    name: str,
    pool: str,
    *,
    state: str | None = None,
    taints: tuple[Mapping[str, Any], ...] = (),
    ready: str = "True",
    gpus: str = "8",
    plugin: str | None = "true",
    progress: guard.MigProgress | None = None,
) -> Any:
    labels = {NODEPOOL_LABEL: pool, "nvidia.com/mig.config": "all-1g.10gb"}
    if state is not None:
        labels["nvidia.com/mig.config.state"] = state
    if plugin is not None:
        labels[PLUGIN] = plugin
    annotations = {"node.alpha.kubernetes.io/ttl": "0"}
    if progress is not None:
        annotations[guard.MIG_PROGRESS_ANNOTATION] = progress.to_json()
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels, "annotations": annotations},
        "spec": {"taints": [dict(t) for t in taints], "providerID": f"aws:///us-west-2a/i-{name}"},
        "status": {
            "conditions": [{"type": "Ready", "status": ready}],
            "allocatable": {"cpu": "95", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": gpus},
        },
    }


def nodeclaim(
    name: str,
    pool: str,
    *,
    launched_minutes_ago: float,
    initialized: str = "Unknown",
    deleting: bool = False,
    startup_taints: tuple[Mapping[str, Any], ...] = (),
    node_name: str | None = None,
) -> Any:
    metadata: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": f"rv-{name}",
        "labels": {NODEPOOL_LABEL: pool},
        "ownerReferences": [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": pool, "uid": f"np-{pool}"}
        ],
    }
    if deleting:
        metadata["deletionTimestamp"] = stamp(0)
    return {
        "metadata": metadata,
        "spec": {
            "startupTaints": [dict(t) for t in startup_taints],
            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1", "pods": "3"}},
        },
        "status": {
            "providerID": f"aws:///us-west-2a/i-{node_name or name}",
            "conditions": [
                {
                    "type": CONDITION_LAUNCHED,
                    "status": "True",
                    "lastTransitionTime": stamp(launched_minutes_ago),
                },
                {
                    "type": CONDITION_INITIALIZED,
                    "status": initialized,
                    "reason": "ResourceNotRegistered",
                    "message": 'Resource "nvidia.com/gpu" was requested but not registered',
                    "lastTransitionTime": stamp(launched_minutes_ago),
                },
            ],
        },
    }


def decide(nodes: Any, claims: Any, *, lease: Any = LEASE, config: Any = GUARD_CONFIG, **kwargs: Any) -> Any:
    return guard.decide(
        [guard.project_node(n) for n in nodes],
        [guard.project_nodeclaim(c) for c in claims],
        config,
        NOW,
        karpenter_lease=lease,
        **kwargs,
    )


# --- the MIG gate ----------------------------------------------------------------------------------------


def test_the_mig_gate_is_lifted_only_on_success_and_keeps_other_taints() -> None:
    nodes = [
        node(f"n-{state}", "mig", state=state, taints=(GPU_TAINT, GATE), plugin=guard.DEVICE_PLUGIN_PAUSED)
        for state in (None, *MIG_STATES)
    ]
    decisions = decide(nodes, [])
    (untaint,) = decisions.untaint
    assert untaint.node == "n-success"
    assert untaint.remaining == (GPU_TAINT,)
    assert untaint.taints == (GPU_TAINT, GATE)
    # ... and lets the device plugin run again, now that it will advertise MIG devices.
    assert untaint.device_plugin == (guard.DEVICE_PLUGIN_PAUSED, "true")
    assert untaint.event is not None
    assert (untaint.event.type, untaint.event.reason) == ("Normal", "MigGateLifted")
    (failed,) = decisions.events
    assert (failed.name, failed.type, failed.reason) == ("n-failed", "Warning", "MigConfigFailed")
    assert TAINT.key in failed.message
    assert decisions.mig_failed == {"mig": 1}
    # No other gated node has its device plugin touched: each is paused already.
    assert [p.node for p in decisions.patches if p.device_plugin] == ["n-success"]


@pytest.mark.parametrize("plugin", [None, "true", ""])
def test_the_device_plugin_is_paused_on_a_gated_node_whatever_set_it(plugin: str | None) -> None:
    """Absent (the operator removes it from nodes NFD has not labelled yet), `true` (the operator's value once
    NFD has, or the MIG manager's after a failure): paused again while the gate is on."""
    for state in (None, "pending", "failed"):
        (patch,) = decide([node("n", "mig", state=state, taints=(GATE,), plugin=plugin)], []).patches
        assert patch.device_plugin == (plugin, guard.DEVICE_PLUGIN_PAUSED)
        assert patch.remaining is None


def test_a_disabled_device_plugin_is_left_alone() -> None:
    (patch,) = decide([node("n", "mig", state="pending", taints=(GATE,), plugin="false")], []).patches
    assert patch.device_plugin is None  # only the progress record
    assert patch.progress is not None


def test_the_failure_event_is_recorded_once() -> None:
    nodes = [node("n", "mig", state="failed", taints=(GATE,))]
    first = decide(nodes, [])
    again = decide(nodes, [], reported=frozenset(e.key for e in first.events))
    assert len(first.events) == 1
    assert again.events == ()
    assert again.mig_failed == {"mig": 1}


def test_nodes_outside_gated_pools_or_without_the_gate_are_left_alone() -> None:
    nodes = [
        node("plain", "plain", state="success", taints=(GATE,)),  # pool not MIG-gated
        node("foreign", "someone-else", state="success", taints=(GATE,)),  # pool gpu-eks does not manage
        node("done", "mig", state="success", taints=(GPU_TAINT,)),  # gate already gone
        {
            **node("leaving", "mig", state="success", taints=(GATE,)),
            "metadata": {**node("leaving", "mig")["metadata"], "deletionTimestamp": stamp(1)},
        },
    ]
    assert decide(nodes, []).patches == ()


def test_the_gate_matches_by_key_and_effect_like_karpenter() -> None:
    other_value = {**GATE, "value": "anything"}
    other_effect = {**GATE, "effect": "NoExecute"}
    decisions = decide(
        [
            node("a", "mig", state="success", taints=(other_value,)),
            node("b", "mig", state="success", taints=(other_effect,)),
        ],
        [],
    )
    assert [u.node for u in decisions.untaint] == ["a"]


def test_mig_progress_is_recorded_on_each_state_change_and_only_then() -> None:
    paused = guard.DEVICE_PLUGIN_PAUSED
    earlier = NOW - datetime.timedelta(minutes=5)
    cases = [
        # (state now, recorded, expected record: None = unchanged)
        (None, None, guard.MigProgress("", None)),
        ("pending", guard.MigProgress("", None), guard.MigProgress("pending", NOW)),
        ("rebooting", guard.MigProgress("pending", earlier), guard.MigProgress("rebooting", NOW)),
        ("pending", guard.MigProgress("pending", earlier), None),
        # failed is no progress: the clock keeps running from the last progress.
        ("failed", guard.MigProgress("pending", earlier), guard.MigProgress("failed", earlier)),
    ]
    for state, recorded, expected in cases:
        patches = decide(
            [node("n", "mig", state=state, taints=(GATE,), plugin=paused, progress=recorded)], []
        ).patches
        assert (patches[0].progress if patches else None) == expected, (state, recorded)


# --- the watchdog ------------------------------------------------------------------------------------------


def test_uninitialized_nodeclaims_are_deleted_after_the_timeout() -> None:
    claims = [
        nodeclaim("young", "plain", launched_minutes_ago=19),
        nodeclaim("stuck", "plain", launched_minutes_ago=21),
        nodeclaim("ready", "plain", launched_minutes_ago=60, initialized="True"),
        nodeclaim("going", "plain", launched_minutes_ago=60, deleting=True),
        nodeclaim("never", "patient", launched_minutes_ago=600),
        nodeclaim("foreign", "someone-else", launched_minutes_ago=600),
        *[nodeclaim(f"fine-{i}", "plain", launched_minutes_ago=60, initialized="True") for i in range(8)],
    ]
    nodes = [node(c["metadata"]["name"], "plain", gpus="0") for c in claims]
    decisions = decide(nodes, claims)
    (deletion,) = decisions.delete
    assert (deletion.nodeclaim, deletion.uid, deletion.resource_version, deletion.pool) == (
        "stuck",
        "uid-stuck",
        "rv-stuck",
        "plain",
    )
    event = deletion.event
    assert (event.kind, event.api_version, event.type, event.reason) == (
        "NodeClaim",
        "karpenter.sh/v1",
        "Warning",
        "InitializationTimeout",
    )
    # The event says what Karpenter waited for, the evidence on the Node, and which timeout fired.
    for part in (
        "ResourceNotRegistered",
        "no allocatable nvidia.com/gpu",
        "timeout of 20m",
        "launched 21m ago",
    ):
        assert part in event.message
    assert decisions.uninitialized == {"plain": 2, "patient": 1}


@pytest.mark.parametrize(
    ("change", "evidence"),
    [
        ({"absent": True}, "its Node is absent"),
        ({"ready": "False"}, "not Ready (Ready=False)"),
        ({"ready": "Unknown"}, "not Ready (Ready=Unknown)"),
        ({"taints": (GATE,)}, "startup taint gpu-eks.io/mig-pending=true:NoSchedule"),
        (
            {"taints": ({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},)},
            "node.kubernetes.io/not-ready",
        ),
        (
            {"taints": ({"key": "karpenter.sh/unregistered", "effect": "NoExecute"},)},
            "karpenter.sh/unregistered",
        ),
        (
            {"taints": ({"key": "readiness.k8s.io/network", "effect": "NoSchedule"},)},
            "readiness.k8s.io/network",
        ),
        ({"gpus": "0"}, "no allocatable nvidia.com/gpu"),
        ({"gpus": None}, "no allocatable nvidia.com/gpu"),
    ],
)
def test_a_nodeclaim_is_deleted_only_on_evidence_from_its_node(change: dict[str, Any], evidence: str) -> None:
    claim = nodeclaim("stuck", "plain", launched_minutes_ago=30, startup_taints=(GATE,))
    healthy = node("stuck", "plain")
    assert decide([healthy], [claim]).delete == ()  # Karpenter's criteria met: lagging, not stuck
    if change.get("absent"):
        nodes = []
    else:
        nodes = [node("stuck", "plain", **{k: v for k, v in change.items() if k != "gpus"})]
        if "gpus" in change:
            nodes[0]["status"]["allocatable"].pop("nvidia.com/gpu")
            if change["gpus"] is not None:
                nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] = change["gpus"]
    (deletion,) = decide(nodes, [claim]).delete
    assert evidence in deletion.event.message


def test_a_node_that_meets_karpenters_criteria_is_spared_and_said_so_once() -> None:
    claim = nodeclaim("lagging", "plain", launched_minutes_ago=90)
    first = decide([node("lagging", "plain")], [claim])
    assert first.delete == ()
    (event,) = first.events
    assert (event.kind, event.reason, event.type) == ("NodeClaim", "InitializationLagging", "Normal")
    again = decide([node("lagging", "plain")], [claim], reported=frozenset({event.key}))
    assert again.events == ()


def test_a_resource_the_pods_did_not_request_is_not_waited_for() -> None:
    # The NodeClaim asks for nvidia.com/gpu and cpu only: a missing EFA device does not make it stuck.
    claim = nodeclaim("n", "plain", launched_minutes_ago=90)
    assert decide([node("n", "plain")], [claim]).delete == ()
    assert "vpc.amazonaws.com/efa" not in node("n", "plain")["status"]["allocatable"]


def test_the_node_is_found_by_provider_id_like_karpenter() -> None:
    claim = nodeclaim("claim-a", "plain", launched_minutes_ago=30, node_name="ip-10-0-0-1")
    stuck = node("ip-10-0-0-1", "plain", gpus="0")
    (deletion,) = decide([stuck], [claim]).delete
    assert "no allocatable nvidia.com/gpu" in deletion.event.message
    assert decide([node("ip-10-0-0-1", "plain")], [claim]).delete == ()


def test_a_nodeclaim_not_launched_is_left_to_karpenter() -> None:
    claim = nodeclaim("pending", "plain", launched_minutes_ago=60)
    claim["status"]["conditions"][0]["status"] = "Unknown"
    assert decide([], [claim]).delete == ()


def test_the_mig_clock_restarts_with_progress_up_to_three_timeouts() -> None:
    def deleted(launched: float, progressed: float | None, state: str = "rebooting") -> bool:
        since = None if progressed is None else NOW - datetime.timedelta(minutes=progressed)
        gated = node(
            "m",
            "mig",
            state=state,
            taints=(GATE,),
            ready="False",
            plugin=guard.DEVICE_PLUGIN_PAUSED,
            progress=guard.MigProgress(state, since),
        )
        return bool(
            decide(
                [gated], [nodeclaim("m", "mig", launched_minutes_ago=launched, startup_taints=(GATE,))]
            ).delete
        )

    assert deleted(launched=21, progressed=None)  # 20m timeout from launch, no progress seen
    assert not deleted(launched=30, progressed=10)  # progress 10 min ago: 10 more minutes
    assert deleted(launched=45, progressed=21)
    assert not deleted(launched=59, progressed=1)
    assert deleted(launched=61, progressed=1)  # three timeouts after launch, progress or not
    assert deleted(launched=25, progressed=30)  # progress before launch (a stale record) does not count


@pytest.mark.parametrize(
    ("lease", "why"),
    [
        (None, "does not exist"),
        (karpenter_lease(holder=""), "no Karpenter replica holds"),
        (karpenter_lease(renewed_minutes_ago=1.5), "last renewed 90s ago"),
        (
            karpenter_lease(leading_minutes=2),
            "took over its leader Lease kube-system/karpenter-leader-election 120s ago",
        ),
    ],
)
def test_the_watchdog_pass_is_skipped_while_karpenter_does_not_lead(lease: Any, why: str) -> None:
    claims = [nodeclaim("stuck", "plain", launched_minutes_ago=60)]
    nodes = [node("stuck", "plain", gpus="0")]
    decisions = decide(nodes, claims, lease=lease)
    assert decisions.delete == ()
    assert decisions.karpenter_unavailable is not None
    assert why in decisions.karpenter_unavailable
    assert decisions.uninitialized == {"plain": 1}
    # The MIG gate does not wait for Karpenter.
    gated = decide([node("m", "mig", state="success", taints=(GATE,))], [], lease=lease)
    assert len(gated.untaint) == 1
    assert len(decide(nodes, claims, lease=karpenter_lease(renewed_minutes_ago=0.5)).delete) == 1


# --- the circuit breaker ----------------------------------------------------------------------------------


def _pool(stuck: int, healthy: int) -> tuple[list[Any], list[Any]]:
    claims = [nodeclaim(f"s{i}", "plain", launched_minutes_ago=30 + i) for i in range(stuck)]
    claims += [
        nodeclaim(f"h{i}", "plain", launched_minutes_ago=60, initialized="True") for i in range(healthy)
    ]
    nodes = [node(f"s{i}", "plain", gpus="0") for i in range(stuck)] + [
        node(f"h{i}", "plain") for i in range(healthy)
    ]
    return nodes, claims


def minutes_ago(*minutes: float) -> tuple[datetime.datetime, ...]:
    return tuple(NOW - datetime.timedelta(minutes=m) for m in minutes)


def test_the_breaker_allows_n_deletions_an_hour_oldest_deadline_first() -> None:
    nodes, claims = _pool(stuck=2, healthy=8)
    # 70: outside the hour. A streak of one leaves one deletion of the latch's two.
    history = {"plain": guard.PoolHistory(minutes_ago(70, 50, 10), 1, minutes_ago(10)[0])}
    decisions = decide(
        nodes, claims, config=replace(GUARD_CONFIG, max_consecutive_deletions=3), deletions=history
    )
    assert [d.nodeclaim for d in decisions.delete] == ["s1"]  # launched earlier: its deadline passed first
    assert decisions.held == {"plain": ("s0",)}
    reasons = sorted((e.kind, e.name, e.reason) for e in decisions.events)
    assert reasons == [("NodeClaim", "s0", "DeletionHeld"), ("NodePool", "plain", "GuardBreakerOpen")]
    pool_event = next(e for e in decisions.events if e.kind == "NodePool")
    assert pool_event.uid == "np-plain"  # from the NodeClaims' owner reference: kubectl describe finds it
    assert "deleted 2 of its NodeClaims in the last hour, its limit of 3" in pool_event.message
    assert decisions.latched == frozenset()


def test_the_breaker_latches_after_n_deletions_in_a_row_and_the_clock_does_not_reset_it() -> None:
    nodes, claims = _pool(stuck=1, healthy=8)  # the healthy ones initialized an hour ago
    claims[0]["metadata"]["labels"][INSTANCE_TYPE_LABEL] = "p5.48xlarge"
    # Two in a row, the last 30 minutes ago: the hourly limit (3) would allow a third, the latch (2) does not.
    history = {"plain": guard.PoolHistory(minutes_ago(50, 30), 2, minutes_ago(30)[0])}
    for later in (0, 12 * 60):
        decisions = guard.decide(
            [guard.project_node(n) for n in nodes],
            [guard.project_nodeclaim(c) for c in claims],
            GUARD_CONFIG,
            NOW + datetime.timedelta(minutes=later),
            karpenter_lease=karpenter_lease(renewed_minutes_ago=-later, leading_minutes=60 + later),
            deletions=history,
        )
        assert decisions.delete == (), later
        assert decisions.held == {"plain": ("s0",)}
        assert decisions.latched == {"plain"}
        assert decisions.successes == {}
    held = next(e for e in decisions.events if e.reason == "DeletionHeld")
    assert "(instance type p5.48xlarge)" in held.message
    assert "deleted 2 of its NodeClaims in a row" in held.message
    assert "kubectl delete nodeclaim s0" in held.message
    assert len(guard.event_manifest(held, NOW)["message"]) < 1024  # not cut short
    pool_event = next(e for e in decisions.events if e.kind == "NodePool")
    assert "Held: s0 (p5.48xlarge)" in pool_event.message
    # The metric shows the latch even when nothing is due.
    metrics = guard.Metrics()
    metrics.observe(decide(nodes[1:], claims[1:], deletions=history))
    assert metrics.breaker_open == {"plain": 1.0}
    assert metrics.held == {}


@pytest.mark.parametrize(
    ("initialized_minutes_ago", "streak"),
    [(None, 2), (40, 2), (30, 2), (29, 0)],
    ids=["none", "before-the-last-deletion", "with-it", "after-it"],
)
def test_a_streak_ends_only_with_a_nodeclaim_initialized_after_its_last_deletion(
    initialized_minutes_ago: float | None, streak: int
) -> None:
    history = guard.PoolHistory(minutes_ago(50, 30), 2, minutes_ago(30)[0])
    initialized = None if initialized_minutes_ago is None else minutes_ago(initialized_minutes_ago)[0]
    after = history.after_success(initialized)
    assert after.streak == streak
    assert after.deletions == history.deletions  # the hourly limit still counts them
    assert guard.PoolHistory().after_success(NOW) == guard.PoolHistory()


def test_a_nodeclaim_initialized_after_the_streak_unlatches_the_pool() -> None:
    nodes, claims = _pool(stuck=1, healthy=8)
    claims.append(nodeclaim("fresh", "plain", launched_minutes_ago=10, initialized="True"))
    nodes.append(node("fresh", "plain"))
    history = {"plain": guard.PoolHistory(minutes_ago(50, 30), 2, minutes_ago(30)[0])}
    decisions = decide(nodes, claims, deletions=history)
    assert [d.nodeclaim for d in decisions.delete] == ["s0"]
    assert decisions.successes == {"plain": minutes_ago(10)[0]}
    assert decisions.held == {}
    assert decisions.latched == frozenset()  # one deletion of a fresh streak: not yet
    # Initialized and since deleted (consolidation) counts too.
    claims[-1]["metadata"]["deletionTimestamp"] = stamp(1)
    assert decide(nodes, claims, deletions=history).successes == {"plain": minutes_ago(10)[0]}


def test_the_history_reads_the_format_before_the_streak_and_keeps_the_streak_past_the_hour() -> None:
    old = {"plain": [stamp(10), stamp(40)], "mig": []}
    history = guard.parse_deletions({guard.DELETIONS_ANNOTATION: json.dumps(old)})
    # No success after them is known: they all count towards the streak.
    assert history == {
        "plain": guard.PoolHistory(minutes_ago(40, 10), 2, minutes_ago(10)[0]),
        "mig": guard.PoolHistory(),
    }
    stored = json.loads(guard.deletions_annotation(history, NOW))
    assert stored == {"plain": {"deletions": [stamp(40), stamp(10)], "streak": 2, "last": stamp(10)}}
    assert guard.parse_deletions({guard.DELETIONS_ANNOTATION: json.dumps(stored)}) == {
        "plain": history["plain"]
    }
    # Hours later the times are gone, the streak is not.
    later = json.loads(guard.deletions_annotation(history, NOW + datetime.timedelta(hours=5)))
    assert later == {"plain": {"deletions": [], "streak": 2, "last": stamp(10)}}
    for damaged in ("not json", '{"plain": {"deletions": ["yesterday"]}}', "[1]"):
        assert guard.parse_deletions({guard.DELETIONS_ANNOTATION: damaged}) == {}


def test_the_breaker_holds_every_deletion_while_over_20_percent_is_uninitialized() -> None:
    # Karpenter's rounding: 20 % of 10 is 2, of 3 is 1 (rounded up), of 1 is 1.
    for stuck, healthy, deleted in ((2, 8, 2), (3, 7, 0), (1, 2, 1), (2, 1, 0), (1, 0, 1)):
        nodes, claims = _pool(stuck=stuck, healthy=healthy)
        decisions = decide(nodes, claims, config=replace(GUARD_CONFIG, max_deletions_per_hour=10))
        assert len(decisions.delete) == deleted, (stuck, healthy)
        if not deleted:
            pool_event = next(e for e in decisions.events if e.kind == "NodePool")
            assert f"{stuck} of its {stuck + healthy} NodeClaims are not initialized" in pool_event.message


# --- API requests against the RBAC ------------------------------------------------------------------


class FakeApi:
    """An API server stand-in that answers lists in two pages, keeps Leases, and records every request."""

    def __init__(self, nodes: list[Any], claims: list[Any], fail: Mapping[str, int] | None = None) -> None:
        self.objects = {guard.NODES: nodes, guard.NODECLAIMS: claims}
        self.leases: dict[str, Any] = {
            f"{guard.LEASES.format(namespace='kube-system')}/{LEADER_ELECTION_LEASE}": LEASE
        }
        self.requests: list[tuple[str, str, Any, str | None]] = []
        self.fail = dict(fail or {})
        self.version = 100

    def __call__(
        self, method: str, path: str, body: bytes | None, content_type: str | None
    ) -> tuple[int, bytes]:
        document = json.loads(body) if body else None
        self.requests.append((method, path, document, content_type))
        for prefix, status in self.fail.items():
            if f"{method} {path}".startswith(prefix):
                return status, b'{"kind":"Status"}'
        url = urllib.parse.urlsplit(path)
        if "/leases" in url.path:
            return self._lease(method, url.path, document)
        if method == "GET":
            items = self.objects[url.path]
            query = urllib.parse.parse_qs(url.query)
            if query.get("watch") == ["true"]:
                assert query["labelSelector"] == ["karpenter.sh/nodepool in (mig)"]
                return 200, b"{}"
            assert query["limit"] == [str(guard.PAGE_SIZE)]
            assert query["labelSelector"] == ["karpenter.sh/nodepool in (mig,patient,plain)"]
            if "continue" not in query:
                return 200, json.dumps({"items": items[:1], "metadata": {"continue": "page-2"}}).encode()
            return 200, json.dumps({"items": items[1:], "metadata": {}}).encode()
        return 200, b"{}"

    def _lease(self, method: str, path: str, document: Any) -> tuple[int, bytes]:
        self.version += 1
        if method == "GET":
            return (200, json.dumps(self.leases[path]).encode()) if path in self.leases else (404, b"{}")
        if method == "POST":
            path = f"{path}/{document['metadata']['name']}"
        stored = {**document, "metadata": {**document["metadata"], "resourceVersion": str(self.version)}}
        self.leases[path] = stored
        return 200, json.dumps(stored).encode()


_PATH = re.compile(
    r"^/(api/v1|apis/(?P<group>[^/]+)/[^/]+)(/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/?]+)(/(?P<name>[^?]+))?"
)
_VERBS = {"GET": "list", "PATCH": "patch", "DELETE": "delete", "POST": "create", "PUT": "update"}


def rbac_request(method: str, path: str) -> tuple[str, str, str, str | None, str | None]:
    """(verb, API group, resource, namespace, name) of a request, as the API server's RBAC authorizer sees it
    (a create has no name: RBAC cannot restrict it by name)."""
    match = _PATH.match(path)
    assert match, path
    verb = "get" if method == "GET" and match["name"] else _VERBS[method]
    if "watch=true" in path:
        verb = "watch"
    return verb, match["group"] or "", match["resource"], match["ns"], match["name"]


def granted(rules: Any, namespace: str | None) -> set[tuple[str, str, str, str | None, str | None]]:
    return {
        (verb, group, resource, namespace, name)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", [None])
    }


def allowed(request: tuple[str, str, str, str | None, str | None], grants: set[Any]) -> bool:
    verb, group, resource, namespace, name = request
    return any(
        (verb, group, resource, ns, grant_name) in grants
        for ns in {namespace, None}
        for grant_name in {name, None}
    )


HEALTHY_MIG_CLAIMS = [
    nodeclaim(f"ok{i}", "mig", launched_minutes_ago=90, initialized="True") for i in range(8)
]
"""Initialized NodeClaims of pool mig: with them one or two stuck ones are under the breaker's 20 %."""


MIG_NODES = [
    node("a", "mig", state="success", taints=(GATE,), plugin=guard.DEVICE_PLUGIN_PAUSED),
    node("b", "mig", state="failed", taints=(GATE,)),
    node("stuck", "mig", state="pending", taints=(GATE,), ready="False", plugin=guard.DEVICE_PLUGIN_PAUSED),
]
"""Gated nodes: one partitioned, one failed (its device plugin set back to true), one rebooting."""
MIG_CLAIMS = [
    nodeclaim("fresh", "mig", launched_minutes_ago=1),
    nodeclaim("stuck", "mig", launched_minutes_ago=40),
]


def leading_guard(api: FakeApi, config: guard.GuardConfig = GUARD_CONFIG) -> guard.Guard:
    """A guard that has taken its leader Lease at NOW."""
    client = guard.Api(api, EVENT_NAMESPACE)
    elector = guard.LeaderElector(client, config.leader_lease, "guard-a")
    assert elector.tick(0.0, NOW)
    return guard.Guard(client, config, elector, clock=lambda: (1.0, NOW))


def _exercise_every_call() -> FakeApi:
    api = FakeApi(
        nodes=[
            *MIG_NODES,
        ],
        claims=[
            *MIG_CLAIMS,
            *HEALTHY_MIG_CLAIMS,
        ],
    )
    keeper = leading_guard(api)
    keeper.sync()
    watching = guard.Api(api, EVENT_NAMESPACE, stream=lambda path: iter([api("GET", path, None, None)[1]]))
    assert list(watching.watch_nodes(GUARD_CONFIG.selector(mig_only=True))) == [b"{}"]
    keeper.elector.release(NOW)
    return api


def _grants() -> set[Any]:
    namespaces = role_namespaces(GpuNodeGuardConfig(), "kube-system")
    grants = granted(CLUSTER_RULES, None)
    for purpose, rules in ROLES.items():
        grants |= granted(rules, namespaces[purpose])
    return grants


def test_the_rbac_grants_exactly_the_requests_the_guard_makes() -> None:
    used = {rbac_request(method, path) for method, path, _, _ in _exercise_every_call().requests}
    grants = _grants()
    assert all(allowed(request, grants) for request in used), sorted(
        r for r in used if not allowed(r, grants)
    )
    # ... and nothing it does not make.
    for grant in grants:
        assert any(allowed(request, {grant}) for request in used), grant


def test_requests_are_safe_against_concurrent_changes() -> None:
    requests = _exercise_every_call().requests
    patches = {r[1]: r for r in requests if r[0] == "PATCH"}
    untaint = patches[f"{guard.NODES}/a"]
    assert untaint[3] == "application/json-patch+json"
    label = "/metadata/labels/nvidia.com~1gpu.deploy.device-plugin"
    assert untaint[2][:4] == [
        {"op": "test", "path": "/spec/taints", "value": [GATE]},
        {"op": "replace", "path": "/spec/taints", "value": []},
        {"op": "test", "path": label, "value": guard.DEVICE_PLUGIN_PAUSED},
        {"op": "add", "path": label, "value": "true"},
    ]
    pause = patches[f"{guard.NODES}/b"][2]
    assert pause[:2] == [
        {"op": "test", "path": label, "value": "true"},
        {"op": "add", "path": label, "value": guard.DEVICE_PLUGIN_PAUSED},
    ]
    # The progress record is added next to the node's own annotations, never replacing them.
    assert pause[2]["path"] == "/metadata/annotations/gpu-eks.io~1mig-progress"
    (delete,) = [r for r in requests if r[0] == "DELETE"]
    assert delete[1] == f"{guard.NODECLAIMS}/stuck"
    # Neither another NodeClaim of the same name nor this one after any change (it may have initialized).
    assert delete[2]["preconditions"] == {"uid": "uid-stuck", "resourceVersion": "rv-stuck"}
    reasons = sorted(r[2]["reason"] for r in requests if r[0] == "POST" and "/events" in r[1])
    assert reasons == ["InitializationTimeout", "MigConfigFailed", "MigGateLifted"]


def test_a_deletion_is_written_into_the_leader_lease_first() -> None:
    requests = _exercise_every_call().requests
    writes = [(m, p) for m, p, _, _ in requests if m in ("PUT", "DELETE")]
    lease_path = f"{guard.LEASES.format(namespace='gpu-node-guard')}/gpu-node-guard"
    index = writes.index(("DELETE", f"{guard.NODECLAIMS}/stuck"))
    assert writes[index - 1] == ("PUT", lease_path)
    put = next(d for m, p, d, _ in requests if m == "PUT" and guard.DELETIONS_ANNOTATION in json.dumps(d))
    assert json.loads(put["metadata"]["annotations"][guard.DELETIONS_ANNOTATION]) == {
        "mig": {"deletions": [stamp(0)], "streak": 1, "last": stamp(0)}
    }
    assert put["metadata"]["resourceVersion"]  # a compare-and-swap
    assert put["spec"]["holderIdentity"] == "guard-a"


def test_events_are_valid_kubernetes_events() -> None:
    for method, path, body, _ in _exercise_every_call().requests:
        if method == "POST" and "/events" in path:
            kubernetes_validate.validate(
                {**body, "metadata": {**body["metadata"], "namespace": "default"}}, "1.35", strict=True
            )


def test_leases_are_valid_kubernetes_leases() -> None:
    for method, path, body, _ in _exercise_every_call().requests:
        if method in ("POST", "PUT") and "/leases" in path:
            kubernetes_validate.validate(
                {**body, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}, "1.35", strict=True
            )


def test_a_failed_action_is_retried_and_its_event_waits_for_it() -> None:
    api = FakeApi(
        nodes=[
            node("a", "mig", state="success", taints=(GATE,), plugin=guard.DEVICE_PLUGIN_PAUSED),
            node(
                "stuck",
                "mig",
                state="pending",
                taints=(GATE,),
                ready="False",
                plugin=guard.DEVICE_PLUGIN_PAUSED,
            ),
        ],
        claims=[nodeclaim("stuck", "mig", launched_minutes_ago=40)],
        fail={"PATCH ": 422, "DELETE ": 409},
    )
    keeper = leading_guard(api)
    keeper.sync()
    assert [r for r in api.requests if r[0] == "POST" and "/events" in r[1]] == []
    assert keeper.metrics.deleted == {}
    assert keeper.metrics.untainted == {}
    api.fail.clear()
    keeper.sync()
    assert keeper.metrics.deleted == {"mig": 1}
    assert keeper.metrics.untainted == {"mig": 1}


def test_a_standby_replica_reads_nothing_and_acts_on_nothing() -> None:
    api = FakeApi([node("a", "mig", state="success", taints=(GATE,))], [])
    leading_guard(api)  # guard-a holds the Lease
    client = guard.Api(api, EVENT_NAMESPACE)
    elector = guard.LeaderElector(client, GUARD_CONFIG.leader_lease, "guard-b")
    assert not elector.tick(5.0, NOW)
    standby = guard.Guard(client, GUARD_CONFIG, elector, clock=lambda: (5.0, NOW))
    before = len(api.requests)
    assert standby.sync() is None
    assert api.requests[before:] == []
    assert standby.metrics.leader == 0


def test_a_failed_list_is_an_api_error() -> None:
    api = FakeApi([], [], fail={"GET /apis/karpenter.sh": 404})
    with pytest.raises(guard.ApiError, match="HTTP 404"):
        leading_guard(api).sync()


# --- leader election ---------------------------------------------------------------------------------------


def test_leader_election_follows_client_go() -> None:
    api = FakeApi([], [])
    client = guard.Api(api, EVENT_NAMESPACE)
    a = guard.LeaderElector(client, GUARD_CONFIG.leader_lease, "a")
    b = guard.LeaderElector(client, GUARD_CONFIG.leader_lease, "b")
    assert a.tick(0, NOW)  # creates the Lease
    assert not b.tick(0, NOW)
    # b measures the holder's silence on its own clock: 15 s after it last saw the record change.
    assert a.tick(2, NOW)
    assert not b.tick(16, NOW)  # a's renewal at 2 is news to b at 16
    assert not b.tick(17.5, NOW + datetime.timedelta(seconds=100))  # wall clocks never compare
    # a cannot renew (say, partitioned): it stops counting itself leader after 10 s ...
    assert a.is_leader(11.9)
    assert not a.is_leader(12.1)
    # ... and b takes over 15 s after it last saw the record change.
    assert b.tick(31.9, NOW)
    lease = api.leases[f"{guard.LEASES.format(namespace='gpu-node-guard')}/gpu-node-guard"]
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    # a, back, sees b's fresh record and stays standby.
    assert not a.tick(33, NOW)
    # b releases on shutdown; a takes over at once.
    b.release(NOW)
    assert lease_holder(api) == ""
    assert a.tick(34, NOW)


def test_a_replica_is_healthy_only_while_the_api_server_answers_it() -> None:
    """`/healthz` counts a Lease round-trip as a standby's sign of life: a failed one is none."""
    api = FakeApi([], [])
    elector = guard.LeaderElector(guard.Api(api, EVENT_NAMESPACE), GUARD_CONFIG.leader_lease, "a")
    assert elector.tick(0, NOW)
    assert elector.contacted == 0
    api.fail["GET /apis/coordination.k8s.io"] = 503
    assert elector.tick(2, NOW)  # still within its renew deadline
    assert elector.contacted == 0
    assert not elector.is_leader(10)


def lease_holder(api: FakeApi) -> str:
    return str(
        api.leases[f"{guard.LEASES.format(namespace='gpu-node-guard')}/gpu-node-guard"]["spec"][
            "holderIdentity"
        ]
    )


# --- metrics ------------------------------------------------------------------------------------------


def test_metrics_are_prometheus_text_with_a_sample_per_pool() -> None:
    api = FakeApi(
        nodes=[
            *MIG_NODES,
            node("held", "plain", gpus="0"),
        ],
        claims=[
            *MIG_CLAIMS,
            nodeclaim("held", "plain", launched_minutes_ago=40),
            *HEALTHY_MIG_CLAIMS,
        ],
    )
    keeper = leading_guard(api, replace(GUARD_CONFIG, max_deletions_per_hour=1))
    keeper.sync()
    families = {f.name: f for f in text_string_to_metric_families(keeper.metrics.render(GUARD_CONFIG.pools))}
    # The parser drops a counter's `_total` suffix from the family name.
    assert {f"{name}_total" if f.type == "counter" else name for name, f in families.items()} == set(
        guard.METRICS
    )

    def sample(name: str, pool: str | None = None) -> float:
        (value,) = [
            s.value
            for f in families.values()
            for s in f.samples
            if s.name == name and s.labels.get("nodepool") == pool
        ]
        return value

    assert sample("gpu_eks_node_guard_nodeclaims_deleted_total", "mig") == 1
    assert sample("gpu_eks_node_guard_nodeclaims_deleted_total", "plain") == 1
    assert sample("gpu_eks_node_guard_nodeclaims_deleted_total", "patient") == 0
    assert sample("gpu_eks_node_guard_startup_taints_removed_total", "mig") == 1
    assert sample("gpu_eks_node_guard_device_plugin_paused_total", "mig") == 1  # b, reset by the MIG manager
    assert sample("gpu_eks_node_guard_uninitialized_nodeclaims", "mig") == 2
    assert sample("gpu_eks_node_guard_mig_failed_nodes", "mig") == 1
    assert sample("gpu_eks_node_guard_breaker_open", "plain") == 0
    assert sample("gpu_eks_node_guard_leader") == 1
    assert sample("gpu_eks_node_guard_karpenter_unavailable") == 0
    assert sample("gpu_eks_node_guard_last_sync_success_timestamp_seconds") == NOW.timestamp()
    # Another NodeClaim of pool plain gets stuck within the hour: held, and the breaker shows it.
    api.objects[guard.NODECLAIMS].append(nodeclaim("held-2", "plain", launched_minutes_ago=40))
    api.objects[guard.NODES].append(node("held-2", "plain", gpus="0"))
    api.objects[guard.NODECLAIMS] += [
        nodeclaim(f"ok{i}", "plain", launched_minutes_ago=60, initialized="True") for i in range(9)
    ]
    keeper.sync()
    families = {f.name: f for f in text_string_to_metric_families(keeper.metrics.render(GUARD_CONFIG.pools))}
    assert sample("gpu_eks_node_guard_breaker_open", "plain") == 1
    assert sample("gpu_eks_node_guard_nodeclaims_held", "plain") == 2


def test_label_values_are_escaped() -> None:
    text = guard.Metrics(deleted={'we"ird\\pool': 1}).render([])
    (family,) = [
        f for f in text_string_to_metric_families(text) if f.name == "gpu_eks_node_guard_nodeclaims_deleted"
    ]
    assert family.samples[0].labels == {"nodepool": 'we"ird\\pool'}


# --- the whole chain in a stack --------------------------------------------------------------------------

MIG_POOL: dict[str, Any] = {
    "name": "gpu-mig",
    "instanceFamilies": ["p5"],
    "gpuCount": {"min": 8},
    "limits": {"nvidia.com/gpu": "56"},
    "mig": {"profile": "all-1g.10gb"},
    "initializationTimeout": "40m",
}
BOTTLEROCKET_POOL: dict[str, Any] = {
    "name": "gpu-br",
    "ami": "bottlerocket@v1.40.0",
    "instanceFamilies": ["g6"],
    "limits": {"nvidia.com/gpu": "8"},
}
SHARED_POOL: dict[str, Any] = {
    "name": "gpu-shared",
    "instanceFamilies": ["g6"],
    "limits": {"nvidia.com/gpu": "16"},
    "timeSlicing": {"replicas": 4},
}
CPU_POOL: dict[str, Any] = {"name": "cpu-burst", "kind": "cpu", "limits": {"cpu": "64"}}
POOLS = [MIG_POOL, BOTTLEROCKET_POOL, SHARED_POOL, CPU_POOL]


@pytest.fixture(scope="module")
def mixed() -> ProgramRun:
    return run(nodePools=POOLS, gpuNodeGuard={"initializationTimeout": "25m"})


def _guard_objects(result: ProgramRun) -> dict[str, dict[str, Any]]:
    objects = {}
    for registration in result.resources:
        if registration.parent and registration.parent.endswith("GpuNodeGuard::gpu-node-guard"):
            objects[registration.inputs["kind"]] = registration.inputs
    return objects


def _values(result: ProgramRun) -> dict[str, Any]:
    values: dict[str, Any] = result.one("kubernetes:helm.sh/v3:Release", "gpu-operator").inputs["values"]
    return values


def _node_pool(result: ProgramRun, name: str) -> dict[str, Any]:
    return result.one("kubernetes:karpenter.sh/v1:NodePool", f"node-pools-{name}").inputs


def test_the_mig_pool_carries_the_gate_as_a_startup_taint(mixed: ProgramRun) -> None:
    template = _node_pool(mixed, "gpu-mig")["spec"]["template"]["spec"]
    assert template["startupTaints"] == [MIG_PENDING_TAINT.model_dump()]
    for name in ("gpu-br", "gpu-shared", "cpu-burst"):
        assert "startupTaints" not in _node_pool(mixed, name)["spec"]["template"]["spec"]


def test_the_bottlerocket_pool_runs_no_operand_and_needs_no_user_data(mixed: ProgramRun) -> None:
    template = _node_pool(mixed, "gpu-br")["spec"]["template"]
    assert template["metadata"]["labels"]["nvidia.com/gpu.deploy.operands"] == "false"
    node_class = template["spec"]["nodeClassRef"]["name"]
    (spec,) = [
        r.inputs["spec"]
        for r in mixed.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
        if r.inputs["metadata"]["name"] == node_class
    ]
    assert spec["amiSelectorTerms"] == [{"alias": "bottlerocket@v1.40.0"}]
    assert "userData" not in spec


def test_every_operand_the_mig_manager_needs_tolerates_the_gate(mixed: ProgramRun) -> None:
    values = _values(mixed)
    gate = MIG_PENDING_TAINT
    # NFD worker (the subchart's own list), and the operand DaemonSets, which all take daemonsets.tolerations
    # (facts.gpu_operator.OPERAND_DAEMONSETS: device plugin, MIG manager, validator, GFD, DCGM exporter).
    assert tolerates(values["node-feature-discovery"]["worker"]["tolerations"], gate)
    assert set(OPERAND_DAEMONSETS) >= {
        "nvidia-device-plugin-daemonset",
        "nvidia-mig-manager",
        "nvidia-operator-validator",
        "gpu-feature-discovery",
        "nvidia-dcgm-exporter",
    }
    assert tolerates(values["daemonsets"]["tolerations"], gate)
    assert values["migManager"]["enabled"] is True
    # And no per-operand override replaces that list.
    for operand in ("devicePlugin", "migManager", "validator", "gfd", "dcgmExporter"):
        assert "tolerations" not in values.get(operand, {}), operand


def test_consumers_never_learn_to_tolerate_the_gate(mixed: ProgramRun) -> None:
    (mig,) = [p for p in mixed.outputs["gpuPools"] if p["name"] == "gpu-mig"]
    assert all(t["key"] != MIG_PENDING_TAINT.key for t in mig["tolerations"])


def test_the_guard_runs_on_the_system_nodes_pinned_by_digest(mixed: ProgramRun) -> None:
    deployment = _guard_objects(mixed)["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert SYSTEM_NODE_SELECTOR.items() <= pod["nodeSelector"].items()
    (container,) = pod["containers"]
    assert container["image"] == DEFAULT_IMAGE
    assert re.fullmatch(r".+@sha256:[0-9a-f]{64}", container["image"])
    assert pod["serviceAccountName"] == "gpu-node-guard"
    assert container["ports"] == [
        {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}
    ]
    # No toleration: it never runs on a GPU node it might delete.
    assert "tolerations" not in pod


def test_the_guard_is_highly_available(mixed: ProgramRun) -> None:
    """Leader and standby on different system nodes, at cluster-critical priority, one drained at a time;
    a rollout replaces one at a time (the leader hands its Lease over when it stops)."""
    objects = _guard_objects(mixed)
    spec = objects["Deployment"]["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == REPLICAS == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert pod["priorityClassName"] == PRIORITY_CLASS == "system-cluster-critical"
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    budget = objects["PodDisruptionBudget"]["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"] == spec["selector"]
    assert budget["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"  # its Lease identity
    # The system node group keeps at least two nodes, so the two replicas always fit.
    assert parse_stack_config(config()).cluster.system_nodes.min_size >= REPLICAS


def test_the_guard_watches_every_gpu_pool_with_its_timeout(mixed: ProgramRun) -> None:
    objects = _guard_objects(mixed)
    assert objects["ConfigMap"]["data"] == {"guard.py": SCRIPT.read_text()}
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    settings = guard.GuardConfig.from_json(json.loads(env[SETTINGS_ENV]))
    assert settings.pools == {
        "gpu-mig": guard.PoolPolicy(initialization_timeout_seconds=2400, mig_gate=True),
        "gpu-br": guard.PoolPolicy(initialization_timeout_seconds=1500, mig_gate=False),
        "gpu-shared": guard.PoolPolicy(initialization_timeout_seconds=1500, mig_gate=False),
    }
    assert settings.mig_taint == TAINT
    assert settings.event_namespace == EVENT_NAMESPACE
    assert settings.leader_lease == guard.LeaseRef("gpu-node-guard", "gpu-node-guard")
    # Karpenter's Lease where the stack installs Karpenter (the default namespace: kube-system).
    assert settings.karpenter_lease == guard.LeaseRef("kube-system", LEADER_ELECTION_LEASE)
    assert settings.max_deletions_per_hour == 3
    assert settings.max_consecutive_deletions == 2
    assert settings.unhealthy_percent == REPAIR_UNHEALTHY_PERCENT
    # Node and NodeClaim lists ask the API server for the watched pools only.
    assert settings.selector() == "karpenter.sh/nodepool in (gpu-br,gpu-mig,gpu-shared)"
    assert settings.selector(mig_only=True) == "karpenter.sh/nodepool in (gpu-mig)"


def test_the_guard_reads_karpenters_lease_where_karpenter_runs() -> None:
    result = run(nodePools=[SHARED_POOL], karpenter={"namespace": "karpenter"})
    objects = [
        r.inputs for r in result.resources if r.parent and r.parent.endswith("GpuNodeGuard::gpu-node-guard")
    ]
    (role,) = [o for o in objects if o["kind"] == "Role" and o["metadata"]["namespace"] == "karpenter"]
    assert role["rules"] == [dict(r) for r in KARPENTER_LEASE_RULES]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    settings = json.loads(next(e["value"] for e in container["env"] if e["name"] == SETTINGS_ENV))
    assert settings["karpenterLease"] == {"namespace": "karpenter", "name": LEADER_ELECTION_LEASE}
    # The Role needs the namespace the controller release creates.
    registered = next(
        r
        for r in result.resources
        if r.inputs.get("kind") == "Role" and r.inputs["metadata"]["namespace"] == "karpenter"
    )
    assert any(d.endswith("::karpenter-controller") for d in registered.dependencies)


def test_mig_pools_wait_longer_by_default() -> None:
    """A MIG node boots twice (the MIG manager's reboot): unless a timeout is set, its pool gets 40m, others
    20m; a value in gpuNodeGuard applies to every pool, a pool's own wins."""
    mig = {k: v for k, v in MIG_POOL.items() if k != "initializationTimeout"}

    def timeouts(**sections: Any) -> dict[str, int | None]:
        result = run(nodePools=[mig, SHARED_POOL], **sections)
        (container,) = _guard_objects(result)["Deployment"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        pools = guard.GuardConfig.from_json(json.loads(env[SETTINGS_ENV])).pools
        return {name: policy.initialization_timeout_seconds for name, policy in pools.items()}

    assert timeouts() == {"gpu-mig": 2400, "gpu-shared": 1200}
    assert timeouts(gpuNodeGuard={"initializationTimeout": "30m"}) == {"gpu-mig": 1800, "gpu-shared": 1800}
    assert GpuNodeGuardConfig().timeout_for("55m", mig_gated=True) == "55m"
    assert GpuNodeGuardConfig().timeout_for(None, mig_gated=True) == DEFAULT_MIG_INITIALIZATION_TIMEOUT


def test_the_registered_rbac_is_the_least_privilege_one(mixed: ProgramRun) -> None:
    objects = [
        r.inputs for r in mixed.resources if r.parent and r.parent.endswith("GpuNodeGuard::gpu-node-guard")
    ]
    (cluster_role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    assert cluster_role["rules"] == [dict(r) for r in CLUSTER_RULES]
    roles = {o["metadata"]["namespace"]: o["rules"] for o in objects if o["kind"] == "Role"}
    assert roles == {
        EVENT_NAMESPACE: [dict(r) for r in EVENT_RULES],
        "gpu-node-guard": [dict(r) for r in LEADER_RULES],
        "kube-system": [dict(r) for r in KARPENTER_LEASE_RULES],
    }
    bindings = [o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert len(bindings) == 4
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "gpu-node-guard", "namespace": "gpu-node-guard"}
        ]
    # Only the guard's own Lease may be written, only Karpenter's may be read elsewhere.
    assert {n for r in LEADER_RULES for n in r.get("resourceNames", [])} == {"gpu-node-guard"}
    assert all(r.get("resourceNames") == [LEADER_ELECTION_LEASE] for r in KARPENTER_LEASE_RULES)


def test_the_guard_pod_may_only_serve_metrics_and_reach_the_api(mixed: ProgramRun) -> None:
    objects = _guard_objects(mixed)
    policy = objects["NetworkPolicy"]
    assert policy["metadata"]["namespace"] == "gpu-node-guard"
    pod_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == [{"ports": [{"port": METRICS_PORT, "protocol": "TCP"}]}]
    assert policy["spec"]["egress"] == [{"ports": [{"port": 443, "protocol": "TCP"}]}]
    # The pod starts with its policy in place.
    deployment = next(r for r in mixed.resources if r.type == "kubernetes:apps/v1:Deployment")
    registered = mixed.one("kubernetes:networking.k8s.io/v1:NetworkPolicy", "gpu-node-guard-networkpolicy")
    assert registered.urn in deployment.dependencies


def test_the_cluster_enforces_network_policies(mixed: ProgramRun) -> None:
    """vpc-cni's network policy agent is on (add-on configuration `enableNetworkPolicy: "true"`), so the
    guard's NetworkPolicy is enforced rather than accepted and ignored; besides it only the EBS CSI driver is
    configured (its volume tags, tests/test_storage.py)."""
    addons = {r.inputs["addonName"]: r.inputs for r in mixed.of_type("aws:eks/addon:Addon")}
    assert json.loads(addons["vpc-cni"]["configurationValues"]) == {"enableNetworkPolicy": "true"}
    configured = [name for name, inputs in addons.items() if inputs.get("configurationValues")]
    assert sorted(configured) == ["aws-ebs-csi-driver", "vpc-cni"]


def test_the_guard_starts_after_the_karpenter_crds_and_controller(mixed: ProgramRun) -> None:
    deployment = next(r for r in mixed.resources if r.type == "kubernetes:apps/v1:Deployment")
    assert any(d.endswith("::karpenter-crd") for d in deployment.dependencies)
    assert any(d.endswith("::karpenter-controller") for d in deployment.dependencies)


def test_every_guard_object_is_valid_kubernetes() -> None:
    pools = parse_stack_config(config(nodePools=POOLS)).node_pools
    for manifest in manifests(
        pools,
        GpuNodeGuardConfig(),
        system_node_selector=SYSTEM_NODE_SELECTOR,
        karpenter_namespace="kube-system",
    ):
        kubernetes_validate.validate(manifest, "1.35", strict=True)


def test_the_namespace_enforces_restricted_pod_security() -> None:
    pools = parse_stack_config(config(nodePools=POOLS)).node_pools
    namespace, *rest = manifests(
        pools,
        GpuNodeGuardConfig(),
        system_node_selector=SYSTEM_NODE_SELECTOR,
        karpenter_namespace="kube-system",
    )
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    (deployment,) = [m for m in rest if m["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_no_guard_without_gpu_pools() -> None:
    result = run(nodePools=[CPU_POOL])
    assert _guard_objects(result) == {}


def test_a_settings_change_rolls_the_guard_and_keeps_its_program() -> None:
    """Settings travel in the pod template (a change rolls the pod); the content-named ConfigMap holds only
    the program, so a pool or timeout change never replaces it."""
    pools = parse_stack_config(config(nodePools=POOLS)).node_pools

    def program(**settings: Any) -> tuple[str, dict[str, Any]]:
        objects = manifests(
            pools,
            GpuNodeGuardConfig(**settings),
            system_node_selector=SYSTEM_NODE_SELECTOR,
            karpenter_namespace="kube-system",
        )
        (deployment,) = [m for m in objects if m["kind"] == "Deployment"]
        (config_map,) = [m for m in objects if m["kind"] == "ConfigMap"]
        assert config_map["immutable"] is True
        (volume,) = deployment["spec"]["template"]["spec"]["volumes"]
        assert volume["configMap"]["name"] == config_map["metadata"]["name"]
        return str(config_map["metadata"]["name"]), deployment["spec"]["template"]

    (name, template), (new_name, new_template) = program(), program(initialization_timeout="30m")
    assert template != new_template
    assert name == new_name
    assert program() == (name, template)


# --- refusals -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sections", "key"),
    [
        ({"gpuNodeGuard": {"initializationTimeout": "14m"}}, "gpu-eks:gpuNodeGuard.initializationTimeout"),
        ({"gpuNodeGuard": {"maxDeletionsPerHour": 0}}, "gpu-eks:gpuNodeGuard.maxDeletionsPerHour"),
        ({"gpuNodeGuard": {"maxConsecutiveDeletions": 0}}, "gpu-eks:gpuNodeGuard.maxConsecutiveDeletions"),
        ({"gpuNodeGuard": {"maxConsecutiveDeletions": 11}}, "gpu-eks:gpuNodeGuard.maxConsecutiveDeletions"),
        (
            {"nodePools": [{**SHARED_POOL, "initializationTimeout": "10m"}]},
            "gpu-eks:nodePools[0].initializationTimeout",
        ),
        ({"gpuNodeGuard": {"image": "python:3.13-slim"}}, "gpu-eks:gpuNodeGuard.image"),
        (
            {"nodePools": [{**SHARED_POOL, "startupTaints": [{"key": "example.com/warming"}]}]},
            "gpu-eks:nodePools[0].startupTaints[0].key",
        ),
        ({"gpuOperator": {"driverMode": "operator"}}, "gpu-eks:gpuOperator.driverMode"),
        (
            {"nodePools": [SHARED_POOL], "gpuOperator": {"extraValues": {"cdi": {"enabled": False}}}},
            "gpu-eks:gpuOperator.extraValues.cdi.enabled",
        ),
        ({"nodePools": [{**CPU_POOL, "initializationTimeout": "30m"}]}, "gpu-eks:nodePools[0]"),
    ],
)
def test_refusals_name_their_key_and_register_nothing(sections: dict[str, Any], key: str) -> None:
    error, monitor = run_failing(**sections)
    assert isinstance(error, ConfigError)
    (problem,) = error.problems
    assert problem.key == key, str(problem)
    assert monitor.registrations == []


def test_driver_mode_operator_is_refused_with_the_alias_explanation() -> None:
    error, _ = run_failing(gpuOperator={"driverMode": "operator"})
    assert "al2023@<version> for GPU instance types to the EKS AL2023 NVIDIA AMI" in str(error)
    assert "no custom AMI selector" in str(error)


def test_the_metrics_and_health_endpoints_over_http() -> None:
    """The real HTTP server on a loopback port: /metrics in text format, /healthz up until syncs go stale."""
    config_zero_port = guard.GuardConfig(pools=GUARD_CONFIG.pools, mig_taint=TAINT, metrics_port=0)
    keeper = leading_guard(FakeApi([], []), config_zero_port)
    server = guard.serve(keeper)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            names = {f.name for f in text_string_to_metric_families(response.read().decode())}
        assert "gpu_eks_node_guard_uninitialized_nodeclaims" in names
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            assert response.status == 200  # fresh start: within three intervals
    finally:
        server.shutdown()
        server.server_close()


# --- the facts the guard and the decisions rest on ---------------------------------------------------------


def test_the_in_cluster_program_uses_the_upstream_names() -> None:
    # guard.py runs alone in the cluster (standard library only), so it repeats these names: they must agree.
    assert guard.NODEPOOL_LABEL == NODEPOOL_LABEL
    assert guard.NODEPOOL_OWNER_KIND == NODEPOOL_OWNER_KIND
    assert guard.INSTANCE_TYPE_LABEL == INSTANCE_TYPE_LABEL
    # The NodeClaim CRD shows that label as the claim's type (`kubectl get nodeclaims`).
    crds = Path(__file__).resolve().parent / "fixtures" / "karpenter-1.14.1" / "crds"
    crd = yaml.safe_load((crds / "karpenter.sh_nodeclaims.yaml").read_text())
    columns = {c["name"]: c["jsonPath"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["Type"] == ".metadata.labels." + INSTANCE_TYPE_LABEL.replace(".", "\\.")
    assert guard.MIG_CONFIG_STATE_LABEL == MIG_CONFIG_STATE_LABEL
    assert (guard.MIG_STATE_SUCCESS, guard.MIG_STATE_FAILED) == (MIG_STATE_SUCCESS, MIG_STATE_FAILED)
    assert set(guard.MIG_PROGRESS_STATES) == set(MIG_STATES) - {MIG_STATE_SUCCESS, MIG_STATE_FAILED}
    assert guard.MIG_CONFIG_LABEL == MIG_CONFIG_LABEL
    assert (guard.DEVICE_PLUGIN_DEPLOY_LABEL, guard.DEVICE_PLUGIN_PAUSED) == (
        DEVICE_PLUGIN_DEPLOY_LABEL,
        DEVICE_PLUGIN_PAUSED,
    )
    assert guard.KNOWN_EPHEMERAL_TAINTS == KNOWN_EPHEMERAL_TAINTS
    assert guard.KNOWN_EPHEMERAL_TAINT_PREFIXES == KNOWN_EPHEMERAL_TAINT_PREFIXES
    # The guard elects its leader with the timings Karpenter's controller-runtime uses (client-go's).
    assert (guard.LEASE_DURATION_SECONDS, guard.RENEW_DEADLINE_SECONDS, guard.RETRY_PERIOD_SECONDS) == (
        LEADER_LEASE_DURATION_SECONDS,
        LEADER_RENEW_DEADLINE_SECONDS,
        LEADER_RETRY_PERIOD_SECONDS,
    )


def test_karpenter_counts_as_gone_only_well_after_a_standby_could_have_taken_over() -> None:
    assert KARPENTER_STALE_SECONDS >= 2 * LEADER_LEASE_DURATION_SECONDS


def test_the_guard_never_preempts_karpenters_own_timeouts() -> None:
    # Karpenter deletes a NodeClaim whose node has not registered after 15 minutes; no guard timeout comes
    # earlier, so it only ever acts on registered nodes that never initialize.
    assert MIN_INITIALIZATION_TIMEOUT_SECONDS == REGISTRATION_TIMEOUT_SECONDS == 15 * 60
    assert duration_seconds(DEFAULT_INITIALIZATION_TIMEOUT) > REGISTRATION_TIMEOUT_SECONDS
    assert MIN_INITIALIZATION_TIMEOUT_SECONDS > LAUNCH_TIMEOUT_SECONDS
    with pytest.raises(ValueError, match="at least 15m"):
        GpuNodeGuardConfig(initialization_timeout="14m59s")
    assert GpuNodeGuardConfig(initialization_timeout="15m").initialization_timeout == "15m"


def test_node_repair_does_not_cover_a_node_that_never_initializes() -> None:
    # A Ready node without nvidia.com/gpu matches no repair policy: hence the watchdog. The docs name them.
    assert not [p for p in REPAIR_POLICIES if p.condition == "Ready" and p.status == "True"]
    readme = (Path(__file__).resolve().parent.parent / "docs" / "gpu-pools.md").read_text()
    for policy in REPAIR_POLICIES:
        assert f"`{policy.condition}`" in readme, policy.condition


def test_bottlerocket_keeps_nvidia_smi_where_the_validator_does_not_look() -> None:
    # The reason Bottlerocket pools keep every operand off (components/gpu_operator_values.py).
    assert BOTTLEROCKET_NVIDIA_SMI not in HOST_NVIDIA_SMI_PATHS


def test_the_docs_explain_every_runtime_class_the_operator_creates() -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "gpu-operator.md").read_text()
    for name in RUNTIME_CLASS_HANDLERS:
        assert f"`{name}`" in readme, name


def registry_manifest(image: str) -> tuple[int, str]:
    """(HTTP status, media type) of the manifest `image` pins, asked of its registry as a container runtime
    asks (OCI distribution API, anonymous token where the registry demands one)."""
    name, _, digest = image.partition("@")
    host, _, repository = name.split(":", 1)[0].partition("/")
    accept = ", ".join(
        (
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.oci.image.manifest.v1+json",
        )
    )
    url = f"https://{host}/v2/{repository}/manifests/{digest}"
    headers = {"Accept": accept}
    for _ in range(2):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
                return int(response.status), str(response.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as error:
            challenge = error.headers.get("WWW-Authenticate", "")
            if error.code != 401 or not challenge.startswith("Bearer "):
                return int(error.code), ""
            fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
            query = urllib.parse.urlencode({k: v for k, v in fields.items() if k in ("service", "scope")})
            with urllib.request.urlopen(f"{fields['realm']}?{query}", timeout=5) as response:
                token = json.loads(response.read())["token"]
            headers["Authorization"] = f"Bearer {token}"
    return 401, ""


def test_the_guard_image_digest_is_a_published_manifest_list() -> None:
    """Where the registry is reachable, the pinned digest must be a multi-architecture index it serves.
    Where it is not (as where this was written), the digest stays documented as unverified (docs/gpu-pools.md,
    "The guard's image") and this test is skipped, saying so."""
    try:
        status, media_type = registry_manifest(DEFAULT_IMAGE)
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        pytest.skip(f"registry unreachable, digest unverified: {error}")
    if status not in (200, 404):  # rate limited, refused, down: no answer about the digest
        pytest.skip(f"registry answered HTTP {status}, digest unverified")
    assert status == 200, f"{DEFAULT_IMAGE} is not served by its registry (HTTP 404: no such manifest)"
    assert media_type.split(";")[0] in (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )


def test_the_memory_measurement_runs_the_real_listing_and_decisions() -> None:
    """scripts/guard_memory.py (which sized the Deployment's memory) measures what it claims: the guard's
    program, alone in a fresh interpreter, listing and deciding over every fake object it serves."""
    figures = guard_memory.measure(120, mig_share=0.5)
    assert (figures["nodes"], figures["nodeclaims"]) == (120, 120)
    assert figures["patches"] == 0  # every fake MIG node is partitioned and ungated, as in a settled cluster
    assert figures["peak"] >= figures["imported"] > 0
    assert guard_memory.page_size() == guard.PAGE_SIZE
