"""The changes a platform team makes in its first month, each run through the real program twice (the
committed stack, then the stack with the change) and judged by the plan `pulumi up` would carry out:
what is created, updated, replaced or deleted, and that nothing else is replaced or deleted."""

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from components import node_pools
from components.karpenter_api import to_manifest
from config.errors import ConfigError
from synth import mocks
from synth.mocks import AwsMocks
from synth.plan import Plan, State, plan, state_of_run
from synth.runner import ProgramRun, RecordingMonitor, run_program, stack_config
from tests.conftest import stack_run

Sections = dict[str, Any]
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
RELEASE = "kubernetes:helm.sh/v3:Release"
CLUSTER = "eks:index:Cluster"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_POLICY = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
INTERRUPTION = {
    ("aws:sqs/queue:Queue", "karpenter-interruption"),
    ("aws:sqs/queuePolicy:QueuePolicy", "karpenter-interruption"),
    ("aws:iam/policy:Policy", "karpenter-controller-InterruptionPolicy"),
    ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "karpenter-controller-InterruptionPolicy"),
    *(
        (f"aws:cloudwatch/{kind}", f"karpenter-{rule}")
        for kind in ("eventRule:EventRule", "eventTarget:EventTarget")
        for rule in (
            "health-event",
            "spot-interruption",
            "rebalance",
            "instance-state-change",
            "capacity-reservation-interruption",
        )
    ),
}
"""What interruption handling adds: the queue, its policy, five rules and their targets, the controller's
interruption policy and its attachment."""


def sections(stack: str) -> Sections:
    """The config sections of a committed stack file, parsed (keys as in the file: `gpu-eks:cluster`...)."""
    return {k: v if k.startswith("aws:") else json.loads(v) for k, v in stack_config(stack).items()}


def fresh_run(stack: str) -> ProgramRun:
    """The committed stack run anew, never a shared earlier run (`synth.runner.share_runs`): for a test that
    has patched what the program or the mocks do (a run with its own monitor is never shared)."""
    return run_program(stack_config(stack), stack=stack, monitor=RecordingMonitor(AwsMocks("us-west-2")))


def transition(stack: str, change: Callable[[Sections], None], *, reverse: bool = False) -> Plan:
    """The plan from the committed stack to the stack with `change` applied (or back, with `reverse`)."""
    changed = sections(stack)
    change(changed)
    config = {k: v if k.startswith("aws:") else json.dumps(v) for k, v in changed.items()}
    committed = state_of_run(stack_run(stack), f"Pulumi.{stack}.yaml")
    edited = state_of_run(run_program(config, stack=stack), "changed")
    return plan(edited, committed) if reverse else plan(committed, edited)


def ops(result: Plan, op: str) -> set[tuple[str, str]]:
    return {(s.type, s.name) for s in result.of(op)}  # type: ignore[arg-type]


def assert_nothing_replaced_or_deleted(result: Plan) -> None:
    assert result.of("replace") == [], result.steps
    assert result.of("delete") == [], result.steps


def pool(sections: Sections, name: str) -> dict[str, Any]:
    return next(p for p in sections["gpu-eks:nodePools"] if p["name"] == name)


# --- AMI and node settings ----------------------------------------------------------------------


SMOKE_JOB = ("kubernetes:batch/v1:Job", "smoke-test")


def test_ami_bump_updates_the_node_class_in_place_and_runs_the_smoke_test_again() -> None:
    result = transition("dev", lambda s: pool(s, "gpu-inference").update(ami="al2023@v20260801"))
    job, node_class = result.steps  # replacements are listed first
    assert (node_class.op, node_class.type, node_class.name) == (
        "update",
        NODE_CLASS,
        "node-pools-class-gpu-inference",
    )
    assert node_class.because == ("spec.amiSelectorTerms[0].alias",)
    # Karpenter rolls the pool's nodes by drift, within its budgets; the smoke test, named after what it
    # tests, proves the new AMI on a new node.
    assert ((job.type, job.name), job.op, job.because) == (SMOKE_JOB, "replace", ("metadata.name",))
    assert [f.message for f in result.findings] == [
        "replace kubernetes:batch/v1:Job smoke-test: the Job runs again on a node Karpenter launches in pool "
        "gpu-inference, and `pulumi up` waits for it",
        f"update {NODE_CLASS} node-pools-class-gpu-inference: Karpenter replaces nodes of pool "
        "gpu-inference as drifted (spec.amiSelectorTerms: nodes not on an AMI it now selects (AMIDrift)), "
        "after `pulumi up` "
        'and as its disruption budgets allow (none set, so Karpenter\'s default nodes "10%"); each drain '
        "waits up to its terminationGracePeriod (1h), then terminates the node anyway",
    ]


def test_a_change_the_smoke_test_does_not_test_leaves_its_finished_job_alone() -> None:
    result = transition("dev", lambda s: pool(s, "gpu-inference")["limits"].update({"cpu": "512"}))
    assert [(s.op, s.name) for s in result.steps] == [("update", "node-pools-gpu-inference")]


def test_ami_bump_of_one_pool_leaves_the_other_pools_alone() -> None:
    result = transition("prod", lambda s: pool(s, "gpu-training").update(ami="al2023@v20260801"))
    assert [(s.op, s.type, s.name) for s in result.steps] == [
        ("update", NODE_CLASS, "node-pools-class-gpu-training")
    ]


def test_root_volume_and_kubelet_changes_update_the_node_class_in_place() -> None:
    def change(s: Sections) -> None:
        pool(s, "gpu-training").update(rootVolume={"sizeGib": 800}, kubelet={"maxPods": 64})

    result = transition("prod", change)
    [step] = result.steps
    assert (step.op, step.name) == ("update", "node-pools-class-gpu-training")
    assert set(step.because) == {
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "spec.kubelet.maxPods",
    }


# --- Kubernetes and chart versions --------------------------------------------------------------


def test_kubernetes_minor_bump_moves_cluster_node_group_and_add_ons_together_in_place() -> None:
    """The control plane, the system node group and every add-on follow `kubernetesVersion`, each an
    update of its version; nothing else changes, nothing is created, replaced or deleted."""
    result = transition("prod", lambda s: s["gpu-eks:cluster"].update(kubernetesVersion="1.36"))
    assert_nothing_replaced_or_deleted(result)
    assert [(s.op, s.type, s.name, s.because) for s in result.steps] == [
        ("update", "aws:eks/addon:Addon", f"cluster-{addon}", ("addonVersion",))
        for addon in ("coredns", "eks-pod-identity-agent", "kube-proxy", "vpc-cni")
    ] + [
        ("update", "aws:eks/addon:Addon", "storage-aws-ebs-csi-driver", ("addonVersion",)),
        # The recommended AMI release of the new minor comes with it (SSM's answer for 1.36).
        ("update", "aws:eks/nodeGroup:NodeGroup", "cluster-system", ("releaseVersion", "version")),
        ("update", CLUSTER, "cluster", ("version",)),
    ]


