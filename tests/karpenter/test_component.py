"""The Karpenter component: what the real program declares for it, checked on the inputs under mocks.

Documents and values are compared with the pure functions that produce them (themselves tested against
upstream's template and chart), fed with what the mocks answered for the stack's own resources.
"""

import json
from functools import cache
from typing import Any

import pytest

from components.cluster import SYSTEM_NODE_SELECTOR
from components.karpenter.iam import (
    IRSA_ROLE_ANNOTATION,
    NODE_ACCESS_ENTRY_TYPE,
    controller_policies,
    controller_policy_name,
    irsa_trust_policy,
    node_role_managed_policy_arns,
    node_role_trust_policy,
    pod_identity_trust_policy,
)
from components.karpenter.interruption import TARGET_ID, queue_policy
from config.stack import StackConfig, parse_stack_config
from facts.partitions import check_partition
from synth.mocks import ACCOUNT_ID
from synth.runner import ProgramRun, Registration, stack_config
from tests.conftest import STACKS, stack_run
from tests.helpers import config, run

COMPONENT = "gpu-eks:karpenter:Karpenter"
ROLE = "aws:iam/role:Role"
POLICY = "aws:iam/policy:Policy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
QUEUE = "aws:sqs/queue:Queue"
QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
RULE = "aws:cloudwatch/eventRule:EventRule"
TARGET = "aws:cloudwatch/eventTarget:EventTarget"
RELEASE = "kubernetes:helm.sh/v3:Release"
INTERRUPTION_TYPES = (QUEUE, QUEUE_POLICY, RULE, TARGET)

EXPECTED_PATTERNS = {
    "karpenter-health-event": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "karpenter-spot-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning"],
    },
    "karpenter-rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "karpenter-instance-state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
    },
    "karpenter-capacity-reservation-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}
"""Written out literally (not taken from the code under test): a typo in a pattern silently disables it."""


def run_with(region: str = "us-west-2", **sections: Any) -> tuple[ProgramRun, StackConfig]:
    """Run the program with these sections; also return the config it was given, parsed."""
    return run(region, **sections), parse_stack_config(config(region, **sections))


@cache
def irsa() -> ProgramRun:
    return run(karpenter={"identity": "irsa"})


@cache
def without_interruption() -> tuple[ProgramRun, StackConfig]:
    return run_with(karpenter={"interruptionHandling": False})


def children(result: ProgramRun, type_token: str) -> list[Registration]:
    """Resources of a type that belong to the Karpenter component."""
    return [
        r for r in result.of_type(type_token) if r.parent and r.parent.endswith(f"{COMPONENT}::karpenter")
    ]


def child(result: ProgramRun, type_token: str, name: str) -> Registration:
    found = [r for r in children(result, type_token) if r.name == name]
    assert len(found) == 1, [r.name for r in children(result, type_token)]
    return found[0]


def controller_values(result: ProgramRun) -> dict[str, Any]:
    values: dict[str, Any] = child(result, RELEASE, "karpenter-controller").inputs["values"]
    return values


def expected_policies(result: ProgramRun, config: StackConfig) -> dict[str, Any]:
    """`controller_policies` for this run's cluster, region, account, queue and node role."""
    queues = children(result, QUEUE)
    return dict(
        controller_policies(
            cluster_name=config.cluster.name,
            region=config.region,
            account_id=ACCOUNT_ID,
            partition=check_partition(config.partition),
            queue_arn=queues[0].outputs["arn"] if queues else None,
            node_role_arn=child(result, ROLE, "karpenter-node").outputs["arn"],
            zonal_shift=config.karpenter.zonal_shift,
        )
    )


def registered_policies(result: ProgramRun) -> dict[str, Any]:
    return {
        p.name.removeprefix("karpenter-controller-"): json.loads(p.inputs["policy"])
        for p in children(result, POLICY)
    }


# --- Node role and access entry -------------------------------------------------------------------------


