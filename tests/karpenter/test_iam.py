"""IAM documents against upstream's CloudFormation template of the pinned release, for every partition."""

from typing import Any

import pytest

from components.karpenter.iam import (
    CONTROLLER_POLICIES,
    MANAGED_POLICY_MAX_CHARS,
    NODE_ROLE_MANAGED_POLICIES,
    controller_policies,
    controller_policy_name,
    controller_policy_names,
    controller_role_name,
    irsa_trust_policy,
    node_role_managed_policy_arns,
    node_role_name,
    node_role_trust_policy,
    pod_identity_trust_policy,
    policy_size,
)
from tests.karpenter.cloudformation import resolve, resources_of_type
from tests.karpenter.conftest import Stack


def _policies(stack: Stack, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "cluster_name": stack.cluster_name,
        "region": stack.region,
        "account_id": stack.account_id,
        "partition": stack.partition,
        "queue_arn": stack.queue_arn,
        "node_role_arn": stack.node_role_arn,
    }
    policies: dict[str, Any] = dict(controller_policies(**{**arguments, **overrides}).items())
    return policies


def _upstream_policies(template: dict[str, Any], stack: Stack) -> dict[str, dict[str, Any]]:
    managed = resources_of_type(template, "AWS::IAM::ManagedPolicy")
    return {
        logical_id: resolve(properties["PolicyDocument"], stack.template_parameters())
        for logical_id, properties in managed.items()
    }


def test_template_has_exactly_the_resources_the_code_mirrors(template: dict[str, Any]) -> None:
    """A resource added to or dropped from upstream's template must be looked at before this passes."""
    assert {logical_id: resource["Type"] for logical_id, resource in template["Resources"].items()} == {
        "KarpenterNodeRole": "AWS::IAM::Role",
        "NodeLifecyclePolicy": "AWS::IAM::ManagedPolicy",
        "IAMIntegrationPolicy": "AWS::IAM::ManagedPolicy",
        "EKSIntegrationPolicy": "AWS::IAM::ManagedPolicy",
        "InterruptionPolicy": "AWS::IAM::ManagedPolicy",
        "ZonalShiftPolicy": "AWS::IAM::ManagedPolicy",
        "ResourceDiscoveryPolicy": "AWS::IAM::ManagedPolicy",
        "KarpenterInterruptionQueue": "AWS::SQS::Queue",
        "KarpenterInterruptionQueuePolicy": "AWS::SQS::QueuePolicy",
        "ScheduledChangeRule": "AWS::Events::Rule",
        "SpotInterruptionRule": "AWS::Events::Rule",
        "RebalanceRule": "AWS::Events::Rule",
        "InstanceStateChangeRule": "AWS::Events::Rule",
        "CapacityReservationInterruptionRule": "AWS::Events::Rule",
    }


def test_controller_policies_are_upstreams_six(template: dict[str, Any], stack: Stack) -> None:
    upstream = _upstream_policies(template, stack)
    ours = _policies(stack, zonal_shift=True)

    assert list(ours) == list(upstream) == list(CONTROLLER_POLICIES)
    for name, upstream_document in upstream.items():
        document = ours[name]
        assert document["Version"] == upstream_document["Version"] == "2012-10-17"
        assert set(document) == set(upstream_document), name
        upstream_statements = upstream_document["Statement"]
        statements = document["Statement"]
        assert [s.get("Sid") for s in statements] == [s.get("Sid") for s in upstream_statements], name
        for statement, upstream_statement in zip(statements, upstream_statements, strict=True):
            sid = upstream_statement["Sid"]
            assert statement["Effect"] == upstream_statement["Effect"], (name, sid)
            assert statement["Action"] == upstream_statement["Action"], (name, sid)
            assert statement["Resource"] == upstream_statement["Resource"], (name, sid)
            assert statement.get("Condition") == upstream_statement.get("Condition"), (name, sid)
            assert statement == upstream_statement, (name, sid)
        assert document == upstream_document, name


def test_controller_policies_are_scoped_to_the_stack(stack: Stack) -> None:
    policies = _policies(stack)
    lifecycle = policies["NodeLifecyclePolicy"]["Statement"]
    assert lifecycle[0]["Resource"][0] == f"arn:{stack.partition}:ec2:{stack.region}::image/*"
    assert lifecycle[1]["Condition"]["StringEquals"] == {
        f"aws:ResourceTag/kubernetes.io/cluster/{stack.cluster_name}": "owned"
    }
    assert policies["IAMIntegrationPolicy"]["Statement"][0]["Resource"] == stack.node_role_arn
    assert policies["InterruptionPolicy"]["Statement"][0]["Resource"] == stack.queue_arn
    assert policies["EKSIntegrationPolicy"]["Statement"][0]["Resource"] == (
        f"arn:{stack.partition}:eks:{stack.region}:{stack.account_id}:cluster/{stack.cluster_name}"
    )


