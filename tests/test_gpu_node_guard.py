"""The GPU node guard: its decisions (pure), the API requests it makes against the RBAC it gets, its metrics,
and the whole chain in a stack with a MIG pool and a Bottlerocket pool (taint on the NodePool, every operand
tolerating it, the guard on the system nodes, manifests valid for Kubernetes)."""

import datetime
import json
import re
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.cluster import SYSTEM_NODE_SELECTOR
from components.gpu_node_guard import guard
from components.gpu_node_guard.manifests import (
    CLUSTER_RULES,
    EVENT_NAMESPACE,
    EVENT_RULES,
    METRICS_PORT,
    METRICS_PORT_NAME,
    SCRIPT,
    SETTINGS_ENV,
    manifests,
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
    LAUNCH_TIMEOUT_SECONDS,
    NODEPOOL_LABEL,
    REGISTRATION_TIMEOUT_SECONDS,
    REPAIR_POLICIES,
)
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
)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GATE = {"key": TAINT.key, "value": TAINT.value, "effect": TAINT.effect}


def stamp(minutes_ago: float) -> str:
    return (NOW - datetime.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(
    name: str, pool: str, *, state: str | None = None, taints: tuple[Mapping[str, Any], ...] = ()
) -> Any:
    labels = {NODEPOOL_LABEL: pool, "nvidia.com/mig.config": "all-1g.10gb"}
    if state is not None:
        labels["nvidia.com/mig.config.state"] = state
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": {"taints": [dict(t) for t in taints]},
    }


def nodeclaim(
    name: str, pool: str, *, launched_minutes_ago: float, initialized: str = "Unknown", deleting: bool = False
) -> Any:
    metadata: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": f"rv-{name}",
        "labels": {NODEPOOL_LABEL: pool},
    }
    if deleting:
        metadata["deletionTimestamp"] = stamp(0)
    return {
        "metadata": metadata,
        "status": {
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
            ]
        },
    }


# --- decisions ---------------------------------------------------------------------------------------


def test_the_mig_gate_is_lifted_only_on_success_and_keeps_other_taints() -> None:
    nodes = [
        node(f"n-{state}", "mig", state=state, taints=(GPU_TAINT, GATE)) for state in (None, *MIG_STATES)
    ]
    decisions = guard.decide(nodes, [], GUARD_CONFIG, NOW)
    (untaint,) = decisions.untaint
    assert untaint.node == "n-success"
    assert untaint.remaining == (GPU_TAINT,)
    assert untaint.taints == (GPU_TAINT, GATE)
    assert (untaint.event.type, untaint.event.reason) == ("Normal", "MigGateLifted")
    (failed,) = decisions.events
    assert (failed.name, failed.type, failed.reason) == ("n-failed", "Warning", "MigConfigFailed")
    assert TAINT.key in failed.message
    assert decisions.mig_failed == {"mig": 1}


def test_the_failure_event_is_recorded_once() -> None:
    nodes = [node("n", "mig", state="failed", taints=(GATE,))]
    first = guard.decide(nodes, [], GUARD_CONFIG, NOW)
    again = guard.decide(nodes, [], GUARD_CONFIG, NOW, frozenset(e.key for e in first.events))
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
    assert guard.decide(nodes, [], GUARD_CONFIG, NOW).untaint == ()


def test_the_gate_matches_by_key_and_effect_like_karpenter() -> None:
    other_value = {**GATE, "value": "anything"}
    other_effect = {**GATE, "effect": "NoExecute"}
    decisions = guard.decide(
        [
            node("a", "mig", state="success", taints=(other_value,)),
            node("b", "mig", state="success", taints=(other_effect,)),
        ],
        [],
        GUARD_CONFIG,
        NOW,
    )
    assert [u.node for u in decisions.untaint] == ["a"]


def test_uninitialized_nodeclaims_are_deleted_after_the_timeout() -> None:
    claims = [
        nodeclaim("young", "plain", launched_minutes_ago=19),
        nodeclaim("stuck", "plain", launched_minutes_ago=21),
        nodeclaim("ready", "plain", launched_minutes_ago=60, initialized="True"),
        nodeclaim("going", "plain", launched_minutes_ago=60, deleting=True),
        nodeclaim("never", "patient", launched_minutes_ago=600),
        nodeclaim("foreign", "someone-else", launched_minutes_ago=600),
    ]
    decisions = guard.decide([], claims, GUARD_CONFIG, NOW)
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
    # The event says what Karpenter waited for, and which timeout fired.
    for part in ("ResourceNotRegistered", "timeout of 20m", "launched 21m ago"):
        assert part in event.message
    assert decisions.uninitialized == {"plain": 2, "patient": 1}


def test_a_nodeclaim_not_launched_is_left_to_karpenter() -> None:
    claim = nodeclaim("pending", "plain", launched_minutes_ago=60)
    claim["status"]["conditions"][0]["status"] = "Unknown"
    assert guard.decide([], [claim], GUARD_CONFIG, NOW).delete == ()