def test_node_role_trust_and_managed_policies(dev: ProgramRun) -> None:
    role = child(dev, ROLE, "karpenter-node")
    assert role.inputs["name"] == "KarpenterNodeRole-ml-dev"
    assert json.loads(role.inputs["assumeRolePolicy"]) == node_role_trust_policy("aws")
    attachments = [a for a in children(dev, ATTACHMENT) if a.name.startswith("karpenter-node-")]
    assert sorted(a.inputs["policyArn"] for a in attachments) == sorted(node_role_managed_policy_arns("aws"))
    assert {a.inputs["role"] for a in attachments} == {role.outputs["name"]}


def test_node_access_entry_is_ec2_linux_for_the_node_role(dev: ProgramRun) -> None:
    entry = child(dev, ACCESS_ENTRY, "karpenter-node")
    role = child(dev, ROLE, "karpenter-node")
    assert entry.inputs["type"] == NODE_ACCESS_ENTRY_TYPE == "EC2_LINUX"
    assert entry.inputs["principalArn"] == role.outputs["arn"]
    assert entry.inputs["clusterName"] == "ml-dev"
    assert "kubernetesGroups" not in entry.inputs  # EKS sets the node groups itself for EC2_LINUX
    # The cluster name comes from the Cluster component, so the entry waits for the control plane.
    assert dev.one("eks:index:Cluster").urn in entry.dependencies


def test_node_role_follows_the_partition() -> None:
    result, settings = run_with("cn-north-1", cluster={"name": "ml-cn"})
    role = child(result, ROLE, "karpenter-node")
    assert json.loads(role.inputs["assumeRolePolicy"]) == node_role_trust_policy("aws-cn")
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {
        "Service": "ec2.amazonaws.com.cn"
    }
    attached = sorted(
        a.inputs["policyArn"] for a in children(result, ATTACHMENT) if a.name.startswith("karpenter-node-")
    )
    assert attached == sorted(node_role_managed_policy_arns("aws-cn"))
    assert registered_policies(result) == expected_policies(result, settings)
    assert not [p.name for p in children(result, POLICY) if "arn:aws:" in p.inputs["policy"]]


# --- Controller role, policies, identity ----------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_controller_policies_are_the_pure_documents(stack: str) -> None:
    result = stack_run(stack)
    stack_settings = parse_stack_config(stack_config(stack))
    assert registered_policies(result) == expected_policies(result, stack_settings)
    for policy in children(result, POLICY):
        assert policy.inputs["name"] == controller_policy_name(
            policy.name.removeprefix("karpenter-controller-"),  # type: ignore[arg-type]
            stack_settings.cluster.name,
        )


def test_controller_policies_attach_to_the_controller_role(dev: ProgramRun) -> None:
    role = child(dev, ROLE, "karpenter-controller")
    assert role.inputs["name"] == "KarpenterControllerRole-ml-dev"
    policies = {p.name: p.outputs["arn"] for p in children(dev, POLICY)}
    attachments = {a.name: a for a in children(dev, ATTACHMENT) if a.name.startswith("karpenter-controller-")}
    assert set(attachments) == set(policies)
    assert len(policies) == 5  # interruption on, zonal shift off
    for name, attachment in attachments.items():
        assert attachment.inputs["role"] == role.outputs["name"]
        assert attachment.inputs["policyArn"] == policies[name]


def test_zonal_shift_adds_its_policy_and_setting() -> None:
    result, settings = run_with(karpenter={"zonalShift": True})
    assert "ZonalShiftPolicy" in registered_policies(result)
    assert registered_policies(result) == expected_policies(result, settings)
    assert controller_values(result)["settings"]["enableZonalShift"] is True


def test_pod_identity_trust_and_association(dev: ProgramRun) -> None:
    role = child(dev, ROLE, "karpenter-controller")
    assert json.loads(role.inputs["assumeRolePolicy"]) == pod_identity_trust_policy()
    association = child(dev, ASSOCIATION, "karpenter-controller")
    assert association.inputs["clusterName"] == "ml-dev"
    assert association.inputs["namespace"] == "kube-system"
    assert association.inputs["serviceAccount"] == "karpenter"
    assert association.inputs["roleArn"] == role.outputs["arn"]
    agent = next(
        a for a in dev.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "eks-pod-identity-agent"
    )
    assert agent.urn in association.dependencies
    # The chart creates exactly the service account the association binds, without an IRSA annotation.
    service_account = controller_values(dev)["serviceAccount"]
    assert service_account == {"create": True, "name": association.inputs["serviceAccount"]}