def test_controller_policy_names_are_upstreams(template: dict[str, Any], stack: Stack) -> None:
    managed = resources_of_type(template, "AWS::IAM::ManagedPolicy")
    for logical_id, properties in managed.items():
        expected = resolve(properties["ManagedPolicyName"], stack.template_parameters())
        assert controller_policy_name(logical_id, stack.cluster_name) == expected  # type: ignore[arg-type]
    assert controller_policy_name("NodeLifecyclePolicy", "c") == "KarpenterControllerNodeLifecyclePolicy-c"


def test_interruption_policy_only_with_a_queue(stack: Stack) -> None:
    with_queue = _policies(stack)
    without_queue = _policies(stack, queue_arn=None)

    assert "InterruptionPolicy" in with_queue
    assert list(without_queue) == [
        "NodeLifecyclePolicy",
        "IAMIntegrationPolicy",
        "EKSIntegrationPolicy",
        "ZonalShiftPolicy",
        "ResourceDiscoveryPolicy",
    ]
    assert all(without_queue[name] == with_queue[name] for name in without_queue)


def test_zonal_shift_policy_only_when_enabled(stack: Stack) -> None:
    assert "ZonalShiftPolicy" in _policies(stack)  # upstream's default: always attached
    without = _policies(stack, zonal_shift=False)
    assert "ZonalShiftPolicy" not in without
    assert len(without) == 5


@pytest.mark.parametrize("cluster_name", ["c", "x" * 100])
def test_every_controller_policy_fits_a_managed_policy(stack: Stack, cluster_name: str) -> None:
    """Longest cluster name EKS allows, longest node role ARN IAM allows: still under the 6,144 limit."""
    node_role_arn = f"arn:{stack.partition}:iam::{stack.account_id}:role/{'r' * 64}"
    queue_arn = f"arn:{stack.partition}:sqs:{stack.region}:{stack.account_id}:{'q' * 80}"
    policies = _policies(stack, cluster_name=cluster_name, node_role_arn=node_role_arn, queue_arn=queue_arn)

    sizes = {name: policy_size(document) for name, document in policies.items()}
    assert len(sizes) == 6
    assert max(sizes.values()) <= MANAGED_POLICY_MAX_CHARS, sizes
    assert max(sizes, key=lambda name: sizes[name]) == "NodeLifecyclePolicy"
    assert 2600 < sizes["NodeLifecyclePolicy"] < 3800


def test_one_merged_policy_would_not_fit(stack: Stack) -> None:
    """Why six policies: merged, the 18 statements exceed one managed policy from 20-character cluster names
    on (the cluster name appears about 25 times); separately each has room to spare."""
    cluster_name = "gpu-eks-production-1"
    policies = _policies(
        stack,
        cluster_name=cluster_name,
        node_role_arn=f"arn:{stack.partition}:iam::{stack.account_id}:role/KarpenterNodeRole-{cluster_name}",
        queue_arn=f"arn:{stack.partition}:sqs:{stack.region}:{stack.account_id}:{cluster_name}",
    )
    merged = {
        "Version": "2012-10-17",
        "Statement": [s for document in policies.values() for s in document["Statement"]],
    }
    assert len(merged["Statement"]) == 18
    assert policy_size(merged) > MANAGED_POLICY_MAX_CHARS


def test_policy_size_ignores_whitespace() -> None:
    assert policy_size({"Version": "2012-10-17", "Statement": []}) == len(
        '{"Version":"2012-10-17","Statement":[]}'
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"partition": "aws-iso"}, "partition must be one of aws, aws-cn, aws-us-gov"),
        ({"region": "cn-north-1", "partition": "aws"}, "region 'cn-north-1' is in partition 'aws-cn'"),
        ({"account_id": "1234"}, "account_id must be 12 digits"),
        ({"cluster_name": "-bad"}, "cluster_name must be 1-100"),
        ({"node_role_arn": "arn:aws:iam::999999999999:role/x"}, "node_role_arn is in account '999999999999'"),
        ({"node_role_arn": "KarpenterNodeRole-x"}, "node_role_arn must be an ARN"),
        ({"queue_arn": "arn:aws:sqs:eu-west-1:123456789012:q"}, "queue_arn is in region 'eu-west-1'"),
        ({"queue_arn": "https://sqs.us-west-2.amazonaws.com/123456789012/q"}, "queue_arn must be an ARN"),
    ],
)
def test_controller_policies_refuse_inputs_that_cannot_be_right(
    overrides: dict[str, Any], message: str
) -> None:
    stack = Stack(partition="aws", region="us-west-2", dns_suffix="amazonaws.com")
    with pytest.raises(ValueError, match=message):
        _policies(stack, **overrides)


def test_node_role_trust_policy_is_upstreams(template: dict[str, Any], stack: Stack) -> None:
    role = resolve(template["Resources"]["KarpenterNodeRole"]["Properties"], stack.template_parameters())
    document = node_role_trust_policy(stack.partition)  # type: ignore[arg-type]

    assert document == role["AssumeRolePolicyDocument"]
    assert document["Statement"][0]["Principal"] == {"Service": f"ec2.{stack.dns_suffix}"}


