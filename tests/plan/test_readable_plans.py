"""A plan a reviewer reads in one pass (issue 25): changes run through the real program twice, and the plan
judged by what it says: each change by meaning, each replacement with what forces it, one header per stack
with what `pulumi up` does, the pools and their worst case, and what runs. The summariser's rules on their
own are in test_summary.py."""

import json
import re
from decimal import Decimal
from functools import cache
from typing import Any

import pytest

from config.stack import parse_stack_config
from facts.prometheus_stack import CRD_CHART_VERSION, STACK_CHART_VERSION
from pools.cost import stack_cost
from synth.plan import (
    Plan,
    Resource,
    State,
    Step,
    header,
    plan,
    render_json,
    render_markdown,
    render_text,
    state_of_run,
)
from synth.runner import stack_config
from synth.summary import Item
from tests.conftest import stack_run
from tests.plan.test_transitions import RELEASE, Sections, pool, transition

GPU_OPERATOR = (RELEASE, "gpu-operator")
MIG_POOL = {
    "name": "gpu-mig",
    "instanceTypes": ["p5.48xlarge"],
    "limits": {"nvidia.com/gpu": 56},
    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m"},
    "mig": {"profile": "all-1g.10gb"},
}


def add_mig_pool(s: Sections) -> None:
    """docs/cookbook.md's mig-single recipe: prod's cap raised to admit the pool."""
    s["gpu-eks:cost"]["maxWorstCaseUsdPerHour"] = 600
    s["gpu-eks:nodePools"].append(MIG_POOL)


@cache
def mig_pool_added() -> Plan:
    """Prod's plan for `add_mig_pool` (several tests read it)."""
    return transition("prod", add_mig_pool)


def changes(result: Plan, type_token: str, name: str) -> list[str]:
    step = result.find(type_token, name)
    assert step is not None, (type_token, name)
    return [str(c) for c in step.changes]


def step_text(result: Plan, stack: str, type_token: str, name: str, verbose: bool = False) -> str:
    """The lines of one step in the text plan: its own line and the indented ones under it."""
    lines = render_text(stack, result, verbose).splitlines()
    own = re.compile(rf"^  \S.* {re.escape(type_token)} {re.escape(name)}(  |$)")
    start = next(i for i, line in enumerate(lines) if own.match(line))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("      ")), len(lines))
    return "\n".join(lines[start:end])


# --- the three examples -----------------------------------------------------------------------


def test_a_new_mig_pool_is_one_toleration_per_list_in_the_gpu_operator_release() -> None:
    result = mig_pool_added()
    assert step_text(result, "prod", *GPU_OPERATOR) == (
        "  ~ update  kubernetes:helm.sh/v3:Release gpu-operator\n"
        "      values.daemonsets.tolerations: + gpu-eks.io/mig-pending=true:NoSchedule\n"
        "      values.node-feature-discovery.worker.tolerations: + gpu-eks.io/mig-pending=true:NoSchedule"
    )
    # The twelve paths the plan used to list stay under --verbose and in --json.
    step = result.find(*GPU_OPERATOR)
    assert step is not None
    assert len(step.paths) == 12
    verbose = step_text(result, "prod", *GPU_OPERATOR, verbose=True)
    assert "values.daemonsets.tolerations[2].operator" in verbose
    [entry] = [e for e in json.loads(render_json(result)) if (e["type"], e["name"]) == GPU_OPERATOR]
    assert entry["paths"] == list(step.paths)
    assert entry["changes"] == [str(c) for c in step.changes]
    # What else the pool brings, each by meaning.
    assert changes(result, RELEASE, "karpenter-controller") == [
        "values.settings.featureGates.nodeOverlay: false -> true"
    ]
    assert changes(result, "kubernetes:apps/v1:Deployment", "gpu-node-guard-deployment") == [
        "spec.template.spec.containers[guard].env[GPU_NODE_GUARD_SETTINGS].value.pools: "
        "+ gpu-mig: {initializationTimeoutSeconds: 2400, migGate: true}"
    ]
    assert (
        "data.groups[gpu-eks.pools].rules: 4 items added (GpuNodeIdle:gpu-mig, "
        "GpuNodeNotInitialized:gpu-mig, GpuPodsUnschedulable:gpu-mig, GpuPoolAtLimitWithPendingPods:gpu-mig)"
        in changes(result, "aws:amp/ruleGroupNamespace:RuleGroupNamespace", "observability")
    )