def test_a_new_recommended_system_node_release_is_an_update_of_the_node_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between minors, the system nodes follow the AMI release EKS recommends (security fixes): when SSM
    names a newer one, the plan shows it as an update of the node group's releaseVersion, nothing else."""
    committed = state_of_run(stack_run("prod"), "Pulumi.prod.yaml")
    monkeypatch.setitem(mocks._RECOMMENDED_RELEASES, "1.35", "1.35.7-20260801")
    newer = state_of_run(fresh_run("prod"), "a newer recommended release")
    result = plan(committed, newer)
    assert [(s.op, s.type, s.name, s.because) for s in result.steps] == [
        ("update", "aws:eks/nodeGroup:NodeGroup", "cluster-system", ("releaseVersion",))
    ]
    assert result.findings == ()


def test_support_policy_and_log_retention_are_updates_of_their_resources() -> None:
    result = transition("prod", lambda s: s["gpu-eks:cluster"].update(upgradePolicy="EXTENDED"))
    assert [(s.op, s.type, s.name, s.because) for s in result.steps] == [
        ("update", CLUSTER, "cluster", ("upgradePolicy.supportType",))
    ]
    result = transition("prod", lambda s: s["gpu-eks:cluster"].update(logRetentionDays=30))
    assert [(s.op, s.type, s.name, s.because) for s in result.steps] == [
        ("update", "aws:cloudwatch/logGroup:LogGroup", "cluster-control-plane-logs", ("retentionInDays",))
    ]


def test_a_private_access_cidr_adds_one_ingress_rule_and_touches_nothing_else() -> None:
    result = transition(
        "prod", lambda s: s["gpu-eks:cluster"]["endpoint"].update(privateAccessCidrs=["10.100.0.0/16"])
    )
    assert [(s.op, s.type, s.name) for s in result.steps] == [
        (
            "create",
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "cluster-api-from-10.100.0.0-16",
        )
    ]


def test_karpenter_patch_bump_updates_both_charts_in_place() -> None:
    result = transition("dev", lambda s: s["gpu-eks:karpenter"].update(version="1.14.2"))
    assert [(s.op, s.type, s.name, s.because) for s in result.steps] == [
        ("update", RELEASE, "karpenter-controller", ("version",)),
        ("update", RELEASE, "karpenter-crd", ("version",)),
    ]


def test_gpu_operator_patch_bump_updates_its_release_in_place() -> None:
    result = transition("prod", lambda s: s["gpu-eks:gpuOperator"].update(version="v26.7.1"))
    assert [(s.op, s.type, s.name, s.because) for s in result.steps] == [
        ("update", RELEASE, "gpu-operator", ("version",))
    ]


# --- pools --------------------------------------------------------------------------------------


def add_batch_pool(s: Sections) -> None:
    s["gpu-eks:nodePools"].append(
        {
            "name": "gpu-batch",
            "instanceFamilies": ["g6"],
            "capacityTypes": ["spot"],
            "limits": {"nvidia.com/gpu": "8"},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"},
        }
    )


def test_adding_a_pool_creates_its_node_class_and_node_pool_only() -> None:
    result = transition("dev", add_batch_pool)
    assert_nothing_replaced_or_deleted(result)
    assert ops(result, "create") == {
        (NODE_CLASS, "node-pools-class-gpu-batch"),
        (NODE_POOL, "node-pools-gpu-batch"),
    }
    # The operator's values and the node guard's settings follow the GPU pools.
    assert ops(result, "update") <= {
        (RELEASE, "gpu-operator"),
        ("kubernetes:apps/v1:Deployment", "gpu-node-guard-deployment"),
    }
    # Whether the region has g6 capacity is not known offline: the plan says so, naming the pool; and what
    # the new pool may spend, and the stack's total with it.
    messages = [f.message for f in result.findings]
    assert messages[0] == (
        f"create {NODE_POOL} node-pools-gpu-batch: whether us-west-2 offers the pool's instance types (g6.*) "
        "is not checked (no per-region offering table can be had offline); `aws ec2 "
        "describe-instance-type-offerings --region us-west-2 --location-type availability-zone --filters "
        "Name=instance-type,Values=g6.*` lists the zones that do"
    )
    assert messages[1].startswith("new pool gpu-batch: its limits let it run up to $")
    assert messages[2].startswith("worst-case spend of the stack's total rises $16.38/h -> $")
    assert len(messages) == 3


def test_removing_a_pool_deletes_its_node_class_and_node_pool_only_and_says_so() -> None:
    result = transition("dev", add_batch_pool, reverse=True)
    assert result.of("replace") == []
    assert result.of("create") == []
    assert ops(result, "delete") == {
        (NODE_CLASS, "node-pools-class-gpu-batch"),
        (NODE_POOL, "node-pools-gpu-batch"),
    }
    called_out = " ".join(f.message for f in result.findings)
    assert "node-pools-gpu-batch" in called_out
    assert "node-pools-class-gpu-batch" in called_out
    assert not result.blocking


def test_prods_training_pool_gets_its_placement_group_in_place() -> None:
    """Turning `placementGroup` on for prod's training pool (the plan back to the committed prod): the group
    is created and the pool's class is updated in place to select it (Karpenter then replaces the pool's nodes
    as drifted, under its budgets); nothing else moves."""

    def without(s: Sections) -> None:
        del pool(s, "gpu-training")["placementGroup"]

    result = transition("prod", without, reverse=True)
    assert_nothing_replaced_or_deleted(result)
    assert ops(result, "create") == {
        ("aws:ec2/placementGroup:PlacementGroup", "node-pools-placement-gpu-training")
    }
    assert ops(result, "update") == {(NODE_CLASS, "node-pools-class-gpu-training")}


