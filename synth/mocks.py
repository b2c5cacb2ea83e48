"""Mocks that answer the way AWS and the providers would: ids, ARNs and names of the right shape, in the
stack's partition, region and account, deterministic so that snapshots stay stable.

Each mocked output is a claim about a provider; the comment at each one names where its shape comes from:
the pulumi-aws 7.51.1 SDK docstrings (`.venv/lib/python3.11/site-packages/pulumi_aws/...`) and the
Terraform provider behind them (hashicorp/terraform-provider-aws, which sets ids and ARNs), pulumi-eks 4.4.0
(`nodejs/eks/cluster/cluster.ts` at pulumi/pulumi-eks@ccf53f17, the commit that added the `kind/component`
keyword the 4.4.0 wheel carries), pulumi-kubernetes 4.34.2. `tests/test_mocks.py` checks each shape.
"""

import functools
import hashlib
import json
import re
import uuid
import zlib
from typing import Any

import pulumi

from facts.eks import COREDNS, EBS_CSI_DRIVER, KUBE_PROXY, POD_IDENTITY_AGENT, VPC_CNI
from facts.partitions import Partition, dns_suffix, partition_of_region

ACCOUNT_ID = "111122223333"
"""The account the mocked caller identity reports (the documentation account)."""

CALLER_ROLE = "gpu-eks-deploy"
"""The role the mocked caller has assumed (CI runs `pulumi up` as an assumed role)."""