def test_the_dashboard_replaced_by_a_new_pool_says_what_forces_it() -> None:
    """The issue's "replace (delete first)" with no reason: pulumi-kubernetes replaces a ConfigMap whose
    data changes; the dashboard's queries now select the new pool."""
    result = mig_pool_added()
    step = result.find("kubernetes:core/v1:ConfigMap", "observability-gpu-eks-overview")
    assert step is not None
    assert (step.op, step.delete_first) == ("replace", True)
    assert step.reason == (
        "because data changed (pulumi-kubernetes treats a ConfigMap's data as immutable unless the provider "
        "sets enableConfigMapMutable)"
    )
    text = step_text(result, "prod", step.type, step.name)
    assert text.startswith(
        "  +-replace (delete first) kubernetes:core/v1:ConfigMap observability-gpu-eks-overview  "
        "because data changed (pulumi-kubernetes"
    )
    assert (
        "      data.gpu-eks-overview.json.panels[Estimated hourly cost by pool].targets[A].expr: "
        '…gpu-inference|gpu-training"}) -> …gpu-inference|gpu-mig|gpu-training"})' in text
    )


def test_a_new_time_slicing_ratio_is_the_label_and_the_capacity_it_changes() -> None:
    result = transition("dev", lambda s: pool(s, "gpu-inference").update(timeSlicing={"replicas": 2}))
    assert changes(result, "kubernetes:karpenter.sh/v1:NodePool", "node-pools-gpu-inference") == [
        "spec.template.metadata.labels.nvidia.com/device-plugin.config: time-slicing-4 -> time-slicing-2"
    ]
    assert changes(
        result, "kubernetes:karpenter.sh/v1alpha1:NodeOverlay", "node-overlays-gpu-inference-1gpu"
    ) == ['spec.capacity.nvidia.com/gpu: "4" -> "2"']
    job = result.find("kubernetes:batch/v1:Job", "smoke-test")
    assert job is not None
    assert job.reason == "because metadata.name changed (forces a new object)"
    [rename] = job.changes
    assert rename.where == "metadata.name"


def test_the_mixed_mig_strategy_is_one_line_for_the_64_device_plugin_configs() -> None:
    result = transition("prod", lambda s: s["gpu-eks:gpuOperator"].update(mig={"strategy": "mixed"}))
    assert changes(result, *GPU_OPERATOR) == [
        "values.devicePlugin.config.data: 64 entries changed (default ... time-slicing-64): "
        "flags.migStrategy: single -> mixed",
        "values.mig.strategy: single -> mixed",
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda s: pool(s, "gpu-inference").update(zone="us-west-2a"),
            ("node-pools-gpu-inference", "+ topology.kubernetes.io/zone In [us-west-2a]"),
        ),
        (
            lambda s: pool(s, "gpu-training").update(zone="us-west-2b"),
            ("node-pools-gpu-training", "~ topology.kubernetes.io/zone In [us-west-2a] -> In [us-west-2b]"),
        ),
        (
            lambda s: pool(s, "gpu-training").update(instanceFamilies=["p5"]),
            (
                "node-pools-gpu-training",
                "~ karpenter.k8s.aws/instance-family In [p4d, p5] -> In [p5]",
            ),
        ),
    ],
)
def test_a_pool_requirement_is_one_line_as_karpenter_writes_it(
    change: Any, expected: tuple[str, str]
) -> None:
    """A pool gaining a zone (as prod's training pool did when EFA pools got one) or moving to another."""
    result = transition("prod", change)
    name, requirement = expected
    assert f"spec.template.spec.requirements: {requirement}" in changes(
        result, "kubernetes:karpenter.sh/v1:NodePool", name
    )


# --- replacements say what forces them ---------------------------------------------------------------