def test_removing_a_pool_of_prod_leaves_the_other_pool_alone() -> None:
    def remove(s: Sections) -> None:
        s["gpu-eks:nodePools"] = [p for p in s["gpu-eks:nodePools"] if p["name"] != "gpu-inference"]

    result = transition("prod", remove)
    assert result.of("create") == []
    assert ops(result, "delete") == {
        (NODE_CLASS, "node-pools-class-gpu-inference"),
        (NODE_POOL, "node-pools-gpu-inference"),
        ("kubernetes:core/v1:ConfigMap", "observability-gpu-eks-pool-gpu-inference"),
    }
    # Observability follows: the overview dashboard and the alerts no longer select the pool; the GPU node
    # guard stops watching it (its settings travel in the Deployment).
    assert ops(result, "replace") == {("kubernetes:core/v1:ConfigMap", "observability-gpu-eks-overview")}
    assert ops(result, "update") == {
        ("aws:amp/ruleGroupNamespace:RuleGroupNamespace", "observability"),
        ("kubernetes:apps/v1:Deployment", "gpu-node-guard-deployment"),
    }


# --- Karpenter ----------------------------------------------------------------------------------


def test_karpenter_namespace_change_replaces_only_the_controller_release_delete_first() -> None:
    result = transition("dev", lambda s: s["gpu-eks:karpenter"].update(namespace="karpenter"))
    assert result.of("delete") == []
    assert result.of("create") == []
    replaced = {(s.type, s.name): s for s in result.of("replace")}
    # The GPU node guard's Role that reads Karpenter's leader Lease follows it to the new namespace.
    assert replaced.keys() == {
        (RELEASE, "karpenter-controller"),
        (POD_IDENTITY, "karpenter-controller"),
        ("kubernetes:rbac.authorization.k8s.io/v1:Role", "gpu-node-guard-role-lease-reader"),
        ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "gpu-node-guard-rolebinding-lease-reader"),
    }
    controller = replaced[(RELEASE, "karpenter-controller")]
    assert controller.because == ("namespace",)
    assert controller.delete_first
    # The association is keyed by namespace: a new one for the new namespace, then the old one goes.
    assert not replaced[(POD_IDENTITY, "karpenter-controller")].delete_first
    # The CRDs (and with them every NodePool and NodeClaim) stay.
    assert result.find(RELEASE, "karpenter-crd") is None
    assert not any(s.type in (NODE_POOL, NODE_CLASS) for s in result.steps)
    assert not result.blocking


def identity(value: str) -> Callable[[Sections], None]:
    return lambda s: s["gpu-eks:karpenter"].update(identity=value)


def test_pod_identity_to_irsa_and_back() -> None:
    to_irsa = transition("dev", identity("irsa"))
    back = transition("dev", identity("irsa"), reverse=True)
    for result in (to_irsa, back):
        assert result.of("replace") == []
        assert ops(result, "update") == {
            ("aws:iam/role:Role", "karpenter-controller"),  # its trust policy
            (RELEASE, "karpenter-controller"),  # the service account's role annotation
        }
    assert ops(to_irsa, "delete") == {(POD_IDENTITY, "karpenter-controller")}
    assert to_irsa.of("create") == []
    assert ops(back, "create") == {(POD_IDENTITY, "karpenter-controller")}
    assert back.of("delete") == []


def interruption_off(s: Sections) -> None:
    s["gpu-eks:karpenter"].update(interruptionHandling=False)


def test_interruption_handling_off_and_on() -> None:
    off = transition("prod", interruption_off)
    on = transition("prod", interruption_off, reverse=True)
    for result in (off, on):
        assert result.of("replace") == []
        # The interruption alerts go and come with the queue (prod's alert rules live in its AMP workspace).
        assert [(s.type, s.name, s.because) for s in result.of("update")] == [
            ("aws:amp/ruleGroupNamespace:RuleGroupNamespace", "observability", ("data",)),
            (RELEASE, "karpenter-controller", ("values.settings.interruptionQueue",)),
        ]
    assert ops(off, "delete") == INTERRUPTION
    assert off.of("create") == []
    assert ops(on, "create") == INTERRUPTION
    assert on.of("delete") == []


# --- observability -------------------------------------------------------------------------------

SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
GUARD_MONITOR = (SERVICE_MONITOR, "gpu-node-guard-servicemonitor")
SCRAPED_RELEASES = {
    # The charts' own ServiceMonitors turn on; the DCGM exporter's adds the node relabeling.
    (RELEASE, "karpenter-controller"): ("values.serviceMonitor.enabled",),
    (RELEASE, "gpu-operator"): (
        "values.dcgmExporter.serviceMonitor.enabled",
        "values.dcgmExporter.serviceMonitor.relabelings[0].action",
        "values.dcgmExporter.serviceMonitor.relabelings[0].sourceLabels[0]",
        "values.dcgmExporter.serviceMonitor.relabelings[0].targetLabel",
    ),
}


def managed_observability(s: Sections) -> None:
    s["gpu-eks:observability"] = {"backend": "managed"}


def no_observability(s: Sections) -> None:
    s.pop("gpu-eks:observability")


def _observability(result: Plan, op: str) -> set[tuple[str, str]]:
    """The steps of `op` that belong to the observability component, and the guard's ServiceMonitor."""
    steps = ops(result, op)
    assert all(name.startswith("observability") or (typ, name) == GUARD_MONITOR for typ, name in steps), steps
    return steps


def test_observability_on_only_creates_and_turns_the_scrapers_on() -> None:
    result = transition("dev", managed_observability)
    assert result.of("replace") == []
    assert result.of("delete") == []
    assert {(s.type, s.name): s.because for s in result.of("update")} == SCRAPED_RELEASES
    created = _observability(result, "create")
    assert {
        (RELEASE, "observability-crds"),
        (RELEASE, "observability"),
        ("aws:amp/workspace:Workspace", "observability"),
        ("aws:amp/ruleGroupNamespace:RuleGroupNamespace", "observability"),
        ("aws:iam/rolePolicy:RolePolicy", "observability-prometheus"),
        ("aws:iam/rolePolicy:RolePolicy", "observability-grafana"),
        (POD_IDENTITY, "observability-prometheus"),
        (POD_IDENTITY, "observability-grafana"),
        ("kubernetes:core/v1:ConfigMap", "observability-gpu-eks-overview"),
        ("kubernetes:core/v1:ConfigMap", "observability-gpu-eks-pool-gpu-inference"),
        GUARD_MONITOR,
    } <= created
    assert result.findings == ()


def with_managed_observability(s: Sections) -> None:
    s["gpu-eks:observability"] = {"backend": "managed", "alerting": {"snsTopic": "create"}}