def test_node_role_managed_policies_are_upstreams(template: dict[str, Any], stack: Stack) -> None:
    role = resolve(template["Resources"]["KarpenterNodeRole"]["Properties"], stack.template_parameters())
    arns = node_role_managed_policy_arns(stack.partition)  # type: ignore[arg-type]

    assert arns == role["ManagedPolicyArns"]
    assert f"arn:{stack.partition}:iam::aws:policy/AmazonEKSWorkerNodePolicy" in arns
    assert len(arns) == len(NODE_ROLE_MANAGED_POLICIES) == 4


def test_node_role_managed_policy_arns_per_partition() -> None:
    assert node_role_managed_policy_arns("aws-cn") == [
        "arn:aws-cn:iam::aws:policy/AmazonEKS_CNI_Policy",
        "arn:aws-cn:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws-cn:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws-cn:iam::aws:policy/AmazonSSMManagedInstanceCore",
    ]
    assert node_role_managed_policy_arns()[1] == "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"
    assert node_role_managed_policy_arns("aws-us-gov")[3] == (
        "arn:aws-us-gov:iam::aws:policy/AmazonSSMManagedInstanceCore"
    )


def test_node_role_name_is_upstreams(template: dict[str, Any], stack: Stack) -> None:
    role = resolve(template["Resources"]["KarpenterNodeRole"]["Properties"], stack.template_parameters())
    assert node_role_name(stack.cluster_name) == role["RoleName"] == "KarpenterNodeRole-gpu-eks-prod"


def test_node_role_name_refuses_what_iam_refuses() -> None:
    assert len(node_role_name("c" * 46)) == 64
    with pytest.raises(ValueError, match="has 65 characters, IAM allows 64"):
        node_role_name("c" * 47)


@pytest.mark.parametrize("interruption", [True, False])
@pytest.mark.parametrize("zonal_shift", [True, False])
def test_controller_policy_names_are_the_documents_keys(
    stack: Stack, interruption: bool, zonal_shift: bool
) -> None:
    documents = _policies(stack, queue_arn=stack.queue_arn if interruption else None, zonal_shift=zonal_shift)
    names = controller_policy_names(interruption=interruption, zonal_shift=zonal_shift)
    assert names == tuple(documents)
    assert ("InterruptionPolicy" in names) is interruption
    assert ("ZonalShiftPolicy" in names) is zonal_shift


def test_controller_role_name() -> None:
    assert controller_role_name("gpu-eks-prod") == "KarpenterControllerRole-gpu-eks-prod"
    assert len(controller_role_name("c" * 40)) == 64
    with pytest.raises(ValueError, match="has 65 characters, IAM allows 64"):
        controller_role_name("c" * 41)
    with pytest.raises(ValueError, match="cluster_name must be"):
        controller_role_name("-bad")


def test_pod_identity_trust_policy() -> None:
    assert pod_identity_trust_policy() == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AllowEksAuthToAssumeRoleForPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }


ISSUER = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
PROVIDER_ARN = f"arn:aws:iam::123456789012:oidc-provider/{ISSUER}"


@pytest.mark.parametrize("url", [ISSUER, f"https://{ISSUER}"])
def test_irsa_trust_policy(url: str) -> None:
    document = irsa_trust_policy(
        oidc_provider_arn=PROVIDER_ARN,
        oidc_issuer=url,
        namespace="kube-system",
        service_account="karpenter",
    )
    assert document == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": PROVIDER_ARN},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{ISSUER}:sub": "system:serviceaccount:kube-system:karpenter",
                        f"{ISSUER}:aud": "sts.amazonaws.com",
                    }
                },
            }
        ],
    }


def test_irsa_trust_policy_in_china() -> None:
    issuer = "oidc.eks.cn-north-1.amazonaws.com.cn/id/EXAMPLE"
    arn = f"arn:aws-cn:iam::123456789012:oidc-provider/{issuer}"
    document = irsa_trust_policy(
        oidc_provider_arn=arn, oidc_issuer=issuer, namespace="karpenter", service_account="ctl"
    )
    assert document["Statement"][0]["Condition"]["StringEquals"][f"{issuer}:sub"] == (
        "system:serviceaccount:karpenter:ctl"
    )


@pytest.mark.parametrize(
    ("arn", "url", "message"),
    [
        (PROVIDER_ARN, "oidc.eks.us-west-2.amazonaws.com/id/OTHER", "is not the issuer of oidc_provider_arn"),
        ("arn:aws:iam::123456789012:role/x", ISSUER, "must be an IAM OIDC provider ARN"),
        (f"arn:aws:sts::123456789012:oidc-provider/{ISSUER}", ISSUER, "must be an ARN of service 'iam'"),
        (ISSUER, ISSUER, "oidc_provider_arn must be an ARN"),
    ],
)
def test_irsa_trust_policy_refuses_a_provider_mismatch(arn: str, url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        irsa_trust_policy(oidc_provider_arn=arn, oidc_issuer=url, namespace="ns", service_account="sa")