def test_a_cascaded_replacement_names_what_it_follows() -> None:
    """A new VPC CIDR: the system node group follows its replaced subnets (refused as a whole, see
    test_transitions.py, but each line still says why)."""
    result = transition("dev", lambda s: s["gpu-eks:network"].update(cidr="10.21.0.0/16"))
    group = result.find("aws:eks/nodeGroup:NodeGroup", "cluster-system")
    assert group is not None
    assert group.cascaded
    assert group.reason.startswith(
        "because subnetIds comes from replaced aws:ec2/subnet:Subnet::network-private-"
    )
    assert group.reason.endswith("(forces a new resource)")
    cluster = result.find("eks:index:Cluster", "cluster")
    assert cluster is not None
    assert cluster.op == "update"
    assert "vpcId comes from replaced aws:ec2/vpc:Vpc::network" in cluster.reason
    assert cluster.reason.endswith("(known once that exists again)")
    assert all(s.reason for s in result.steps if s.op == "replace")
    subnet = result.find("aws:ec2/subnet:Subnet", "network-private-us-west-2a")
    assert subnet is not None
    assert subnet.reason == "because cidrBlock changed (forces a new resource)"
    assert [str(c) for c in subnet.changes] == ["cidrBlock: 10.20.0.0/18 -> 10.21.0.0/18"]


def kubernetes_object(name: str, inputs: dict[str, Any], provider: str | None = None) -> Resource:
    type_token = "kubernetes:core/v1:ConfigMap"
    return Resource(f"{type_token}::{name}", type_token, name, inputs, provider=provider)


def test_a_replaced_provider_is_named_by_what_it_manages() -> None:
    provider_type = "pulumi:providers:kubernetes"
    provider = f"{provider_type}::k8s"

    def state(server: str) -> State:
        kubeconfig = {
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "contexts": [{"name": "x", "context": {"cluster": "c"}}],
            "current-context": "x",
        }
        resources = (
            Resource(provider, provider_type, "k8s", {"kubeconfig": json.dumps(kubeconfig)}),
            kubernetes_object("cm", {"metadata": {"name": "cm"}, "data": {"a": "1"}}, provider),
        )
        return State({r.key: r for r in resources}, "test")

    result = plan(state("https://old"), state("https://new"))
    replaced = {s.name: s for s in result.steps}
    assert replaced["k8s"].reason == (
        "because kubeconfig points at another cluster (forces a new provider, and with it every object it "
        "manages)"
    )
    assert (
        replaced["cm"].reason
        == f"because its provider {provider_type}::k8s is replaced (forces a new object)"
    )
    assert [str(c) for c in replaced["k8s"].changes] == [
        "kubeconfig.clusters[c].cluster.server: https://old -> https://new"
    ]


# --- one header per stack ------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_header_says_counts_pools_and_versions_as_the_configuration_does(stack: str) -> None:
    """Recomputed another way: each pool's worst case as `synth cost` computes it from the configuration,
    the versions as the stack file and the pinned facts say."""
    state = state_of_run(stack_run(stack), f"Pulumi.{stack}.yaml")
    config = parse_stack_config(stack_config(stack))
    cost = stack_cost(config.node_pools, config.gpu_operator, overlays=config.karpenter.gpu_sharing_overlays)
    pools = []
    for p in sorted(cost.pools, key=lambda p: p.spend.pool):
        worst = p.spend.worst_case
        assert worst is not None
        pools.append(f"{p.spend.pool} ${worst.usd_per_hour.quantize(Decimal('0.01')):,}/h")
    charts = {
        "gpu-operator": config.gpu_operator.version,
        "karpenter": config.karpenter.version,  # karpenter-crd moves with it: said once
    }
    if any(p.efa for p in config.node_pools):
        charts["aws-efa-k8s-device-plugin"] = config.efa_device_plugin.version
    if config.observability.backend != "none":
        charts |= {
            "kube-prometheus-stack": STACK_CHART_VERSION,
            "prometheus-operator-crds": CRD_CHART_VERSION,
        }
    versions = ", ".join(f"{c} {v}" for c, v in sorted(charts.items()))
    assert header(stack, plan(state, state)) == (
        f"{stack}: 0 create, 0 update, 0 replace, 0 delete ({len(state.resources)} unchanged) · pools "
        f"{', '.join(pools)} · Kubernetes {config.cluster.kubernetes_version} · {versions}"
    )