def test_observability_off_deletes_what_it_created_and_says_what_goes_with_it() -> None:
    # A production stack may not go without alerts: refused before any resource.
    with pytest.raises(ConfigError, match=r"gpu-eks:observability\.backend"):
        transition("prod", no_observability)
    # dev with the managed backend, back to none.
    result = transition("dev", with_managed_observability, reverse=True)
    assert result.of("replace") == []
    assert result.of("create") == []
    assert {(s.type, s.name): s.because for s in result.of("update")} == SCRAPED_RELEASES
    deleted = _observability(result, "delete")
    assert {
        (RELEASE, "observability-crds"),
        ("aws:amp/workspace:Workspace", "observability"),
        ("aws:sns/topic:Topic", "observability-alerts"),
        GUARD_MONITOR,
    } <= (deleted)
    messages = {f.message: f.blocking for f in result.findings}
    crds = "delete kubernetes:helm.sh/v3:Release observability-crds"
    assert messages == {
        f"{crds}: deleting the prometheus-operator-crds release deletes its CRDs, and with them every "
        "ServiceMonitor, PodMonitor, PrometheusRule and other Prometheus Operator object in the cluster, "
        "also those this stack did not declare": False,
    }


def test_moving_prod_to_the_in_cluster_backend_swaps_the_managed_parts_only() -> None:
    result = transition(
        "prod",
        lambda s: s["gpu-eks:observability"].update(
            backend="inCluster",
            alerting={
                "receiverSecret": "alertmanager-receivers",
                "critical": "pagerduty",
                "heartbeatUrl": "https://hc-ping.example.com/3f1c2b7e-8d4a-4e6b-9a0f-5c2d1e7b8a90",
            },
        ),
    )
    dashboards = {
        "observability-gpu-eks-overview",
        "observability-gpu-eks-pool-gpu-inference",
        "observability-gpu-eks-pool-gpu-training",
    }
    # The dashboards query another data source type: pulumi-kubernetes replaces a ConfigMap whose data
    # changes (named, so delete-first: Grafana's sidecar drops each dashboard and loads it again).
    assert (
        {s.name for s in result.of("replace") if s.delete_first}
        == dashboards
        == {name for _, name in ops(result, "replace")}
    )
    assert _observability(result, "create") == {
        ("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "observability-rules")
    }
    assert {typ for typ, _ in _observability(result, "delete")} == {
        "aws:amp/workspace:Workspace",
        "aws:amp/ruleGroupNamespace:RuleGroupNamespace",
        "aws:iam/role:Role",
        "aws:iam/rolePolicy:RolePolicy",
        POD_IDENTITY,
        # Alerts go to the in-cluster Alertmanager instead of the workspace's SNS topic.
        "aws:amp/alertManagerDefinition:AlertManagerDefinition",
        "aws:kms/key:Key",
        "aws:sns/topic:Topic",
        "aws:sns/topicPolicy:TopicPolicy",
        "aws:sns/topicSubscription:TopicSubscription",  # prod's e-mail and heartbeat subscriptions
    }
    # The stack's values (agent -> server with a volume, AMP data source -> in-cluster Prometheus) change in
    # place; the CRDs and the scrapers stay.
    assert {name for _, name in ops(result, "update")} == {"observability"}
    assert [f.message for f in result.findings if f.blocking] == [
        "delete aws:amp/workspace:Workspace observability: the resource is protected; `pulumi up` refuses"
    ]


# --- people -------------------------------------------------------------------------------------

NEW_ADMIN = "arn:aws:iam::111122223333:role/ml-oncall"
NEW_ENTRY = "cluster-admin-111122223333-ml-oncall"


def test_a_new_admin_role_creates_its_access_entry_only_wherever_it_is_listed() -> None:
    appended = transition("prod", lambda s: s["gpu-eks:cluster"]["adminRoleArns"].append(NEW_ADMIN))
    prepended = transition("prod", lambda s: s["gpu-eks:cluster"]["adminRoleArns"].insert(0, NEW_ADMIN))
    for result in (appended, prepended):
        assert [(s.op, s.type, s.name) for s in result.steps] == [
            ("create", ACCESS_ENTRY, NEW_ENTRY),
            ("create", ACCESS_POLICY, NEW_ENTRY),
        ]


def test_removing_an_admin_role_deletes_its_access_entry_only() -> None:
    result = transition("prod", lambda s: s["gpu-eks:cluster"]["adminRoleArns"].pop(0))
    assert [(s.op, s.type, s.name) for s in result.steps] == [
        ("delete", ACCESS_ENTRY, "cluster-admin-111122223333-platform-admin"),
        ("delete", ACCESS_POLICY, "cluster-admin-111122223333-platform-admin"),
    ]


# --- teams --------------------------------------------------------------------------------------

NAMESPACE = "kubernetes:core/v1:Namespace"
QUOTA = "kubernetes:core/v1:ResourceQuota"
PLATFORM_ADMIN = "arn:aws:iam::111122223333:role/platform-admin"
PLATFORM_ENTRY = "teams-111122223333-platform-admin"


def admin_into_team(s: Sections) -> None:
    s["gpu-eks:cluster"]["adminRoleArns"].remove(PLATFORM_ADMIN)
    s["gpu-eks:teams"].append({"name": "platform", "roleArns": [PLATFORM_ADMIN], "access": "admin"})


def steps(result: Plan) -> list[tuple[str, str, str]]:
    return [(s.op, s.type, s.name) for s in result.steps]


def test_an_admin_role_moved_into_a_team_keeps_its_one_access_entry() -> None:
    """EKS allows one access entry per principal and the engine creates before it deletes: a new entry
    under the team's name would be refused (ResourceInUseException) while the admin one exists. The aliases
    make it the same entry, unchanged; only the policy associations come and go (other policies, so no
    collision)."""
    result = transition("prod", admin_into_team)
    assert steps(result) == [
        ("delete", ACCESS_POLICY, "cluster-admin-111122223333-platform-admin"),
        ("create", ACCESS_POLICY, f"{PLATFORM_ENTRY}-admin"),
        ("create", NAMESPACE, "teams-platform"),
    ]
    assert not result.blocking, result.findings


def test_a_team_role_moved_back_to_the_admins_keeps_its_one_access_entry() -> None:
    result = transition("prod", admin_into_team, reverse=True)
    assert steps(result) == [
        ("delete", ACCESS_POLICY, f"{PLATFORM_ENTRY}-admin"),
        ("delete", NAMESPACE, "teams-platform"),
        ("create", ACCESS_POLICY, "cluster-admin-111122223333-platform-admin"),
    ]
    assert not result.blocking, result.findings
    retained = [f.message for f in result.findings if "retainOnDelete" in f.message]
    assert retained == [
        f"delete {NAMESPACE} teams-platform: retained (retainOnDelete), Pulumi only forgets it; namespace "
        "platform stays in the cluster with everything in it: workloads keep running (and holding their "
        "GPUs), PersistentVolumeClaims keep their volumes. To remove them: `kubectl delete namespace "
        "platform` (volumes of a StorageClass that reclaims Delete go with their claims)"
    ]


def test_an_automation_role_moved_into_a_team_in_one_change_is_blocking() -> None:
    """The automation entries are named by purpose, not by principal, so no alias can carry them over: the
    plan says to make it two changes."""
    role = "arn:aws:iam::111122223333:role/gpu-eks-prod-preview"

    def change(s: Sections) -> None:
        del s["gpu-eks:cluster"]["automation"]
        s["gpu-eks:teams"].append({"name": "ci", "roleArns": [role]})

    result = transition("prod", change)
    assert [f.message for f in result.findings if f.blocking] == [
        f"create {ACCESS_ENTRY} teams-111122223333-gpu-eks-prod-preview has the clusterName, principalArn of "
        f"delete {ACCESS_ENTRY} cluster-automation-preview: `pulumi up` creates before it deletes, so the "
        "create collides with the old one (for an access entry EKS answers ResourceInUseException: one entry "
        "per principal). Make it two changes: remove the old one and `pulumi up`, then add the new one and "
        "`pulumi up`"
    ]


def test_a_role_joining_a_second_team_rescopes_its_association_delete_first() -> None:
    """accessScope is force-new: replaced create-first, the old association's delete (same principal and
    policy) would remove the new one's access."""
    inference = "arn:aws:iam::111122223333:role/ml-inference"
    result = transition(
        "prod",
        lambda s: s["gpu-eks:teams"].append({"name": "evaluation", "roleArns": [inference], "gpuQuota": 4}),
    )
    assert steps(result) == [
        ("replace", ACCESS_POLICY, "teams-111122223333-ml-inference-edit"),
        ("create", NAMESPACE, "teams-evaluation"),
        ("create", QUOTA, "teams-evaluation-gpu"),
    ]
    replaced = result.find(ACCESS_POLICY, "teams-111122223333-ml-inference-edit")
    assert replaced is not None
    assert replaced.delete_first
    assert replaced.because == ("accessScope.namespaces",)
    assert not result.blocking, result.findings
    assert any(
        f.message.startswith(f"create {NAMESPACE} teams-evaluation: if namespace evaluation exists already")
        and "AlreadyExists" in f.message
        for f in result.findings
    )


def test_removing_a_team_revokes_its_access_and_leaves_its_namespace() -> None:
    result = transition("prod", lambda s: s["gpu-eks:teams"].pop(0))
    assert steps(result) == [
        ("delete", ACCESS_ENTRY, "teams-111122223333-ml-inference"),
        ("delete", ACCESS_POLICY, "teams-111122223333-ml-inference-edit"),
        ("delete", NAMESPACE, "teams-inference"),
        ("delete", QUOTA, "teams-inference-gpu"),
    ]
    assert any("namespace inference stays in the cluster" in f.message for f in result.findings)
    assert not result.blocking


# --- what must stand out ------------------------------------------------------------------------


def test_renaming_the_protected_prod_cluster_replaces_it_and_cannot_deploy() -> None:
    result = transition("prod", lambda s: s["gpu-eks:cluster"].update(name="ml-prod-2"))
    cluster = result.find(CLUSTER, "cluster")
    assert cluster is not None
    assert cluster.op == "replace"
    assert cluster.because == ("name",)
    assert result.blocking  # protect: true
    # Everything in the cluster follows it: the Kubernetes provider and every object it manages.
    for step in result.steps:
        if step.type.startswith("kubernetes:"):
            assert step.op == "replace", step
    messages = [f.message for f in result.findings]
    assert any(m.startswith("replace eks:index:Cluster cluster") for m in messages)
    assert any(m.startswith("replace aws:eks/nodeGroup:NodeGroup cluster-system") for m in messages)
    assert any(m.startswith("replace aws:sqs/queue:Queue karpenter-interruption") for m in messages)
    assert any("protected" in m for m in messages)


def test_admin_entries_named_by_position_move_to_their_principal_names_unchanged() -> None:
    """Earlier versions named admin access entries by list position; the aliases carry them over."""
    now = state_of_run(stack_run("prod"), "now")
    earlier = {}
    for key, resource in now.resources.items():
        if resource.type in (ACCESS_ENTRY, ACCESS_POLICY) and resource.aliases:
            old_key = resource.aliases[0]
            earlier[old_key] = replace(resource, key=old_key, name=old_key.rsplit("::", 1)[1], aliases=())
        else:
            earlier[key] = resource
    assert any(k.endswith("::cluster-admin-0") for k in earlier)
    assert plan(State(earlier, "position-named"), now).steps == ()


def test_first_up_after_node_classes_got_pool_names() -> None:
    """Earlier versions named node classes after a digest of their settings. The one-time move: a class
    per pool is created, each NodePool points at its own (Karpenter drifts its nodes onto it, within the
    pool's budgets), and the old classes are deleted last, once their nodes are gone."""
    now = state_of_run(stack_run("prod"), "now")
    old_names = {
        f"node-pools-class-{p}": f"al2023-{n:08x}" for n, p in enumerate(["gpu-inference", "gpu-training"])
    }
    earlier = {}
    for key, current in now.resources.items():
        inputs = json.loads(json.dumps(current.inputs))
        old = current
        if current.type == NODE_CLASS:
            inputs["metadata"]["name"] = old_names[current.name]
            logical = f"node-pools-class-{old_names[current.name]}"
            old = replace(current, key=key.replace(current.name, logical), name=logical)
        if current.type == NODE_POOL:
            ref = inputs["spec"]["template"]["spec"]["nodeClassRef"]
            ref["name"] = old_names[f"node-pools-class-{ref['name']}"]
        earlier[old.key] = replace(old, inputs=inputs)
    result = plan(State(earlier, "digest-named classes"), now)
    assert result.of("replace") == []
    assert {(s.op, s.type) for s in result.steps} == {
        ("create", NODE_CLASS),
        ("update", NODE_POOL),
        ("delete", NODE_CLASS),
    }
    assert ops(result, "create") == {
        (NODE_CLASS, "node-pools-class-gpu-inference"),
        (NODE_CLASS, "node-pools-class-gpu-training"),
    }
    for step in result.of("update"):
        assert step.because == ("spec.template.spec.nodeClassRef.name",)
    assert len(result.of("delete")) == 2
    # Each old class waits for its nodes, which drift to the new class (nodeClassRef is in the pool's hash).
    assert len([f for f in result.findings if "finalizer holds the delete" in f.message]) == 2
    assert {m.split(": Karpenter")[0] for m in drifts(result)} == {
        f"update {NODE_POOL} node-pools-gpu-inference",
        f"update {NODE_POOL} node-pools-gpu-training",
    }
    assert len(result.findings) == 4
    assert not result.blocking


# --- changes `pulumi up` cannot carry out as planned (issue 24) ----------------------------------


def between(stack: str, first: Callable[[Sections], None], second: Callable[[Sections], None]) -> Plan:
    """The plan from the stack with `first` applied to the stack with `second` applied."""
    states = []
    for change in (first, second):
        changed = sections(stack)
        change(changed)
        config = {k: v if k.startswith("aws:") else json.dumps(v) for k, v in changed.items()}
        states.append(state_of_run(run_program(config, stack=stack), change.__name__))
    return plan(*states)


def blocking(result: Plan) -> list[str]:
    return [f.message for f in result.findings if f.blocking]


def test_a_new_vpc_cidr_is_refused_naming_the_key_and_the_way_to_do_it() -> None:
    """The VPC and subnets are replaced create-first; the cluster cannot follow its subnets into another VPC,
    the internet gateway cannot leave a VPC whose NAT addresses are still mapped, and a new NAT gateway
    cannot take the Elastic IP the old one holds."""
    result = transition("dev", lambda s: s["gpu-eks:network"].update(cidr="10.21.0.0/16"))
    assert result.blocking
    assert result.find("aws:ec2/vpc:Vpc", "network").op == "replace"  # type: ignore[union-attr]
    cluster = result.find(CLUSTER, "cluster")
    assert cluster is not None
    assert (cluster.op, cluster.cascaded) == ("update", True)
    assert "vpcId" in cluster.paths
    messages = blocking(result)
    assert any(
        m.startswith(
            "update eks:index:Cluster cluster changes vpcId, which moves the cluster's subnets to another VPC"
        )
        and "gpu-eks:network.cidr" in m
        and "new stack" in m
        for m in messages
    ), messages
    assert any(
        m.startswith("update aws:ec2/internetGateway:InternetGateway network changes vpcId") for m in messages
    )
    assert any(
        m.startswith(
            "replace aws:ec2/natGateway:NatGateway network-us-west-2a creates the new one first with "
            "the same allocationId"
        )
        for m in messages
    )


def test_moving_to_an_existing_vpc_is_refused_too() -> None:
    def existing(s: Sections) -> None:
        s["gpu-eks:network"] = {
            "existing": {
                "vpcId": "vpc-0123456789abcdef0",
                "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
            }
        }

    result = transition("dev", existing)
    assert any(m.startswith("update eks:index:Cluster cluster changes vpcId") for m in blocking(result))


def test_gpu_operator_namespace_change_replaces_its_release_delete_first_and_says_what_stops() -> None:
    result = transition("dev", lambda s: s["gpu-eks:gpuOperator"].update(namespace="nvidia"))
    assert not result.blocking
    assert result.of("delete") == []
    release = result.find(RELEASE, "gpu-operator")
    assert release is not None
    assert (release.op, release.because, release.delete_first) == ("replace", ("namespace",), True)
    assert ops(result, "replace") == {
        (RELEASE, "gpu-operator"),
        ("kubernetes:core/v1:Namespace", "gpu-operator"),
        SMOKE_JOB,  # the smoke test proves the reinstalled operator
    }
    finding = result.findings[0]
    assert finding.message.startswith(
        "replace kubernetes:helm.sh/v3:Release gpu-operator uninstalls the old release first: its "
        "ClusterPolicy goes, and with it the operands on every GPU node"
    )


@pytest.mark.parametrize(
    ("current", "target", "expected"),
    [
        ("1.35", "1.33", "EKS cannot downgrade a cluster's control plane: keep 1.35 (or move on to 1.36)"),
        ("1.34", "1.36", "EKS upgrades a control plane one minor version at a time: set 1.35 first"),
    ],
)
def test_kubernetes_version_moves_eks_refuses_are_blocking_and_name_the_next_version(
    current: str, target: str, expected: str
) -> None:
    def version(value: str) -> Callable[[Sections], None]:
        def move(s: Sections) -> None:
            s["gpu-eks:cluster"]["kubernetesVersion"] = value

        move.__name__ = f"kubernetes {value}"
        return move

    result = between("prod", version(current), version(target))
    assert_nothing_replaced_or_deleted(result)
    assert blocking(result) == [
        f"update eks:index:Cluster cluster: gpu-eks:cluster.kubernetesVersion {current} -> {target}: "
        + expected
        + (f", run `pulumi up`, then move on to {target}" if "first" in expected else "")
    ]


def test_a_region_change_replaces_every_regional_resource_and_is_refused() -> None:
    result = transition("dev", lambda s: s.update({"aws:region": "eu-west-1"}))
    assert result.blocking
    replaced = ops(result, "replace")
    run = stack_run("dev")
    regional = {
        (r.type, r.name)
        for r in run.resources
        if r.type.startswith(("aws:", "eks:")) and not r.type.startswith("aws:iam/")
    }
    # Each is replaced, or (named after an availability zone of the old region) deleted, its counterpart in
    # the new region's zones created.
    assert regional <= replaced | ops(result, "delete")
    assert {t for t, n in ops(result, "delete")} <= {t for t, n in ops(result, "create")}
    assert all("us-west-2" in n for _, n in ops(result, "delete"))
    assert not any(t.startswith("aws:iam/") for t, _ in replaced)  # IAM is global
    # Everything in the cluster follows it.
    assert {(r.type, r.name) for r in run.resources if r.type.startswith("kubernetes:")} <= replaced
    moved = [s for s in result.of("replace") if s.region_move]
    [message] = [m for m in blocking(result) if m.startswith("aws:region")]
    zonal = [s for s in result.of("delete") if s.type.startswith("aws:")]
    assert message.startswith(
        f"aws:region us-west-2 -> eu-west-1: every regional resource is replaced ({len(moved)}, and "
        f"{len(zonal)} named after the old region's zones deleted and created anew)"
    )
    assert "deploy one in eu-west-1" in message
    # In another region the names are free: no collision is claimed for the regional replacements.
    assert not any("collides" in m for m in blocking(result))


def test_changing_a_pools_sharing_says_what_its_physical_gpu_cap_becomes() -> None:
    def caps(result: Plan) -> list[str]:
        return [f.message for f in result.findings if f.message.startswith("pool ")]

    fewer_slices = transition("dev", lambda s: pool(s, "gpu-inference").update(timeSlicing={"replicas": 2}))
    assert caps(fewer_slices) == [
        "pool gpu-inference: its GPU cap goes from 4 GPUs (16 time-slices, 4 per GPU) to 8 GPUs (16 "
        "time-slices, 2 per GPU): the pool may now hold more physical GPUs"
    ]
    assert not fewer_slices.blocking

    def whole_gpus(s: Sections) -> None:
        del pool(s, "gpu-inference")["timeSlicing"]

    assert caps(transition("dev", whole_gpus)) == [
        "pool gpu-inference: its GPU cap goes from 4 GPUs (16 time-slices, 4 per GPU) to 16 GPUs: the pool "
        "may now hold more physical GPUs"
    ]
    # Raising the slices with the cap keeps the physical cap: nothing to call out.
    same = transition(
        "dev",
        lambda s: pool(s, "gpu-inference").update(
            timeSlicing={"replicas": 8}, limits={"nvidia.com/gpu": "32"}
        ),
    )
    assert caps(same) == []


def test_removing_the_training_pool_says_how_long_its_drain_and_the_wait_may_take() -> None:
    def remove(s: Sections) -> None:
        s["gpu-eks:nodePools"] = [p for p in s["gpu-eks:nodePools"] if p["name"] != "gpu-training"]

    result = transition("prod", remove)
    [message] = [f.message for f in result.findings if f.message.startswith(f"delete {NODE_POOL}")]
    assert message == (
        f"delete {NODE_POOL} node-pools-gpu-training: Karpenter deletes every NodeClaim of the pool, "
        "draining and terminating its nodes at once (disruption budgets do not apply); each drain waits up "
        "to the pool's terminationGracePeriod (24h) for pods to leave, then terminates the node anyway. "
        "`pulumi up` waits for the NodePool to be gone, which its NodeClaims hold until their nodes are, for "
        "up to 24h10m"
    )

    def add_ungraced(s: Sections) -> None:
        s["gpu-eks:nodePools"].append(
            {"name": "gpu-ungraced", "instanceTypes": ["g6.xlarge"], "limits": {"nvidia.com/gpu": "1"}}
        )

    # Back from a stack with a pool that has no terminationGracePeriod: that pool is deleted.
    ungraced = transition("prod", add_ungraced, reverse=True)
    [message] = [f.message for f in ungraced.findings if f.message.startswith(f"delete {NODE_POOL}")]
    assert "with no terminationGracePeriod a drain waits as long as PodDisruptionBudgets" in message
    assert message.endswith(
        "for up to 10m (pulumi-kubernetes' default), then fails and the next `up` waits again"
    )


OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"


def test_a_custom_resources_api_version_move_is_an_update_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """A future NodeOverlay `karpenter.sh/v1alpha1` -> `v1beta1`: the type token (and with it the URN)
    changes, and the API-version aliases carry the state over, so `pulumi up` updates each overlay's
    apiVersion instead of creating it again (a collision) and deleting the old one."""
    committed = state_of_run(stack_run("dev"), "Pulumi.dev.yaml")
    overlays = {r.name for r in committed.resources.values() if r.type == OVERLAY}
    assert overlays

    def bumped(obj: Any) -> dict[str, Any]:
        manifest = to_manifest(obj)
        if manifest["kind"] == "NodeOverlay":
            manifest["apiVersion"] = "karpenter.sh/v1beta1"
        return manifest

    monkeypatch.setattr(node_pools, "to_manifest", bumped)
    moved = state_of_run(fresh_run("dev"), "NodeOverlay v1beta1")
    result = plan(committed, moved)
    assert [(s.op, s.type, s.name, s.because) for s in result.steps] == [
        ("update", OVERLAY.replace("v1alpha1", "v1beta1"), name, ("apiVersion",)) for name in sorted(overlays)
    ]
    # And back, when the bump is reverted.
    assert {s.op for s in plan(moved, committed).steps} == {"update"}


def test_every_custom_resource_carries_its_api_version_aliases(any_stack: ProgramRun) -> None:
    custom = [r for r in any_stack.resources if r.type.startswith("kubernetes:") and "Release" not in r.type]
    custom = [r for r in custom if "." in r.type.split(":")[1].split("/")[0] and "k8s.io" not in r.type]
    assert custom
    for resource in custom:
        group, version = resource.type.split(":")[1].split("/")
        kind = resource.type.rsplit(":", 1)[1]
        aliased = {a.split("::")[-2].rsplit("$", 1)[-1] for a in resource.aliases}
        assert f"kubernetes:{group}/v1beta1:{kind}" in aliased or version == "v1beta1", resource.name
        assert f"kubernetes:{group}/{version}:{kind}" not in aliased


def test_moving_a_pool_with_a_placement_group_to_another_zone_says_its_drift_stalls() -> None:
    """A cluster placement group lives in the zone of its instances: prod's training pool moved from
    us-west-2a to us-west-2b cannot launch its replacements into the group while the old nodes hold it."""

    def stalls(result: Plan) -> list[str]:
        return [f.message for f in result.findings if "drift stalls" in f.message]

    moved = transition("prod", lambda s: pool(s, "gpu-training").update(zone="us-west-2b"))
    (message,) = stalls(moved)
    assert "moves from zone us-west-2a to us-west-2b" in message
    assert "kubectl delete nodeclaim -l karpenter.sh/nodepool=gpu-training" in message
    assert not moved.blocking
    # Without a placement group, or without a move, there is nothing to wait for.
    assert stalls(transition("prod", lambda s: pool(s, "gpu-training").update(placementGroup=False))) == []
    assert stalls(transition("prod", lambda s: pool(s, "gpu-inference").update(zone="us-west-2b"))) == []


# --- What Karpenter, EKS, EC2 and the Prometheus Operator do after (or instead of) the update -----------


def drifts(result: Plan) -> list[str]:
    return [f.message for f in result.findings if "as drifted" in f.message]


def test_changes_karpenter_drifts_on_say_which_pool_its_budgets_and_grace_period() -> None:
    """Karpenter 1.14.1 drifts nodes on the NodePool's template hash (taints), on requirements the nodes no
    longer fit, on the EC2NodeClass's hash (block devices) and on what its AMI selector resolves to."""
    training = (
        'allow (nodes "0" for Drifted from "0 7 * * mon-fri" for 12h; nodes "1"); each drain waits up to '
    )
    training += "its terminationGracePeriod (24h)"

    def training_pool(change: Callable[[dict[str, Any]], None]) -> list[str]:
        return drifts(transition("prod", lambda s: change(pool(s, "gpu-training"))))

    taint = {"key": "team", "value": "vision", "effect": "NoSchedule"}
    [tainted] = training_pool(lambda p: p["taints"].append(taint))
    assert tainted.startswith(
        f"update {NODE_POOL} node-pools-gpu-training: Karpenter replaces nodes of pool "
    )
    assert "spec.template.spec (in the NodePool's hash): every node" in tainted
    assert training in tainted
    [narrowed] = training_pool(lambda p: p.update(instanceFamilies=["p5"]))
    assert "requirement node.kubernetes.io/instance-type no longer allows p4d.24xlarge" in narrowed
    [disk] = training_pool(lambda p: p.update(rootVolume={"sizeGib": 800}))
    assert f"update {NODE_CLASS} node-pools-class-gpu-training" in disk
    assert "spec.blockDeviceMappings (in the EC2NodeClass's hash): every node" in disk
    [ami] = training_pool(lambda p: p.update(ami="al2023@v20260801"))
    assert "spec.amiSelectorTerms: nodes not on an AMI it now selects" in ami
    assert training in ami


def test_changes_karpenter_does_not_drift_on_are_plain_updates() -> None:
    """Limits, disruption settings and a wider instance choice: no node fits less, nothing drifts."""

    def change(s: Sections) -> None:
        p = pool(s, "gpu-inference")
        p["limits"].update(cpu="2048")
        p["disruption"].update(consolidateAfter="20m")
        p.update(instanceFamilies=["g5", "g6", "g4dn"])

    result = transition("dev", change)
    assert ("update", "node-pools-gpu-inference") in {(s.op, s.name) for s in result.steps}
    assert drifts(result) == []


def test_changing_the_number_of_zones_is_refused_as_eks_does() -> None:
    """EKS keeps a cluster's availability zones: its subnets may change within them, not move out."""
    two = "us-west-2a, us-west-2b"
    for result, old, new, keep in (
        (transition("dev", _two_zones), f"{two}, us-west-2c", two, 3),
        (transition("dev", _two_zones, reverse=True), two, f"{two}, us-west-2c", 2),
    ):
        cluster = result.find(CLUSTER, "cluster")
        assert cluster is not None
        assert cluster.op == "update"
        [refusal] = [f for f in result.findings if f.blocking]
        assert refusal.message.startswith(
            f"update {CLUSTER} cluster: its subnets move from zones {old} to {new}, which "
            "UpdateClusterConfig refuses"
        )
        assert f"Keep gpu-eks:network.availabilityZones at {keep}" in refusal.message
        assert "aws/containers-roadmap#170" in refusal.message


def _two_zones(s: Sections) -> None:
    s["gpu-eks:network"].update(availabilityZones=2)


def test_turning_a_placement_group_off_says_its_delete_fails_while_nodes_are_in_it() -> None:
    result = transition("prod", lambda s: pool(s, "gpu-training").update(placementGroup=False))
    assert ops(result, "delete") == {
        ("aws:ec2/placementGroup:PlacementGroup", "node-pools-placement-gpu-training")
    }
    [delete] = [f for f in result.findings if f.message.startswith("delete aws:ec2/placementGroup")]
    assert "InvalidPlacementGroup.InUse" in delete.message
    assert "pool gpu-training's nodes leave it only as they drift" in delete.message
    assert 'nodes "0" for Drifted from "0 7 * * mon-fri" for 12h' in delete.message
    assert (
        "kubectl get nodeclaims -l karpenter.sh/nodepool=gpu-training,karpenter.k8s.aws/placement-group-id"
        in (delete.message)
    )
    # `pulumi up` fails only if nodes are left in the group, which the plan cannot see: attention, and the
    # next `up` retries.
    assert not delete.blocking
    [drift] = drifts(result)
    assert "spec.placementGroupSelector (in the EC2NodeClass's hash)" in drift


def test_renaming_dev_replaces_its_objects_create_first_in_the_new_cluster_unless_they_say_otherwise() -> (
    None
):
    """A replaced Kubernetes provider replaces what it manages without asking pulumi-kubernetes, so only
    the resource's own deleteBeforeReplace deletes first: the new objects go to the new cluster."""
    result = transition("dev", lambda s: s["gpu-eks:cluster"].update(name="ml-dev-2"))
    kubernetes = [s for s in result.steps if s.type.startswith("kubernetes:")]
    assert kubernetes
    assert all(s.op == "replace" for s in kubernetes)
    after = state_of_run(run_program(_renamed("dev"), stack="dev"), "renamed")
    for step in kubernetes:
        own = next(r for r in after.resources.values() if (r.type, r.name) == (step.type, step.name))
        assert step.delete_first == own.delete_before_replace, step
    assert any(not s.delete_first for s in kubernetes)
    assert (NODE_CLASS, "node-pools-class-gpu-inference") in {
        (s.type, s.name) for s in kubernetes if s.delete_first
    }  # its own option
    assert not result.blocking  # nothing collides in a new cluster


def _renamed(stack: str) -> dict[str, str]:
    changed = sections(stack)
    changed["gpu-eks:cluster"].update(name="ml-dev-2")
    return {k: v if k.startswith("aws:") else json.dumps(v) for k, v in changed.items()}


IN_CLUSTER = {
    "backend": "inCluster",
    "alerting": {
        "receiverSecret": "alertmanager-receivers",
        "critical": "pagerduty",
        # A production stack's Watchdog must reach a heartbeat check.
        "heartbeatUrl": "https://hc-ping.example.com/3f1c2b7e-8d4a-4e6b-9a0f-5c2d1e7b8a90",
    },
}


def test_a_larger_prometheus_volume_says_the_claim_is_resized_by_hand() -> None:
    def storage(gib: int) -> Callable[[Sections], None]:
        return lambda s: s.update(
            {"gpu-eks:observability": {**IN_CLUSTER, "prometheus": {"storageGib": gib}}}
        )

    base = sections("prod")
    storage(100)(base)
    config = {k: v if k.startswith("aws:") else json.dumps(v) for k, v in base.items()}
    before = state_of_run(run_program(config, stack="prod"), "100 GiB")

    def plan_to(gib: int) -> Plan:
        changed = sections("prod")
        storage(gib)(changed)
        edited = {k: v if k.startswith("aws:") else json.dumps(v) for k, v in changed.items()}
        return plan(before, state_of_run(run_program(edited, stack="prod"), f"{gib} GiB"))

    larger = plan_to(200)
    assert [(s.op, s.name) for s in larger.steps] == [("update", "observability")]
    [finding] = larger.findings
    assert finding.message.startswith(
        f"update {RELEASE} observability: Prometheus's volume stays 100Gi: the operator recreates"
    )
    assert "retentionSize 180GiB on a 100Gi disk" in finding.message
    assert "resize its claim to 200Gi by hand" in finding.message
    assert not finding.blocking
    assert plan_to(50).findings == ()  # a smaller request leaves the larger disk: nothing to do
