"""IAM documents of Karpenter's AWS side, as upstream's getting-started CloudFormation template writes them.

Source: `cloudformation.yaml` of Karpenter 1.14.1 (vendored in `tests/fixtures/karpenter-1.14.1/`, which the
tests compare these documents against, statement by statement, for every partition). The template's
parameters map to arguments as follows:

| template                            | here                                            |
|-------------------------------------|-------------------------------------------------|
| `${AWS::Partition}`                 | `partition` (`aws`, `aws-cn`, `aws-us-gov`)     |
| `${AWS::Region}`                    | `region`                                        |
| `${AWS::AccountId}`                 | `account_id`                                    |
| `${AWS::URLSuffix}`                 | `dns_suffix(partition)`                         |
| `${ClusterName}`                    | `cluster_name`                                  |
| `${KarpenterNodeRole.Arn}`          | `node_role_arn`                                 |
| `${KarpenterInterruptionQueue.Arn}` | `queue_arn` (`None`: interruption handling off) |

Values the template writes literally stay literal here, even where they name a partition's DNS suffix
(`iam:PassedToService` lists both `ec2.amazonaws.com` and `ec2.amazonaws.com.cn`).

The controller gets six customer-managed policies, as upstream attaches them, rather than one merged
document: merged, the 18 statements exceed the 6,144-character managed-policy limit
(`MANAGED_POLICY_MAX_CHARS`) from 20-character cluster names on, while the largest single policy stays
under 3,800 characters even for a 100-character cluster name; and a diff against upstream stays a diff of
one policy.
"""

import json
from typing import Final, Literal, get_args

from components.iam_document import PolicyDocument, policy_document
from facts.partitions import (
    Partition,
    check_account_id,
    check_arn,
    check_cluster_name,
    check_partition,
    check_region,
    dns_suffix,
    partition_of_arn,
)

MANAGED_POLICY_MAX_CHARS: Final = 6144
"""IAM's size limit of a customer-managed policy document, counted without whitespace."""

# ---------------------------------------------------------------------------------------------------------
# Node role
# ---------------------------------------------------------------------------------------------------------