# --- API requests against the RBAC ------------------------------------------------------------------


class FakeApi:
    """An API server stand-in that answers lists in two pages and records every request."""

    def __init__(self, nodes: list[Any], claims: list[Any], fail: Mapping[str, int] | None = None) -> None:
        self.objects = {guard.NODES: nodes, guard.NODECLAIMS: claims}
        self.requests: list[tuple[str, str, Any, str | None]] = []
        self.fail = dict(fail or {})

    def __call__(
        self, method: str, path: str, body: bytes | None, content_type: str | None
    ) -> tuple[int, bytes]:
        self.requests.append((method, path, json.loads(body) if body else None, content_type))
        for prefix, status in self.fail.items():
            if f"{method} {path}".startswith(prefix):
                return status, b'{"kind":"Status"}'
        url = urllib.parse.urlsplit(path)
        if method == "GET":
            items = self.objects[url.path]
            query = urllib.parse.parse_qs(url.query)
            assert query["limit"] == ["500"]
            if "continue" not in query:
                return 200, json.dumps({"items": items[:1], "metadata": {"continue": "page-2"}}).encode()
            return 200, json.dumps({"items": items[1:], "metadata": {}}).encode()
        return 200, b"{}"


_PATH = re.compile(
    r"^/(api/v1|apis/(?P<group>[^/]+)/[^/]+)(/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/?]+)(?P<name>/[^?]+)?"
)
_VERBS = {"GET": "list", "PATCH": "patch", "DELETE": "delete", "POST": "create"}


def rbac_request(method: str, path: str) -> tuple[str, str, str, str | None]:
    """(verb, API group, resource, namespace) of a request, as the API server's RBAC authorizer sees it."""
    match = _PATH.match(path)
    assert match, path
    verb = "get" if method == "GET" and match["name"] else _VERBS[method]
    return verb, match["group"] or "", match["resource"], match["ns"]