def test_irsa_trusts_the_clusters_oidc_provider_and_annotates_the_service_account() -> None:
    result = irsa()
    cluster = result.one("eks:index:Cluster").outputs
    role = child(result, ROLE, "karpenter-controller")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust == irsa_trust_policy(
        oidc_provider_arn=cluster["oidcProviderArn"],
        oidc_issuer=cluster["oidcIssuer"],
        namespace="kube-system",
        service_account="karpenter",
    )
    assert trust["Statement"][0]["Principal"] == {"Federated": cluster["oidcProviderArn"]}
    # Condition keys name the issuer without its scheme, as IAM evaluates them.
    conditions = trust["Statement"][0]["Condition"]["StringEquals"]
    assert all(not key.startswith("https://") for key in conditions)
    assert f"{cluster['oidcIssuer']}:sub" in conditions
    assert children(result, ASSOCIATION) == []
    service_account = controller_values(result)["serviceAccount"]
    assert service_account["annotations"] == {IRSA_ROLE_ANNOTATION: role.outputs["arn"]}
    assert service_account["name"] == "karpenter"
    assert role.urn in child(result, RELEASE, "karpenter-controller").dependencies


# --- Interruption handling ------------------------------------------------------------------------------


def test_interruption_queue(dev: ProgramRun) -> None:
    queue = child(dev, QUEUE, "karpenter-interruption")
    assert queue.inputs["name"] == "ml-dev"
    assert queue.inputs["messageRetentionSeconds"] == 300
    assert queue.inputs["sqsManagedSseEnabled"] is True
    policy = child(dev, QUEUE_POLICY, "karpenter-interruption")
    assert policy.inputs["queueUrl"] == queue.outputs["url"]
    assert json.loads(policy.inputs["policy"]) == queue_policy(queue.outputs["arn"])


def test_five_rules_with_exact_patterns_each_targeting_the_queue(dev: ProgramRun) -> None:
    queue = child(dev, QUEUE, "karpenter-interruption")
    rules = {r.name: r for r in children(dev, RULE)}
    assert {name: json.loads(r.inputs["eventPattern"]) for name, r in rules.items()} == EXPECTED_PATTERNS
    targets = {t.name: t for t in children(dev, TARGET)}
    assert set(targets) == set(rules)
    for name, target in targets.items():
        assert target.inputs["rule"] == rules[name].outputs["name"]
        assert target.inputs["arn"] == queue.outputs["arn"]
        assert target.inputs["targetId"] == TARGET_ID


def test_without_interruption_handling_nothing_of_it_exists() -> None:
    result, settings = without_interruption()
    for type_token in INTERRUPTION_TYPES:
        assert result.of_type(type_token) == [], type_token
    assert "InterruptionPolicy" not in registered_policies(result)
    assert registered_policies(result) == expected_policies(result, settings)
    assert controller_values(result)["settings"]["interruptionQueue"] == ""
    assert "karpenterInterruptionQueueName" not in result.outputs  # None: the SDK drops it
    # The controller still waits for everything else it needs.
    release = child(result, RELEASE, "karpenter-controller")
    assert child(result, RELEASE, "karpenter-crd").urn in release.dependencies
    assert child(result, ACCESS_ENTRY, "karpenter-node").urn in release.dependencies


# --- Helm releases ---------------------------------------------------------------------------------------