NODE_ROLE_MANAGED_POLICIES: Final[tuple[str, ...]] = (
    "AmazonEKS_CNI_Policy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
"""AWS-managed policies of the node role, in the template's order (`node_role_managed_policy_arns`)."""

NODE_ACCESS_ENTRY_TYPE: Final = "EC2_LINUX"
"""Type of the EKS access entry that lets nodes with the node role join the cluster (never aws-auth)."""

PASSED_TO_SERVICES: Final[tuple[str, ...]] = ("ec2.amazonaws.com", "ec2.amazonaws.com.cn")
"""`iam:PassedToService` values of the node role, literal in the template (both suffixes, every partition)."""

NODE_ROLE_NAME_PREFIX: Final = "KarpenterNodeRole-"
CONTROLLER_ROLE_NAME_PREFIX: Final = "KarpenterControllerRole-"
_ROLE_NAME_MAX: Final = 64
_POLICY_NAME_MAX: Final = 128


def node_role_trust_policy(partition: Partition = "aws") -> PolicyDocument:
    """Trust policy of the node role: EC2 (`ec2.${AWS::URLSuffix}`) may assume it.

    `partition` picks the DNS suffix: `ec2.amazonaws.com`, or `ec2.amazonaws.com.cn` in `aws-cn`.
    """
    return policy_document(
        {
            "Effect": "Allow",
            "Principal": {"Service": f"ec2.{dns_suffix(partition)}"},
            "Action": ["sts:AssumeRole"],
        }
    )


def managed_policy_arn(partition: Partition, name: str) -> str:
    """ARN `arn:<partition>:iam::aws:policy/<name>` of an AWS-managed IAM policy."""
    check_partition(partition)
    return f"arn:{partition}:iam::aws:policy/{name}"


def node_role_managed_policy_arns(partition: Partition = "aws") -> list[str]:
    """ARNs of `NODE_ROLE_MANAGED_POLICIES`, in that order."""
    return [managed_policy_arn(partition, name) for name in NODE_ROLE_MANAGED_POLICIES]


def node_role_name(cluster_name: str) -> str:
    """Upstream's node role name `KarpenterNodeRole-<cluster>` (EC2NodeClass `spec.role` takes this name).

    Raises `ValueError` when the name would exceed IAM's 64 characters (cluster names over 46 characters):
    pass an explicit shorter name to the component then.
    """
    name = NODE_ROLE_NAME_PREFIX + check_cluster_name(cluster_name)
    if len(name) > _ROLE_NAME_MAX:
        raise ValueError(
            f"node role name {name!r} has {len(name)} characters, IAM allows {_ROLE_NAME_MAX}; "
            "choose a shorter node role name"
        )
    return name


# ---------------------------------------------------------------------------------------------------------
# Controller role
# ---------------------------------------------------------------------------------------------------------


def controller_role_name(cluster_name: str) -> str:
    """`KarpenterControllerRole-<cluster>`, the controller role's name in upstream's migration guide.

    (The getting-started guide lets eksctl name it; the template creates no controller role.) Raises
    `ValueError` when the name would exceed IAM's 64 characters (cluster names over 40 characters).
    """
    name = CONTROLLER_ROLE_NAME_PREFIX + check_cluster_name(cluster_name)
    if len(name) > _ROLE_NAME_MAX:
        raise ValueError(
            f"controller role name {name!r} has {len(name)} characters, IAM allows {_ROLE_NAME_MAX}; "
            "choose a shorter controller role name"
        )
    return name


ControllerPolicy = Literal[
    "NodeLifecyclePolicy",
    "IAMIntegrationPolicy",
    "EKSIntegrationPolicy",
    "InterruptionPolicy",
    "ZonalShiftPolicy",
    "ResourceDiscoveryPolicy",
]
"""The controller policies, named by their logical IDs in the template."""

CONTROLLER_POLICIES: Final[tuple[ControllerPolicy, ...]] = get_args(ControllerPolicy)
"""All controller policies, in the template's order."""


def controller_policy_name(policy: ControllerPolicy, cluster_name: str) -> str:
    """Upstream's managed-policy name, `KarpenterController<policy>-<cluster>`.

    Raises `ValueError` when it would exceed IAM's 128 characters (then let Pulumi auto-name the policy).
    """
    if policy not in CONTROLLER_POLICIES:
        raise ValueError(f"policy must be one of {', '.join(CONTROLLER_POLICIES)}, got {policy!r}")
    name = f"KarpenterController{policy}-{check_cluster_name(cluster_name)}"
    if len(name) > _POLICY_NAME_MAX:
        raise ValueError(f"policy name {name!r} has {len(name)} characters, IAM allows {_POLICY_NAME_MAX}")
    return name


def controller_policy_names(*, interruption: bool, zonal_shift: bool) -> tuple[ControllerPolicy, ...]:
    """The policies `controller_policies` returns, in its order, known before any ARN is.

    `interruption`: whether a queue ARN will be passed; `zonal_shift`: the `zonal_shift` argument. The
    component declares one `aws.iam.Policy` per name before the documents (which need ARNs) resolve.
    """
    return tuple(
        policy
        for policy in CONTROLLER_POLICIES
        if (policy != "InterruptionPolicy" or interruption) and (policy != "ZonalShiftPolicy" or zonal_shift)
    )


def controller_policies(
    *,
    cluster_name: str,
    region: str,
    account_id: str,
    partition: Partition,
    queue_arn: str | None,
    node_role_arn: str,
    zonal_shift: bool = True,
) -> dict[ControllerPolicy, PolicyDocument]:
    """The controller's managed policies, name -> document, scoped to this cluster, region and account.

    - `queue_arn`: the interruption queue; `None` when interruption handling is off, which leaves out
      `InterruptionPolicy` (the chart's `settings.interruptionQueue` is then empty, see `chart_values`).
    - `zonal_shift`: include `ZonalShiftPolicy` (read-only `arc-zonal-shift:GetManagedResource` on this
      cluster). Upstream always attaches it, hence the default; the program passes its `zonalShift` setting
      so the controller holds it only when `settings.enableZonalShift` is on.

    All inputs are checked: the region must be in the partition, the node role in the account and the
    queue in the region and account, or `ValueError` is raised.
    """
    partition = check_partition(partition)
    check_cluster_name(cluster_name)
    check_region(region, partition)
    check_account_id(account_id)
    check_arn(
        node_role_arn, service="iam", partition=partition, account_id=account_id, argument="node_role_arn"
    )
    if queue_arn is not None:
        check_arn(
            queue_arn,
            service="sqs",
            partition=partition,
            region=region,
            account_id=account_id,
            argument="queue_arn",
        )

    policies: dict[ControllerPolicy, PolicyDocument] = {
        "NodeLifecyclePolicy": _node_lifecycle(cluster_name, region, partition),
        "IAMIntegrationPolicy": _iam_integration(cluster_name, region, account_id, partition, node_role_arn),
        "EKSIntegrationPolicy": _eks_integration(cluster_name, region, account_id, partition),
    }
    if queue_arn is not None:
        policies["InterruptionPolicy"] = _interruption(queue_arn)
    if zonal_shift:
        policies["ZonalShiftPolicy"] = _zonal_shift(cluster_name, region, account_id, partition)
    policies["ResourceDiscoveryPolicy"] = _resource_discovery(region, account_id, partition)
    return policies


def policy_size(document: PolicyDocument) -> int:
    """Characters of `document` as IAM counts them against `MANAGED_POLICY_MAX_CHARS` (no whitespace)."""
    return len(json.dumps(document, separators=(",", ":")))


def _node_lifecycle(cluster: str, region: str, partition: str) -> PolicyDocument:
    ec2 = f"arn:{partition}:ec2:{region}"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    request_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster,
    }
    tagged_resources = [
        f"{ec2}:*:fleet/*",
        f"{ec2}:*:instance/*",
        f"{ec2}:*:volume/*",
        f"{ec2}:*:network-interface/*",
        f"{ec2}:*:launch-template/*",
        f"{ec2}:*:spot-instances-request/*",
    ]
    return policy_document(
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
                f"{ec2}:*:placement-group/*",
            ],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:launch-template/*",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": {
                "StringEquals": dict(owned),
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": list(tagged_resources),
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {
                "StringEquals": dict(request_owned),
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": list(tagged_resources),
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    **request_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:instance/*",
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": dict(owned),
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": {
                "StringEquals": dict(owned),
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
    )


def _iam_integration(
    cluster: str, region: str, account_id: str, partition: str, node_role_arn: str
) -> PolicyDocument:
    instance_profiles = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    resource_owned = {
        f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned",
        "aws:ResourceTag/topology.kubernetes.io/region": region,
    }
    request_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster,
        "aws:RequestTag/topology.kubernetes.io/region": region,
    }
    return policy_document(
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": node_role_arn,
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": list(PASSED_TO_SERVICES)}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": instance_profiles,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {
                "StringEquals": dict(request_owned),
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": instance_profiles,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {**resource_owned, **request_owned},
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": instance_profiles,
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Condition": {
                "StringEquals": dict(resource_owned),
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
    )


def _cluster_arn(cluster: str, region: str, account_id: str, partition: str) -> str:
    return f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster}"


def _eks_integration(cluster: str, region: str, account_id: str, partition: str) -> PolicyDocument:
    return policy_document(
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": _cluster_arn(cluster, region, account_id, partition),
            "Action": "eks:DescribeCluster",
        }
    )


def _interruption(queue_arn: str) -> PolicyDocument:
    return policy_document(
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        }
    )


def _zonal_shift(cluster: str, region: str, account_id: str, partition: str) -> PolicyDocument:
    return policy_document(
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Resource": "*",
            "Action": ["arc-zonal-shift:GetManagedResource"],
            "Condition": {
                "StringEquals": {
                    "arc-zonal-shift:ResourceIdentifier": _cluster_arn(cluster, region, account_id, partition)
                }
            },
        }
    )


def _resource_discovery(region: str, account_id: str, partition: str) -> PolicyDocument:
    return policy_document(
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            "Action": "ssm:GetParameter",
        },
        {
            "Sid": "AllowPricingReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "pricing:GetProducts",
        },
        {
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "iam:ListInstanceProfiles",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:iam::{account_id}:instance-profile/*",
            "Action": "iam:GetInstanceProfile",
        },
    )


# ---------------------------------------------------------------------------------------------------------
# Controller role trust
# ---------------------------------------------------------------------------------------------------------

POD_IDENTITY_PRINCIPAL: Final = "pods.eks.amazonaws.com"
"""Service principal of EKS Pod Identity (add-on `eks-pod-identity-agent`)."""

IRSA_AUDIENCE: Final = "sts.amazonaws.com"
"""Audience of the projected service-account token that IRSA exchanges with STS."""

IRSA_ROLE_ANNOTATION: Final = "eks.amazonaws.com/role-arn"
"""Service-account annotation naming the role IRSA assumes."""


def pod_identity_trust_policy() -> PolicyDocument:
    """Trust policy of the controller role under EKS Pod Identity.

    The role is bound to the service account by an `aws.eks.PodIdentityAssociation` (cluster, namespace,
    service account), not by a condition here.
    """
    return policy_document(
        {
            "Sid": "AllowEksAuthToAssumeRoleForPodIdentity",
            "Effect": "Allow",
            "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
        }
    )


def irsa_trust_policy(
    *, oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str
) -> PolicyDocument:
    """Trust policy of the controller role under IRSA, for one service account.

    - `oidc_provider_arn`: `arn:<partition>:iam::<account>:oidc-provider/<issuer host and path>`.
    - `oidc_issuer`: the cluster's OIDC issuer as IAM condition keys spell it, without `https://`
      (pulumi-eks's `oidc_issuer`); an issuer URL with the scheme is accepted and reduced to that form. It
      must be the provider the ARN names, or `ValueError` is raised.
    """
    issuer = oidc_issuer.removeprefix("https://").rstrip("/")
    partition = partition_of_arn(oidc_provider_arn, argument="oidc_provider_arn")
    check_arn(oidc_provider_arn, service="iam", partition=partition, argument="oidc_provider_arn")
    _, separator, arn_issuer = oidc_provider_arn.partition(":oidc-provider/")
    if not separator:
        raise ValueError(f"oidc_provider_arn must be an IAM OIDC provider ARN, got {oidc_provider_arn!r}")
    if arn_issuer != issuer:
        raise ValueError(
            f"oidc_issuer {issuer!r} is not the issuer of oidc_provider_arn {oidc_provider_arn!r}"
        )
    if not namespace or not service_account:
        raise ValueError("namespace and service_account must not be empty")
    return policy_document(
        {
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {
                "StringEquals": {
                    f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                    f"{issuer}:aud": IRSA_AUDIENCE,
                }
            },
        }
    )