def granted(rules: Any, namespace: str | None) -> set[tuple[str, str, str, str | None]]:
    return {
        (verb, group, resource, namespace)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _exercise_every_call() -> FakeApi:
    api = FakeApi(
        nodes=[
            node("a", "mig", state="success", taints=(GATE,)),
            node("b", "mig", state="failed", taints=(GATE,)),
        ],
        claims=[
            nodeclaim("fresh", "mig", launched_minutes_ago=1),
            nodeclaim("stuck", "mig", launched_minutes_ago=40),
        ],
    )
    guard.Guard(guard.Api(api, EVENT_NAMESPACE), GUARD_CONFIG).sync(NOW)
    return api


def test_the_rbac_grants_exactly_the_requests_the_guard_makes() -> None:
    used = {rbac_request(method, path) for method, path, _, _ in _exercise_every_call().requests}
    assert used == granted(CLUSTER_RULES, None) | granted(EVENT_RULES, EVENT_NAMESPACE)


def test_requests_are_safe_against_concurrent_changes() -> None:
    requests = _exercise_every_call().requests
    (patch,) = [r for r in requests if r[0] == "PATCH"]
    assert patch[1] == f"{guard.NODES}/a"
    assert patch[3] == "application/json-patch+json"
    assert patch[2] == [
        {"op": "test", "path": "/spec/taints", "value": [GATE]},
        {"op": "replace", "path": "/spec/taints", "value": []},
    ]
    (delete,) = [r for r in requests if r[0] == "DELETE"]
    assert delete[1] == f"{guard.NODECLAIMS}/stuck"
    # Neither another NodeClaim of the same name nor this one after any change (it may have initialized).
    assert delete[2]["preconditions"] == {"uid": "uid-stuck", "resourceVersion": "rv-stuck"}
    reasons = sorted(r[2]["reason"] for r in requests if r[0] == "POST")
    assert reasons == ["InitializationTimeout", "MigConfigFailed", "MigGateLifted"]


def test_events_are_valid_kubernetes_events() -> None:
    for method, _, body, _ in _exercise_every_call().requests:
        if method == "POST":
            kubernetes_validate.validate(
                {**body, "metadata": {**body["metadata"], "namespace": "default"}}, "1.35", strict=True
            )


def test_a_failed_action_is_retried_and_its_event_waits_for_it() -> None:
    api = FakeApi(
        nodes=[node("a", "mig", state="success", taints=(GATE,))],
        claims=[nodeclaim("stuck", "mig", launched_minutes_ago=40)],
        fail={"PATCH ": 422, "DELETE ": 409},
    )
    keeper = guard.Guard(guard.Api(api, EVENT_NAMESPACE), GUARD_CONFIG)
    keeper.sync(NOW)
    assert [r for r in api.requests if r[0] == "POST"] == []
    assert keeper.metrics.deleted == {}
    assert keeper.metrics.untainted == {}
    api.fail.clear()
    keeper.sync(NOW)
    assert keeper.metrics.deleted == {"mig": 1}
    assert keeper.metrics.untainted == {"mig": 1}


def test_a_failed_list_is_an_api_error() -> None:
    api = FakeApi([], [], fail={"GET /apis/karpenter.sh": 404})
    with pytest.raises(guard.ApiError, match="HTTP 404"):
        guard.Guard(guard.Api(api, EVENT_NAMESPACE), GUARD_CONFIG).sync(NOW)


# --- metrics ------------------------------------------------------------------------------------------


def test_metrics_are_prometheus_text_with_a_sample_per_pool() -> None:
    api = _exercise_every_call()
    keeper = guard.Guard(guard.Api(api, EVENT_NAMESPACE), GUARD_CONFIG)
    keeper.sync(NOW)
    families = {f.name: f for f in text_string_to_metric_families(keeper.metrics.render(GUARD_CONFIG.pools))}
    # The parser drops a counter's `_total` suffix from the family name.
    assert {f"{name}_total" if f.type == "counter" else name for name, f in families.items()} == set(
        guard.METRICS
    )

    def sample(name: str, pool: str) -> float:
        (value,) = [
            s.value
            for f in families.values()
            for s in f.samples
            if s.name == name and s.labels.get("nodepool") == pool
        ]
        return value

    assert sample("gpu_eks_node_guard_nodeclaims_deleted_total", "mig") == 1
    assert sample("gpu_eks_node_guard_nodeclaims_deleted_total", "plain") == 0
    assert sample("gpu_eks_node_guard_startup_taints_removed_total", "mig") == 1
    assert sample("gpu_eks_node_guard_uninitialized_nodeclaims", "mig") == 2
    assert sample("gpu_eks_node_guard_mig_failed_nodes", "mig") == 1
    (last,) = families["gpu_eks_node_guard_last_sync_success_timestamp_seconds"].samples
    assert last.value == NOW.timestamp()


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
    assert deployment["spec"]["replicas"] == 1
    # No toleration: it never runs on a GPU node it might delete.
    assert "tolerations" not in pod


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
    objects = _guard_objects(mixed)
    assert objects["ClusterRole"]["rules"] == [dict(r) for r in CLUSTER_RULES]
    assert objects["Role"]["rules"] == [dict(r) for r in EVENT_RULES]
    assert objects["Role"]["metadata"]["namespace"] == EVENT_NAMESPACE
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        assert objects[binding]["subjects"] == [
            {"kind": "ServiceAccount", "name": "gpu-node-guard", "namespace": "gpu-node-guard"}
        ]


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


def test_the_guard_starts_after_the_karpenter_crds(mixed: ProgramRun) -> None:
    deployment = next(r for r in mixed.resources if r.type == "kubernetes:apps/v1:Deployment")
    assert any(d.endswith("::karpenter-crd") for d in deployment.dependencies)


def test_every_guard_object_is_valid_kubernetes() -> None:
    pools = parse_stack_config(config(nodePools=POOLS)).node_pools
    for manifest in manifests(pools, GpuNodeGuardConfig(), system_node_selector=SYSTEM_NODE_SELECTOR):
        kubernetes_validate.validate(manifest, "1.35", strict=True)


def test_the_namespace_enforces_restricted_pod_security() -> None:
    pools = parse_stack_config(config(nodePools=POOLS)).node_pools
    namespace, *rest = manifests(pools, GpuNodeGuardConfig(), system_node_selector=SYSTEM_NODE_SELECTOR)
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
        objects = manifests(pools, GpuNodeGuardConfig(**settings), system_node_selector=SYSTEM_NODE_SELECTOR)
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
        ({"gpuNodeGuard": {"initializationTimeout": "9m"}}, "gpu-eks:gpuNodeGuard.initializationTimeout"),
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
    keeper = guard.Guard(guard.Api(FakeApi([], []), EVENT_NAMESPACE), config_zero_port)
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
    assert guard.MIG_CONFIG_STATE_LABEL == MIG_CONFIG_STATE_LABEL
    assert (guard.MIG_STATE_SUCCESS, guard.MIG_STATE_FAILED) == (MIG_STATE_SUCCESS, MIG_STATE_FAILED)
    assert guard.MIG_CONFIG_LABEL == MIG_CONFIG_LABEL


def test_the_watchdog_leaves_unregistered_nodeclaims_to_karpenter() -> None:
    # Karpenter deletes a NodeClaim whose node has not registered after 15 minutes; the guard's default comes
    # later, so it only ever acts on registered nodes that never initialize.
    assert duration_seconds(DEFAULT_INITIALIZATION_TIMEOUT) > REGISTRATION_TIMEOUT_SECONDS
    assert MIN_INITIALIZATION_TIMEOUT_SECONDS > LAUNCH_TIMEOUT_SECONDS


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