def test_the_header_shows_what_moves() -> None:
    def bump(s: Sections) -> None:
        s["gpu-eks:cluster"].update(kubernetesVersion="1.36")
        s["gpu-eks:karpenter"].update(version="1.14.2")
        pool(s, "gpu-inference")["limits"].update({"nvidia.com/gpu": "8"})

    result = transition("dev", bump)
    counts = ", ".join(f"{result.count(op)} {op}" for op in ("create", "update", "replace", "delete"))
    assert header("dev", result) == (
        f"dev: {counts} ({result.unchanged} unchanged) · pools gpu-inference $16.38/h -> $8.19/h (-50%) · "
        "Kubernetes 1.35 -> 1.36 · gpu-operator v26.7.0, karpenter 1.14.1 -> 1.14.2"
    )
    # The header is the markdown section's heading.
    assert render_markdown("dev", result).startswith(
        f"### `dev`: {header('dev', result).removeprefix('dev: ')}\n"
    )


def test_a_chart_out_of_lockstep_and_new_and_removed_pools_are_said() -> None:
    def release(chart: str, version: str) -> Resource:
        return Resource(f"{RELEASE}::{chart}", RELEASE, chart, {"chart": chart, "version": version})

    before = State(
        {r.key: r for r in (release("karpenter", "1.14.1"), release("karpenter-crd", "1.14.1"))}, "a"
    )
    after = State(
        {r.key: r for r in (release("karpenter", "1.14.2"), release("karpenter-crd", "1.14.1"))}, "b"
    )
    assert header("x", plan(before, after)).endswith(" · karpenter 1.14.1 -> 1.14.2, karpenter-crd 1.14.1")
    gone = State({}, "c")
    assert header("x", plan(before, gone)).endswith(" · karpenter removed")
    assert header("x", plan(gone, before)).endswith(" · karpenter 1.14.1 (new)")


def test_new_and_removed_pools_are_in_the_header() -> None:
    added = mig_pool_added()
    assert "· pools gpu-inference $103.94/h, gpu-mig $55.04/h (new), gpu-training $440.32/h ·" in header(
        "prod", added
    )
    removed = transition("prod", add_mig_pool, reverse=True)
    assert "· pools gpu-inference $103.94/h, gpu-mig removed, gpu-training $440.32/h ·" in header(
        "prod", removed
    )


# --- the three outputs ---------------------------------------------------------------------------------


def test_markdown_cells_carry_the_reason_and_each_change() -> None:
    result = transition("dev", lambda s: pool(s, "gpu-inference").update(timeSlicing={"replicas": 2}))
    markdown = render_markdown("dev", result)
    assert (
        "| replace (delete first) | `kubernetes:batch/v1:Job` | `smoke-test` | because metadata.name changed "
        "(forces a new object)<br>`metadata.name: cuda-smoke-test-" in markdown
    )
    assert (
        "| update | `kubernetes:karpenter.sh/v1:NodePool` | `node-pools-gpu-inference` | "
        "`spec.template.metadata.labels.nvidia.com/device-plugin.config: time-slicing-4 -> time-slicing-2` |"
        in markdown
    )
    verbose = render_markdown("dev", result, verbose=True)
    assert "<br>paths: `spec.template.metadata.labels.nvidia.com/device-plugin.config`" in verbose


def test_a_table_cell_escapes_what_markdown_would_read() -> None:
    step = Step("update", "t", "n", paths=("a",), changes=())
    result = Plan("b", "a", (step,), 0, ())
    assert "| update | `t` | `n` |  |" in render_markdown("x", result)
    step = Step("update", "t", "n", paths=("a",), changes=(Item(("expr",), 'x{a=~"b|c"} `q`'),))
    cell = render_markdown("x", Plan("b", "a", (step,), 0, ())).splitlines()[-1]
    assert cell == '| update | `t` | `n` | `` expr: x{a=~"b\\|c"} `q` `` |'