def test_releases_come_from_the_oci_charts_at_one_pinned_version(dev: ProgramRun) -> None:
    crd = child(dev, RELEASE, "karpenter-crd").inputs
    controller = child(dev, RELEASE, "karpenter-controller").inputs
    assert crd["chart"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert controller["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert crd["version"] == controller["version"] == "1.14.1"
    assert (crd["name"], controller["name"]) == ("karpenter-crd", "karpenter")
    assert controller["skipCrds"] is True
    assert not crd.get("skipCrds")
    assert "repositoryOpts" not in crd
    assert "repositoryOpts" not in controller
    for release in (crd, controller):
        assert release["atomic"] is True
        assert release["cleanupOnFail"] is True
        assert release["timeout"] > 0
        assert not release.get("skipAwait")


def test_releases_use_the_clusters_provider(any_stack: ProgramRun) -> None:
    provider = any_stack.one("pulumi:providers:kubernetes")
    for release in children(any_stack, RELEASE):
        assert release.provider == provider.name


def test_controller_values(prod: ProgramRun) -> None:
    values = controller_values(prod)
    queue = child(prod, QUEUE, "karpenter-interruption")
    assert values["settings"]["clusterName"] == "ml-prod"
    assert values["settings"]["interruptionQueue"] == queue.outputs["name"] == "ml-prod"
    assert values["replicas"] == 2
    assert values["nodeSelector"].items() >= SYSTEM_NODE_SELECTOR.items()
    resources = values["controller"]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "1", "memory": "1Gi"}
    association = child(prod, ASSOCIATION, "karpenter-controller")
    assert values["serviceAccount"]["name"] == association.inputs["serviceAccount"]


def test_release_order_makes_one_pulumi_up_converge(any_stack: ProgramRun) -> None:
    crd = child(any_stack, RELEASE, "karpenter-crd")
    controller = child(any_stack, RELEASE, "karpenter-controller")
    required = {
        crd.urn,
        child(any_stack, ASSOCIATION, "karpenter-controller").urn,
        child(any_stack, ACCESS_ENTRY, "karpenter-node").urn,
        child(any_stack, QUEUE_POLICY, "karpenter-interruption").urn,
        any_stack.one("aws:eks/nodeGroup:NodeGroup").urn,
        *(r.urn for r in children(any_stack, RULE)),
        *(t.urn for t in children(any_stack, TARGET)),
        *(a.urn for a in children(any_stack, ATTACHMENT)),
    }
    assert len(children(any_stack, ATTACHMENT)) == 4 + 5
    assert required <= set(controller.dependencies)
    assert controller.urn not in crd.dependencies


def test_namespace_other_than_kube_system() -> None:
    result = run(karpenter={"namespace": "karpenter"})
    controller = child(result, RELEASE, "karpenter-controller")
    crd = child(result, RELEASE, "karpenter-crd")
    assert controller.inputs["namespace"] == "karpenter"
    assert controller.inputs["createNamespace"] is True
    # The CRDs' release record stays put, so a namespace change never replaces (and deletes) the CRDs.
    assert crd.inputs["namespace"] == "kube-system"
    assert not crd.inputs.get("createNamespace")
    assert controller.delete_before_replace is True
    assert child(result, ASSOCIATION, "karpenter-controller").inputs["namespace"] == "karpenter"
    assert result.outputs["karpenterNamespace"] == "karpenter"


def test_kube_system_is_not_created(dev: ProgramRun) -> None:
    assert child(dev, RELEASE, "karpenter-controller").inputs["createNamespace"] is False


# --- Outputs and the committed stacks -------------------------------------------------------------------


def test_outputs(dev: ProgramRun) -> None:
    node_role = child(dev, ROLE, "karpenter-node").outputs
    assert dev.outputs["karpenterNodeRoleName"] == node_role["name"] == "KarpenterNodeRole-ml-dev"
    assert dev.outputs["karpenterNodeRoleArn"] == node_role["arn"]
    assert (
        dev.outputs["karpenterControllerRoleArn"] == child(dev, ROLE, "karpenter-controller").outputs["arn"]
    )
    assert dev.outputs["karpenterInterruptionQueueName"] == "ml-dev"
    assert dev.outputs["karpenterNamespace"] == "kube-system"


def test_every_stack_declares_karpenter(any_stack: ProgramRun) -> None:
    component = any_stack.one(COMPONENT)
    assert component.name == "karpenter"
    counts = {
        ROLE: 2,
        POLICY: 5,
        ATTACHMENT: 9,
        ACCESS_ENTRY: 1,
        ASSOCIATION: 1,
        QUEUE: 1,
        QUEUE_POLICY: 1,
        RULE: 5,
        TARGET: 5,
        RELEASE: 2,
    }
    assert {t: len(children(any_stack, t)) for t in counts} == counts
    for resource in any_stack.resources:
        if "karpenter" in resource.name and resource.type != COMPONENT:
            assert resource.parent == component.urn, resource.name