# type token -> (id prefix, resource type in the ARN) of what AWS would return. EC2 ids are `<prefix>-` and 17
# hex digits; ARNs `arn:<partition>:ec2:<region>:<account>:<type>/<id>` with the EC2 resource types of the
# IAM Service Authorization Reference (terraform-provider-aws builds them, e.g. `eipARN` "elastic-ip/",
# `securityGroupRuleARN` "security-group-rule/"). The NAT gateway and the route table association have no
# `arn` (pulumi-aws 7.51.1: neither class has the property).
_EC2_IDS: dict[str, tuple[str, str | None]] = {
    "aws:ec2/vpc:Vpc": ("vpc", "vpc"),
    "aws:ec2/subnet:Subnet": ("subnet", "subnet"),
    "aws:ec2/internetGateway:InternetGateway": ("igw", "internet-gateway"),
    "aws:ec2/routeTable:RouteTable": ("rtb", "route-table"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("rtbassoc", None),
    "aws:ec2/eip:Eip": ("eipalloc", "elastic-ip"),
    "aws:ec2/natGateway:NatGateway": ("nat", None),
    "aws:ec2/securityGroup:SecurityGroup": ("sg", "security-group"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("sgr", "security-group-rule"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("vpce", "vpc-endpoint"),
}

# The default build of each add-on per Kubernetes minor, as `describe-addon-versions` would mark it
# (`compatibilities[].defaultVersion`). The numbers are illustrative; the shape `v<x.y.z>-eksbuild.<n>` is
# EKS's, and each add-on's build moves with the minor, as on EKS (kube-proxy carries the minor itself).
_ADDON_BUILDS = {
    VPC_CNI: "v1.20.{p}-eksbuild.1",
    KUBE_PROXY: "v{k}.0-eksbuild.2",
    COREDNS: "v1.12.{p}-eksbuild.1",
    POD_IDENTITY_AGENT: "v1.3.{p}-eksbuild.1",
    EBS_CSI_DRIVER: "v1.{q}.0-eksbuild.1",
}

_RECOMMENDED_RELEASES = {
    "1.30": "1.30.14-20260714",
    "1.31": "1.31.14-20260714",
    "1.32": "1.32.13-20260714",
    "1.33": "1.33.13-20260714",
    "1.34": "1.34.9-20260714",
    "1.35": "1.35.6-20260714",
    "1.36": "1.36.2-20260714",
}
"""The AL2023 node release per Kubernetes minor of EKS AMI release v20260714 (the release the committed pools
pin), as the parameter
`/aws/service/eks/optimized-ami/<minor>/amazon-linux-2023/<arch>/standard/recommended/release_version`
answers while it is the newest: `<Kubernetes patch version>-<build date>` (awslabs/amazon-eks-ami
CHANGELOG.md, "AMI Release v20260714", column "Release version", @ 81fec2e8)."""
_BOTTLEROCKET_IMAGE_VERSION = "1.40.0-c4a0e2f1"
"""`/aws/service/bottlerocket/aws-k8s-<minor>/<arch>/latest/image_version`: `<Bottlerocket version>-<commit>`,
the shape Bottlerocket's quickstart prints (the number is illustrative)."""

_DIRECTIONS = {
    "north": "n",
    "south": "s",
    "east": "e",
    "west": "w",
    "central": "c",
    "northeast": "ne",
    "northwest": "nw",
    "southeast": "se",
    "southwest": "sw",
}
_ZONE_COUNT = {"us-east-1": 6, "us-west-2": 4}
"""Availability zones per region where it is not three (regions vary; these two are the common ones)."""


def _digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def _uuid(*parts: str) -> str:
    return str(uuid.UUID(hex=_digest(*parts, length=32)))


def default_addon_version(addon: str, kubernetes_version: str) -> str:
    """The mocked default build of `addon` for `kubernetes_version` (`1.35`)."""
    minor = int(kubernetes_version.split(".")[1])
    return _ADDON_BUILDS[addon].format(k=kubernetes_version, p=minor - 30, q=minor + 15)


def zone_id_prefix(region: str) -> str:
    """`us-west-2` -> `usw2`, `ap-northeast-1` -> `apne1`, `us-gov-west-1` -> `usgw1`: how AZ ids are
    spelt (`use1-az1`; AWS RAM user guide, "Availability Zone IDs for your AWS resources")."""
    match = re.fullmatch(r"(us-gov|[a-z]{2})-([a-z]+)-(\d+)", region)
    if not match:
        raise ValueError(f"not a region name: {region!r}")
    area, direction, number = match.groups()
    return f"{area.replace('us-gov', 'usg')}{_DIRECTIONS[direction]}{number}"


class AwsMocks(pulumi.runtime.Mocks):
    """Resource and invoke mocks for everything gpu-eks declares."""

    def __init__(
        self, region: str, account_id: str = ACCOUNT_ID, existing_log_groups: tuple[str, ...] = ()
    ) -> None:
        """`existing_log_groups`: names of log groups the account holds before the program runs (none in a
        new account)."""
        self.region = region
        self.existing_log_groups = existing_log_groups
        self.account_id = account_id

    # Read at the first call, as the provider reads its region: a program refuses a region that is no
    # region's name before it registers anything, and the mocks must not fail first.
    @functools.cached_property
    def partition(self) -> Partition:
        return partition_of_region(self.region)

    @functools.cached_property
    def dns_suffix(self) -> str:
        return dns_suffix(self.partition)

    def _zones(self) -> list[str]:
        """The region's availability zones, `<region><letter>` (`_ZONE_COUNT` of them, else three)."""
        return [f"{self.region}{x}" for x in "abcdef"[: _ZONE_COUNT.get(self.region, 3)]]

    def _arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        region = self.region if regional else ""
        return f"arn:{self.partition}:{service}:{region}:{self.account_id}:{resource}"

    def _physical_name(self, args: pulumi.runtime.MockResourceArgs, key: str = "name") -> str:
        """The name a provider would give: the explicit one, or the logical name plus Pulumi's 7-character
        random suffix (auto-naming)."""
        explicit = args.inputs.get(key)
        return str(explicit) if explicit else f"{args.name}-{_digest(args.typ, args.name, length=7)}"

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        typ, inputs = args.typ, dict(args.inputs)
        state: dict[str, Any] = dict(inputs)
        if typ in _EC2_IDS:
            prefix, arn_type = _EC2_IDS[typ]
            resource_id = f"{prefix}-{_digest(typ, args.name)}"
            if arn_type is not None:
                state["arn"] = self._arn("ec2", f"{arn_type}/{resource_id}")
            if typ == "aws:ec2/vpc:Vpc":
                state["defaultSecurityGroupId"] = f"sg-{_digest('default-sg', args.name)}"
            if typ == "aws:ec2/eip:Eip":
                state["publicIp"] = f"198.51.100.{int(_digest(args.name, length=2), 16) % 254 + 1}"
            if prefix == "sgr":
                state["securityGroupRuleId"] = resource_id
            return resource_id, state
        handler = getattr(self, "_" + typ.replace(":", "_").replace("/", "_").replace(".", "_"), None)
        if handler is not None:
            return handler(args, state)  # type: ignore[no-any-return]
        if typ.startswith("kubernetes:"):
            return self._kubernetes(args, state)
        return f"{args.name}-id", state

    # AWS resources, named after their type tokens.
    def _aws_ec2_tag_Tag(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id `<resource id>,<key>` (terraform-provider-aws internal/service/ec2/tag.go: tagCreateResourceID).
        return f"{state.get('resourceId')},{state.get('key')}", state

    def _aws_ec2_placementGroup_PlacementGroup(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id: the name (pulumi_aws/ec2/placement_group.py: "import placement groups using the `name`");
        # `arn:...:ec2:<region>:<account>:placement-group/<name>` and `placementGroupId` pg- + 17 hex
        # (terraform-provider-aws ec2/ec2_placement_group.go: `placementGroupARN` by name, GroupId).
        name = self._physical_name(args)
        state.update(
            name=name,
            arn=self._arn("ec2", f"placement-group/{name}"),
            placementGroupId=f"pg-{_digest(args.typ, name)}",
        )
        return name, state

    def _aws_cloudwatch_logGroup_LogGroup(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id: the name; `arn` without the trailing `:*` DescribeLogGroups reports
        # (pulumi_aws/cloudwatch/log_group.py `arn`; terraform-provider-aws logs/group.go trims it).
        name = self._physical_name(args)
        state.update(name=name, arn=self._arn("logs", f"log-group:{name}"))
        return name, state

    def _aws_budgets_budget_Budget(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id `<account>:<name>` (terraform-provider-aws internal/service/budgets/budget.go
        # budgetCreateResourceID); `arn:<partition>:budgets::<account>:budget/<name>`, a global service
        # (the same file's read; pulumi_aws/budgets/budget.py `arn`); accountId defaults to the caller's.
        name = self._physical_name(args)
        state.update(
            name=name,
            accountId=self.account_id,
            arn=self._arn("budgets", f"budget/{name}", regional=False),
        )
        return f"{self.account_id}:{name}", state

    def _aws_iam_role_Role(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id: the role name; `arn:<partition>:iam::<account>:role<path><name>`; `uniqueId` AROA + 17
        # (pulumi_aws/iam/role.py `arn`, `unique_id`; IAM user guide, "Unique identifiers").
        name = self._physical_name(args)
        path = state.get("path") or "/"
        state.update(
            name=name,
            arn=f"arn:{self.partition}:iam::{self.account_id}:role{path}{name}",
            uniqueId=f"AROA{_digest(name, length=17).upper()}",
        )
        return name, state

    def _aws_iam_policy_Policy(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id: the ARN (pulumi_aws/iam/policy.py `arn`: "The ARN assigned by AWS to this policy").
        name = self._physical_name(args)
        arn = f"arn:{self.partition}:iam::{self.account_id}:policy/{name}"
        state.update(name=name, arn=arn, policyId=f"ANPA{_digest(name, length=17).upper()}")
        return arn, state

    def _aws_iam_rolePolicyAttachment_RolePolicyAttachment(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id `<role>-<unique id>`: terraform-provider-aws iam/role_policy_attachment.go uses
        # terraform-plugin-sdk's `id.PrefixedUniqueId("<role>-")`, a UTC timestamp to 1/10000 s without the
        # dot (18 digits) and an 8-hex-digit counter (26 characters after the prefix).
        return f"{state.get('role')}-202612010000000000{_digest(args.name, length=8)}", state

    def _aws_eks_nodeGroup_NodeGroup(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id `<cluster>:<node group>`; `arn:...:nodegroup/<cluster>/<name>/<uuid>`; `status` ACTIVE once
        # created (pulumi_aws/eks/node_group.py `arn`, `status`; terraform-provider-aws eks/node_group.go).
        name = self._physical_name(args, "nodeGroupName")
        cluster = state.get("clusterName")
        state.update(
            nodeGroupName=name,
            arn=self._arn("eks", f"nodegroup/{cluster}/{name}/{_uuid(str(cluster), name)}"),
            status="ACTIVE",
        )
        return f"{cluster}:{name}", state

    def _aws_eks_addon_Addon(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id `<cluster>:<add-on>`; `arn:...:addon/<cluster>/<add-on>/<uuid>`; without `addonVersion` EKS
        # installs the default build (pulumi_aws/eks/addon.py `addon_version`, `arn`).
        cluster, addon = str(state.get("clusterName")), str(state.get("addonName"))
        if not state.get("addonVersion"):
            state["addonVersion"] = default_addon_version(addon, "1.35")
        state["arn"] = self._arn("eks", f"addon/{cluster}/{addon}/{_uuid(cluster, addon)}")
        return f"{cluster}:{addon}", state

    def _aws_eks_accessEntry_AccessEntry(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id `<cluster>:<principal ARN>`; `accessEntryArn`
        # `arn:...:access-entry/<cluster>/role/<account>/<role name>/<uuid>` (pulumi_aws/eks/access_entry.py;
        # EKS API reference, AccessEntry.accessEntryArn).
        cluster, principal = str(state.get("clusterName")), str(state.get("principalArn"))
        account, role = principal.split(":")[4], principal.rsplit("/", 1)[-1]
        state["accessEntryArn"] = self._arn(
            "eks", f"access-entry/{cluster}/role/{account}/{role}/{_uuid(cluster, principal)}"
        )
        return f"{cluster}:{principal}", state

    def _aws_eks_accessPolicyAssociation_AccessPolicyAssociation(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id `<cluster>#<principal ARN>#<policy ARN>`
        # (terraform-provider-aws eks/access_policy_association.go).
        return f"{state.get('clusterName')}#{state.get('principalArn')}#{state.get('policyArn')}", state

    def _aws_eks_podIdentityAssociation_PodIdentityAssociation(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id: the association id, `a-` + 17 (`<cluster>,<association id>` is only the import format)
        # (pulumi_aws/eks/pod_identity_association.py `association_id`, `association_arn`;
        # terraform-provider-aws eks/pod_identity_association.go: Create sets `ID = AssociationID`).
        association_id = f"a-{_digest(args.name)}"
        cluster = state.get("clusterName")
        state.update(
            associationId=association_id,
            associationArn=self._arn("eks", f"podidentityassociation/{cluster}/{association_id}"),
        )
        return association_id, state

    def _aws_sqs_queue_Queue(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id: the queue URL `https://sqs.<region>.<dns suffix>/<account>/<name>`; `arn:...:sqs:...:<name>`
        # (pulumi_aws/sqs/queue.py `url`: "Same as `id`: The URL for the created Amazon SQS queue").
        name = self._physical_name(args)
        url = f"https://sqs.{self.region}.{self.dns_suffix}/{self.account_id}/{name}"
        state.update(name=name, url=url, arn=self._arn("sqs", name))
        return url, state

    def _aws_sqs_queuePolicy_QueuePolicy(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        return str(state.get("queueUrl")), state  # AWS identifies a queue policy by its queue's URL

    def _aws_cloudwatch_eventRule_EventRule(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id: the name on the default bus; `arn:...:events:...:rule/<name>`
        # (pulumi_aws/cloudwatch/event_rule.py).
        name = self._physical_name(args)
        state.update(name=name, arn=self._arn("events", f"rule/{name}"))
        return name, state

    def _aws_cloudwatch_eventTarget_EventTarget(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        target_id = state.get("targetId") or f"{args.name}-{_digest(args.name, length=7)}"
        state["targetId"] = target_id
        return f"{state.get('rule')}-{target_id}", state

    def _aws_amp_workspace_Workspace(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id: the workspace id `ws-<uuid>` (terraform-provider-aws amp/workspace.go sets the id to it; AMP API
        # reference, RemoteWrite's sample `/workspaces/ws-b226cc2a-a446-46a9-933a-ac50479a5568/...`); `arn`
        # `arn:<partition>:aps:<region>:<account>:workspace/<id>` (pulumi_aws/amp/workspace.py `arn`);
        # `prometheusEndpoint` `https://aps-workspaces.<region>.<dns suffix>/workspaces/<id>/`, with the
        # trailing slash that `api/v1/remote_write` and `api/v1/query` are appended to
        # (pulumi_aws/amp/workspace.py `prometheus_endpoint`; the remote-write URL pattern of the EMR
        # Serverless API's PrometheusMonitoringConfiguration, `https://aps-workspaces.<region>.amazonaws
        # (.<tld>)+/workspaces/<id>/api/v1/remote_write`).
        workspace_id = f"ws-{_uuid(args.typ, args.name)}"
        state.update(
            arn=self._arn("aps", f"workspace/{workspace_id}"),
            prometheusEndpoint=f"https://aps-workspaces.{self.region}.{self.dns_suffix}/workspaces/{workspace_id}/",
        )
        return workspace_id, state

    def _aws_amp_ruleGroupNamespace_RuleGroupNamespace(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id: the ARN `arn:<partition>:aps:<region>:<account>:rulegroupsnamespace/<workspace id>/<name>`
        # (terraform-provider-aws amp/rule_group_namespace.go sets the id to the ARN; pulumi_aws/amp/
        # rule_group_namespace.py `arn`).
        arn = self._arn("aps", f"rulegroupsnamespace/{state.get('workspaceId')}/{state.get('name')}")
        state["arn"] = arn
        return arn, state

    def _aws_amp_alertManagerDefinition_AlertManagerDefinition(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id: the workspace id (terraform-provider-aws amp/alert_manager_definition.go sets the id to it).
        return str(state.get("workspaceId")), state

    def _aws_kms_key_Key(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id: the key id, a UUID; `arn:<partition>:kms:<region>:<account>:key/<key id>` (pulumi_aws/kms/key.py
        # `arn`, `key_id`; terraform-provider-aws kms/key.go sets the id to the KeyId).
        key_id = _uuid(args.typ, args.name)
        state.update(keyId=key_id, arn=self._arn("kms", f"key/{key_id}"))
        return key_id, state

    def _aws_sns_topic_Topic(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id: the ARN `arn:<partition>:sns:<region>:<account>:<name>` (terraform-provider-aws sns/topic.go
        # sets the id to the TopicArn; pulumi_aws/sns/topic.py `arn`: "The ARN of the SNS topic, as a more
        # obvious property (clone of id)").
        name = self._physical_name(args)
        arn = self._arn("sns", name)
        state.update(name=name, arn=arn, owner=self.account_id)
        return arn, state

    def _aws_sns_topicPolicy_TopicPolicy(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id: the topic's ARN (terraform-provider-aws sns/topic_policy.go).
        state["owner"] = self.account_id
        return str(state.get("arn")), state

    def _aws_sns_topicSubscription_TopicSubscription(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        # id and `arn`: the subscription ARN `<topic ARN>:<uuid>`; e-mail and HTTPS subscriptions wait for the
        # endpoint's confirmation (`pendingConfirmation`; pulumi_aws/sns/topic_subscription.py).
        arn = f"{state.get('topic')}:{_uuid(args.typ, args.name)}"
        state.update(
            arn=arn, pendingConfirmation=state.get("protocol") in ("email", "email-json", "http", "https")
        )
        return arn, state

    def _aws_iam_rolePolicy_RolePolicy(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # id `<role name>:<policy name>` (terraform-provider-aws iam/role_policy.go, resourceRolePolicyPut);
        # `name` as given or auto-named (pulumi_aws/iam/role_policy.py `name`: "If omitted, the provider will
        # assign a random, unique name").
        name = self._physical_name(args)
        state["name"] = name
        return f"{state.get('role')}:{name}", state

    def _eks_index_Cluster(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """pulumi-eks' Cluster is a remote component: its outputs are exactly what it would report
        (nodejs/eks/cluster/cluster.ts @ccf53f17, `createCluster` and `generateKubeconfig`)."""
        name = str(state.get("name") or args.name)
        oidc_id = _digest(name, length=32).upper()
        # The EKS cluster's `identities[0].oidcs[0].issuer`: an https URL (pulumi_aws/eks/cluster.py).
        issuer_url = f"https://oidc.eks.{self.region}.{self.dns_suffix}/id/{oidc_id}"
        endpoint = f"https://{oidc_id}.gr7.{self.region}.eks.{self.dns_suffix}"
        certificate = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1PQ0sKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
        # generateKubeconfig(clusterName, endpoint, region, includeProfile=false, ca, providerCredentialOpts):
        # the outputs never carry `--profile` (only pulumi-eks's own provider does); `--role` only with
        # `providerCredentialOpts.roleArn`.
        token_args = ["--region", self.region, "eks", "get-token", "--cluster-name", name, "--output", "json"]
        role_arn = (state.get("providerCredentialOpts") or {}).get("roleArn")
        if role_arn:
            token_args += ["--role", role_arn]
        kubeconfig = {
            "apiVersion": "v1",
            "clusters": [
                {
                    "cluster": {"server": endpoint, "certificate-authority-data": certificate},
                    "name": "kubernetes",
                }
            ],
            "contexts": [{"context": {"cluster": "kubernetes", "user": "aws"}, "name": "aws"}],
            "current-context": "aws",
            "kind": "Config",
            "users": [
                {
                    "name": "aws",
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": token_args,
                            "env": [
                                {
                                    "name": "KUBERNETES_EXEC_INFO",
                                    "value": '{"apiVersion": "client.authentication.k8s.io/v1beta1"}',
                                }
                            ],
                        }
                    },
                }
            ],
        }
        outputs = {
            "kubeconfig": kubeconfig,
            # `pulumi.jsonStringify(core.kubeconfig)`: compact JSON.
            "kubeconfigJson": json.dumps(kubeconfig, separators=(",", ":")),
            # With skipDefaultSecurityGroups: the security group EKS created
            # (`vpcConfig.clusterSecurityGroupId`).
            "clusterSecurityGroupId": f"sg-{_digest('eks-cluster-sg', name)}",
            # The OIDC provider's ARN names the issuer without its scheme
            # (pulumi_aws/iam/open_id_connect_provider.py).
            "oidcProviderArn": (
                f"arn:{self.partition}:iam::{self.account_id}:oidc-provider/{issuer_url.removeprefix('https://')}"
            ),
            # `oidcProviderUrl` is the issuer URL itself; `oidcIssuer` drops `https://`.
            "oidcProviderUrl": issuer_url,
            "oidcIssuer": issuer_url.replace("https://", ""),
        }
        return f"{name}-eks", outputs

    def _kubernetes(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if args.typ == "kubernetes:helm.sh/v3:Release":
            # `status` is a ReleaseStatus (pulumi_kubernetes/helm/v3/outputs.py): deployed at revision 1.
            name = self._physical_name(args)
            namespace = state.get("namespace") or "default"
            chart = str(state.get("chart") or "").rsplit("/", 1)[-1]
            state.update(
                name=name,
                status={
                    "name": name,
                    "namespace": namespace,
                    "status": "deployed",
                    "revision": 1,
                    "chart": chart,
                    "version": state.get("version"),
                },
            )
            return f"{namespace}/{name}", state
        # Kubernetes objects: id `<namespace>/<name>` or `<name>`; an unnamed object gets the logical name
        # plus a random suffix (pulumi-kubernetes auto-naming).
        metadata = dict(state.get("metadata") or {})
        metadata.setdefault("name", f"{args.name}-{_digest(args.typ, args.name, length=8)}")
        state["metadata"] = metadata
        namespace = metadata.get("namespace")
        return (f"{namespace}/{metadata['name']}" if namespace else str(metadata["name"])), state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token = args.token
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            # Zone names `<region><letter>`, zone ids `<region code>-az<n>`, group names the region, id the
            # region (pulumi_aws/get_availability_zones.py `names`, `zone_ids`, `group_names`).
            zones = self._zones()
            prefix = zone_id_prefix(self.region)
            return {
                "names": zones,
                "zoneIds": [f"{prefix}-az{i + 1}" for i in range(len(zones))],
                "groupNames": [self.region],
                "state": args.args.get("state"),
                "id": self.region,
            }, []
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            # An assumed role: `arn:<partition>:sts::<account>:assumed-role/<role>/<session>`, user id
            # `<role unique id>:<session>` (pulumi_aws/get_caller_identity.py; STS GetCallerIdentity).
            session = "gpu-eks-deploy"
            return {
                "accountId": self.account_id,
                "arn": f"arn:{self.partition}:sts::{self.account_id}:assumed-role/{CALLER_ROLE}/{session}",
                "userId": f"AROA{_digest(CALLER_ROLE, length=17).upper()}:{session}",
                "id": self.account_id,
            }, []
        if token == "aws:eks/getAddonVersion:getAddonVersion":
            # The build marked default for the version, or with `mostRecent` the newest (a later eksbuild);
            # id: the add-on name (pulumi_aws/eks/get_addon_version.py; terraform-provider-aws
            # eks/addon_version_data_source.go: first listed version, or the one with `defaultVersion`).
            addon, version = str(args.args["addonName"]), str(args.args["kubernetesVersion"])
            most_recent = bool(args.args.get("mostRecent"))
            build = default_addon_version(addon, version)
            return {
                "addonName": addon,
                "kubernetesVersion": version,
                "mostRecent": most_recent,
                "version": build.replace("-eksbuild.1", "-eksbuild.3") if most_recent else build,
                "region": self.region,
                "id": addon,
            }, []
        if token == "aws:cloudwatch/getLogGroups:getLogGroups":
            # Names and ARNs (without DescribeLogGroups' trailing `:*`) of the groups whose names start with
            # the prefix; id: the region (pulumi_aws/cloudwatch/get_log_groups.py; terraform-provider-aws
            # logs/groups_data_source.go: `d.SetId(Region)`, `TrimLogGroupARNWildcardSuffix`).
            prefix = str(args.args.get("logGroupNamePrefix") or "")
            names = [n for n in self.existing_log_groups if n.startswith(prefix)]
            return {
                "arns": [self._arn("logs", f"log-group:{n}") for n in names],
                "logGroupNames": names,
                "logGroupNamePrefix": prefix or None,
                "region": self.region,
                "id": self.region,
            }, []
        if token == "aws:ec2/getVpcEndpointService:getVpcEndpointService":
            # `service` becomes `com.amazonaws.<region>.<service>`, offered in every zone of the region; id
            # the CRC-32 of the service name, `arn:...:vpc-endpoint-service/<service id>`
            # (terraform-provider-aws ec2/vpc_endpoint_service_data_source.go: `create.StringHashcode`).
            service, kind = str(args.args["service"]), str(args.args["serviceType"])
            name = f"com.amazonaws.{self.region}.{service}"
            service_id = f"vpce-svc-{_digest(name)}"
            return {
                "service": service,
                "serviceName": name,
                "serviceType": kind,
                "serviceId": service_id,
                "arn": self._arn("ec2", f"vpc-endpoint-service/{service_id}"),
                "availabilityZones": self._zones(),
                "owner": "amazon",
                "acceptanceRequired": False,
                "id": str(zlib.crc32(name.encode())),
            }, []
        if token == "aws:ssm/getParameter:getParameter":
            return self._public_parameter(str(args.args["name"])), []
        raise NotImplementedError(f"no mock for invoke {token}: add one that answers like AWS would")

    def _public_parameter(self, name: str) -> dict[str, Any]:
        """An AWS public parameter of the recommended node releases
        (`facts.eks.node_group_release_parameter`): a String whose ARN has no account (public parameters
        belong to AWS; SSM user guide, "Discovering public parameters in Parameter Store"); `value` and
        `insecureValue` carry the same text, `value` marked secret by the provider
        (pulumi_aws/ssm/get_parameter.py); id: the name (terraform-provider-aws
        ssm/parameter_data_source.go). A name SSM does not hold fails, as GetParameter's ParameterNotFound
        does."""
        al2023 = re.fullmatch(
            r"/aws/service/eks/optimized-ami/(\d+\.\d+)/amazon-linux-2023/(x86_64|arm64)/standard/recommended/"
            r"release_version",
            name,
        )
        bottlerocket = re.fullmatch(
            r"/aws/service/bottlerocket/aws-k8s-(\d+\.\d+)/(x86_64|arm64)/latest/image_version", name
        )
        if al2023 and al2023[1] in _RECOMMENDED_RELEASES:
            value = _RECOMMENDED_RELEASES[al2023[1]]
        elif bottlerocket:
            value = _BOTTLEROCKET_IMAGE_VERSION
        else:
            raise ValueError(f"ParameterNotFound: {name}")
        return {
            "arn": f"arn:{self.partition}:ssm:{self.region}::parameter{name}",
            "id": name,
            "insecureValue": value,
            "name": name,
            "region": self.region,
            "type": "String",
            "value": value,
            "version": 1,
            "withDecryption": True,
        }
