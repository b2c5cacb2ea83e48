"""The mocks answer what the providers return: one test per mocked output the program reads, each citing
where the shape comes from (pulumi-aws 7.51.1 SDK docstrings under .venv/lib/python3.11/site-packages,
the Terraform provider that sets ids and ARNs, pulumi-eks 4.4.0's nodejs/eks/cluster/cluster.ts at
pulumi/pulumi-eks@ccf53f17, pulumi-kubernetes 4.34.2). A mock shaped after what the program expects would
let a test pass while the real provider breaks the program (the issuer with `https://` in IRSA trust
conditions was exactly that)."""

import json
import re
from typing import Any

import pytest
from pulumi.runtime import MockCallArgs, MockResourceArgs

from facts.eks import ADDON_VERSION, KUBE_PROXY, kube_proxy_minor, node_group_release_parameter
from synth.mocks import ACCOUNT_ID, AwsMocks, zone_id_prefix

US = AwsMocks("us-west-2")
CN = AwsMocks("cn-north-1")


def resource(mocks: AwsMocks, typ: str, logical: str, /, **inputs: Any) -> tuple[str | None, dict[str, Any]]:
    return mocks.new_resource(MockResourceArgs(typ=typ, name=logical, inputs=inputs, custom=True))


def call(mocks: AwsMocks, token: str, **args: Any) -> dict[str, Any]:
    result, failures = mocks.call(MockCallArgs(token=token, args=args, provider=""))
    assert failures == []
    return result


def eks_cluster(mocks: AwsMocks = US, **inputs: Any) -> dict[str, Any]:
    _, outputs = resource(mocks, "eks:index:Cluster", "cluster", name="ml-dev", **inputs)
    return outputs


# --- pulumi-eks Cluster (remote component: exactly its outputs) ---------------------------------


@pytest.mark.parametrize("mocks", [US, CN], ids=["aws", "aws-cn"])
def test_oidc_provider_url_is_the_issuer_url_and_oidc_issuer_drops_the_scheme(mocks: AwsMocks) -> None:
    """cluster.ts `createCluster`: `oidcProviderUrl: oidcIssuerUrl` (the EKS cluster's
    `identities[0].oidcs[0].issuer`, an https URL) and `oidcIssuer: oidcIssuerUrl.replace("https://", "")`;
    the SDK docstring of `oidc_issuer`: "OIDC Provider URL without leading `https://`"."""
    outputs = eks_cluster(mocks)
    suffix = mocks.dns_suffix
    assert re.fullmatch(
        rf"https://oidc\.eks\.{mocks.region}\.{re.escape(suffix)}/id/[0-9A-F]{{32}}",
        outputs["oidcProviderUrl"],
    )
    assert outputs["oidcIssuer"] == outputs["oidcProviderUrl"].removeprefix("https://")


@pytest.mark.parametrize("mocks", [US, CN], ids=["aws", "aws-cn"])
def test_oidc_provider_arn_names_the_issuer_without_scheme(mocks: AwsMocks) -> None:
    """pulumi_aws/iam/open_id_connect_provider.py: the provider's ARN is
    `arn:<partition>:iam::<account>:oidc-provider/<issuer host and path>`."""
    outputs = eks_cluster(mocks)
    assert outputs["oidcProviderArn"] == (
        f"arn:{mocks.partition}:iam::{ACCOUNT_ID}:oidc-provider/{outputs['oidcIssuer']}"
    )


def test_kubeconfig_is_what_generate_kubeconfig_builds() -> None:
    """cluster.ts `generateKubeconfig`: one cluster named `kubernetes`, context and user `aws`, the token
    from `aws --region <region> eks get-token --cluster-name <name> --output json` with the
    KUBERNETES_EXEC_INFO env; the outputs come from `genKubeconfig(false)`, so never with `--profile`."""
    kubeconfig = eks_cluster(providerCredentialOpts={"profileName": "ml"})["kubeconfig"]
    assert set(kubeconfig) == {"apiVersion", "clusters", "contexts", "current-context", "kind", "users"}
    [cluster] = kubeconfig["clusters"]
    assert cluster["name"] == "kubernetes"
    assert re.fullmatch(
        r"https://[0-9A-F]{32}\.gr7\.us-west-2\.eks\.amazonaws\.com", cluster["cluster"]["server"]
    )
    assert set(cluster["cluster"]) == {"server", "certificate-authority-data"}
    assert kubeconfig["contexts"] == [{"context": {"cluster": "kubernetes", "user": "aws"}, "name": "aws"}]
    assert kubeconfig["current-context"] == "aws"
    [user] = kubeconfig["users"]
    command = user["user"]["exec"]
    assert command["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert command["command"] == "aws"
    assert command["args"] == [
        "--region", "us-west-2", "eks", "get-token", "--cluster-name", "ml-dev", "--output", "json",
    ]  # fmt: skip
    assert command["env"] == [
        {"name": "KUBERNETES_EXEC_INFO", "value": '{"apiVersion": "client.authentication.k8s.io/v1beta1"}'}
    ]


def test_kubeconfig_carries_a_role_only_when_asked() -> None:
    """cluster.ts `generateKubeconfig`: `opts.roleArn` adds `--role <arn>` (profile or not)."""
    args = eks_cluster(providerCredentialOpts={"roleArn": "arn:aws:iam::111122223333:role/k"})["kubeconfig"][
        "users"
    ][0]["user"]["exec"]["args"]
    assert args[-2:] == ["--role", "arn:aws:iam::111122223333:role/k"]


def test_kubeconfig_json_is_the_kubeconfig_stringified() -> None:
    """cluster.ts: `kubeconfigJson = pulumi.jsonStringify(core.kubeconfig)` (compact JSON)."""
    outputs = eks_cluster()
    assert outputs["kubeconfigJson"] == json.dumps(outputs["kubeconfig"], separators=(",", ":"))


def test_cluster_security_group_id_is_a_security_group_id() -> None:
    """SDK docstring of `cluster_security_group_id`: with `skipDefaultSecurityGroups`, "the EKS created
    security group" (`vpcConfig.clusterSecurityGroupId` in cluster.ts)."""
    assert re.fullmatch(r"sg-[0-9a-f]{17}", eks_cluster()["clusterSecurityGroupId"])


# --- AWS resources --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typ", "prefix", "kind"),
    [
        ("aws:ec2/vpc:Vpc", "vpc", "vpc"),
        ("aws:ec2/subnet:Subnet", "subnet", "subnet"),
        ("aws:ec2/internetGateway:InternetGateway", "igw", "internet-gateway"),
        ("aws:ec2/natGateway:NatGateway", "nat", None),
        ("aws:ec2/eip:Eip", "eipalloc", "elastic-ip"),
        ("aws:ec2/routeTable:RouteTable", "rtb", "route-table"),
        ("aws:ec2/routeTableAssociation:RouteTableAssociation", "rtbassoc", None),
        ("aws:ec2/securityGroup:SecurityGroup", "sg", "security-group"),
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "sgr", "security-group-rule"),
        ("aws:ec2/vpcEndpoint:VpcEndpoint", "vpce", "vpc-endpoint"),
    ],
)
def test_ec2_ids_and_arns(typ: str, prefix: str, kind: str | None) -> None:
    """EC2 ids are `<prefix>-` and 17 hex digits; ARNs `arn:aws:ec2:<region>:<account>:<type>/<id>` with
    the resource types of the IAM Service Authorization Reference (terraform-provider-aws ec2/ec2_eip.go
    `eipARN`: `elastic-ip/`; vpc_security_group_ingress_rule.go `securityGroupRuleARN`:
    `security-group-rule/`). NAT gateways and route table associations have no `arn` output (their
    pulumi-aws 7.51.1 classes have no such property)."""
    resource_id, state = resource(US, typ, "x")
    assert re.fullmatch(rf"{prefix}-[0-9a-f]{{17}}", str(resource_id))
    if kind is None:
        assert "arn" not in state
    else:
        assert state["arn"] == f"arn:aws:ec2:us-west-2:{ACCOUNT_ID}:{kind}/{resource_id}"
    if prefix == "sgr":
        assert state["securityGroupRuleId"] == resource_id


def test_tag_id_is_resource_and_key() -> None:
    """terraform-provider-aws ec2/tag.go: id `<resource id>,<key>`."""
    resource_id, _ = resource(
        US, "aws:ec2/tag:Tag", "t", resourceId="sg-0123456789abcdef0", key="k", value="v"
    )
    assert resource_id == "sg-0123456789abcdef0,k"


def test_role_name_arn_and_unique_id() -> None:
    """pulumi_aws/iam/role.py: `name` (auto-named: logical name and a 7-character suffix when unset),
    `arn:aws:iam::<account>:role<path><name>`, `unique_id` (IAM: `AROA` + 17 characters)."""
    named_id, named = resource(US, "aws:iam/role:Role", "r", name="KarpenterNodeRole-ml-dev")
    assert named_id == named["name"] == "KarpenterNodeRole-ml-dev"
    assert named["arn"] == f"arn:aws:iam::{ACCOUNT_ID}:role/KarpenterNodeRole-ml-dev"
    assert re.fullmatch(r"AROA[0-9A-F]{17}", named["uniqueId"])
    _, auto = resource(US, "aws:iam/role:Role", "cluster-system-nodes")
    assert re.fullmatch(r"cluster-system-nodes-[0-9a-f]{7}", auto["name"])
    _, china = resource(CN, "aws:iam/role:Role", "r", name="n")
    assert china["arn"].startswith("arn:aws-cn:iam::")


def test_policy_id_is_its_arn() -> None:
    """pulumi_aws/iam/policy.py: `arn` ("The ARN assigned by AWS to this policy"), which is also the id."""
    policy_id, state = resource(US, "aws:iam/policy:Policy", "p", name="KarpenterControllerPolicy")
    assert policy_id == state["arn"] == f"arn:aws:iam::{ACCOUNT_ID}:policy/KarpenterControllerPolicy"


@pytest.mark.parametrize("mocks", [US, CN], ids=["aws", "aws-cn"])
def test_queue_url_arn_and_name(mocks: AwsMocks) -> None:
    """pulumi_aws/sqs/queue.py: `url` ("Same as `id`"), `arn`, `name`; SQS endpoints use the partition's
    DNS suffix."""
    queue_id, state = resource(mocks, "aws:sqs/queue:Queue", "q", name="ml-dev")
    assert queue_id == state["url"] == f"https://sqs.{mocks.region}.{mocks.dns_suffix}/{ACCOUNT_ID}/ml-dev"
    assert state["arn"] == f"arn:{mocks.partition}:sqs:{mocks.region}:{ACCOUNT_ID}:ml-dev"


def test_event_rule_name_and_arn() -> None:
    """pulumi_aws/cloudwatch/event_rule.py: `name` (auto-named when unset), `arn` `...:rule/<name>`."""
    rule_id, state = resource(US, "aws:cloudwatch/eventRule:EventRule", "karpenter-spot")
    assert rule_id == state["name"]
    assert state["arn"] == f"arn:aws:events:us-west-2:{ACCOUNT_ID}:rule/{state['name']}"


def test_get_log_groups_lists_the_groups_under_the_prefix() -> None:
    """pulumi_aws/cloudwatch/get_log_groups.py (`arns`, `log_group_names`); terraform-provider-aws
    logs/groups_data_source.go: DescribeLogGroups by prefix, ARNs with the `:*` trimmed, id the region."""
    mocks = AwsMocks("us-west-2", existing_log_groups=("/aws/eks/ml-dev/cluster", "/aws/lambda/other"))
    result = call(mocks, "aws:cloudwatch/getLogGroups:getLogGroups", logGroupNamePrefix="/aws/eks/ml-dev/")
    assert result["logGroupNames"] == ["/aws/eks/ml-dev/cluster"]
    assert result["arns"] == [f"arn:aws:logs:us-west-2:{ACCOUNT_ID}:log-group:/aws/eks/ml-dev/cluster"]
    assert result["id"] == "us-west-2"
    assert call(US, "aws:cloudwatch/getLogGroups:getLogGroups", logGroupNamePrefix="/aws/eks/")["arns"] == []


def test_get_vpc_endpoint_service_names_the_service_in_the_region() -> None:
    """terraform-provider-aws ec2/vpc_endpoint_service_data_source.go: `service` becomes
    `com.amazonaws.<region>.<service>`, id the CRC-32 of the name (`create.StringHashcode`), the zones it is
    offered in."""
    result = call(
        US, "aws:ec2/getVpcEndpointService:getVpcEndpointService", service="sts", serviceType="Interface"
    )
    assert result["serviceName"] == "com.amazonaws.us-west-2.sts"
    assert result["serviceType"] == "Interface"
    assert result["id"] == "3091535302"  # Go: strconv.Itoa(int(crc32.ChecksumIEEE([]byte(name))))
    assert (
        result["availabilityZones"]
        == call(US, "aws:index/getAvailabilityZones:getAvailabilityZones")["names"]
    )
    assert re.fullmatch(
        r"arn:aws:ec2:us-west-2:\d{12}:vpc-endpoint-service/vpce-svc-[0-9a-f]{17}", result["arn"]
    )


def test_log_group_id_is_its_name_and_arn_has_no_wildcard() -> None:
    """pulumi_aws/cloudwatch/log_group.py `arn`; terraform-provider-aws logs/group.go sets the id to the
    name and trims DescribeLogGroups' trailing `:*` from the ARN."""
    group_id, state = resource(US, "aws:cloudwatch/logGroup:LogGroup", "g", name="/aws/eks/ml-dev/cluster")
    assert group_id == "/aws/eks/ml-dev/cluster"
    assert state["arn"] == f"arn:aws:logs:us-west-2:{ACCOUNT_ID}:log-group:/aws/eks/ml-dev/cluster"


def test_role_policy_attachment_id_is_the_role_and_a_unique_suffix() -> None:
    """terraform-provider-aws iam/role_policy_attachment.go: `id.PrefixedUniqueId("<role>-")`, whose suffix
    (terraform-plugin-sdk helper/id) is 18 timestamp digits and an 8-hex-digit counter."""
    attachment_id, _ = resource(US, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "a", role="node")
    assert re.fullmatch(r"node-[0-9]{18}[0-9a-f]{8}", str(attachment_id))


def test_node_group_id_arn_and_status() -> None:
    """pulumi_aws/eks/node_group.py: id `<cluster>:<node group>`, `arn`
    `...:nodegroup/<cluster>/<name>/<uuid>`, `status` ACTIVE once created."""
    group_id, state = resource(US, "aws:eks/nodeGroup:NodeGroup", "cluster-system", clusterName="ml-dev")
    name = state["nodeGroupName"]
    assert group_id == f"ml-dev:{name}"
    assert re.fullmatch(
        rf"arn:aws:eks:us-west-2:{ACCOUNT_ID}:nodegroup/ml-dev/{name}/[0-9a-f-]{{36}}", state["arn"]
    )
    assert state["status"] == "ACTIVE"


def test_addon_id_arn_and_version() -> None:
    """pulumi_aws/eks/addon.py: id `<cluster>:<add-on>`, `arn` `...:addon/<cluster>/<add-on>/<uuid>`,
    `addon_version` as given."""
    addon_id, state = resource(
        US,
        "aws:eks/addon:Addon",
        "a",
        clusterName="ml-dev",
        addonName="coredns",
        addonVersion="v1.12.5-eksbuild.1",
    )
    assert addon_id == "ml-dev:coredns"
    assert re.fullmatch(
        rf"arn:aws:eks:us-west-2:{ACCOUNT_ID}:addon/ml-dev/coredns/[0-9a-f-]{{36}}", state["arn"]
    )
    assert state["addonVersion"] == "v1.12.5-eksbuild.1"


def test_access_entry_echoes_its_principal_and_has_an_entry_arn() -> None:
    """pulumi_aws/eks/access_entry.py: id `<cluster>:<principal ARN>`, `principal_arn` as given,
    `access_entry_arn` `...:access-entry/<cluster>/role/<account>/<role>/<uuid>` (EKS API AccessEntry)."""
    principal = f"arn:aws:iam::{ACCOUNT_ID}:role/platform-admin"
    entry_id, state = resource(
        US, "aws:eks/accessEntry:AccessEntry", "e", clusterName="ml-dev", principalArn=principal
    )
    assert entry_id == f"ml-dev:{principal}"
    assert state["principalArn"] == principal
    assert re.fullmatch(
        rf"arn:aws:eks:us-west-2:{ACCOUNT_ID}:access-entry/ml-dev/role/{ACCOUNT_ID}/platform-admin/[0-9a-f-]{{36}}",
        state["accessEntryArn"],
    )


def test_pod_identity_association_ids() -> None:
    """pulumi_aws/eks/pod_identity_association.py: `association_id` (`a-` + 17), `association_arn`; the id
    is the association id (terraform-provider-aws eks/pod_identity_association.go: Create sets
    `data.ID = data.AssociationID`; `<cluster>,<association id>` is only what ImportState parses)."""
    association_id, state = resource(
        US, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "p", clusterName="ml-dev"
    )
    assert re.fullmatch(r"a-[0-9a-f]{17}", state["associationId"])
    assert association_id == state["associationId"]
    assert state["associationArn"] == (
        f"arn:aws:eks:us-west-2:{ACCOUNT_ID}:podidentityassociation/ml-dev/{state['associationId']}"
    )


@pytest.mark.parametrize("mocks", [US, CN], ids=["aws", "aws-cn"])
def test_amp_workspace_id_arn_and_endpoint(mocks: AwsMocks) -> None:
    """terraform-provider-aws amp/workspace.go: the id is the workspace id (`ws-<uuid>`, as in the AMP API
    reference's RemoteWrite sample); pulumi_aws/amp/workspace.py `arn` and `prometheus_endpoint`, which the
    program appends `api/v1/remote_write` and `api/v1/query` to: `https://aps-workspaces.<region>.<dns
    suffix>/workspaces/<id>/` (the remote-write URL pattern of the EMR Serverless API)."""
    workspace_id, state = resource(mocks, "aws:amp/workspace:Workspace", "observability", alias="ml-prod")
    assert re.fullmatch(r"ws-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", str(workspace_id))
    assert state["arn"] == f"arn:{mocks.partition}:aps:{mocks.region}:{ACCOUNT_ID}:workspace/{workspace_id}"
    endpoint = state["prometheusEndpoint"]
    assert endpoint == f"https://aps-workspaces.{mocks.region}.{mocks.dns_suffix}/workspaces/{workspace_id}/"
    assert re.fullmatch(
        r"https://aps-workspaces\.([a-z]{2}-[a-z-]{1,20}-[1-9])\.amazonaws(\.[0-9A-Za-z]{2,4})+/workspaces/"
        r"[-_.0-9A-Za-z]{1,100}/api/v1/remote_write",
        f"{endpoint}api/v1/remote_write",
    )


def test_amp_rule_group_namespace_id_is_its_arn() -> None:
    """terraform-provider-aws amp/rule_group_namespace.go sets the id to the ARN (`CreateRuleGroupsNamespace`
    output); pulumi_aws/amp/rule_group_namespace.py `arn`."""
    namespace_id, state = resource(
        US,
        "aws:amp/ruleGroupNamespace:RuleGroupNamespace",
        "observability",
        name="gpu-eks",
        workspaceId="ws-b226cc2a-a446-46a9-933a-ac50479a5568",
    )
    assert (
        namespace_id
        == state["arn"]
        == (
            f"arn:aws:aps:us-west-2:{ACCOUNT_ID}:rulegroupsnamespace/ws-b226cc2a-a446-46a9-933a-ac50479a5568/gpu-eks"
        )
    )


def test_role_policy_id_is_role_and_name() -> None:
    """terraform-provider-aws iam/role_policy.go: id `<role name>:<policy name>`; pulumi_aws/iam/
    role_policy.py `name` ("If omitted, the provider will assign a random, unique name")."""
    policy_id, state = resource(
        US, "aws:iam/rolePolicy:RolePolicy", "observability-grafana", role="ml-prod-monitoring-grafana"
    )
    assert re.fullmatch(r"observability-grafana-[0-9a-f]{7}", state["name"])
    assert policy_id == f"ml-prod-monitoring-grafana:{state['name']}"
    named_id, named = resource(US, "aws:iam/rolePolicy:RolePolicy", "p", role="r", name="query")
    assert (named_id, named["name"]) == ("r:query", "query")


def test_helm_release_status_is_a_release_status() -> None:
    """pulumi_kubernetes/helm/v3/outputs.py ReleaseStatus: app_version, chart, name, namespace, revision,
    status, version; a successful release is `deployed`."""
    _, state = resource(
        US, "kubernetes:helm.sh/v3:Release", "gpu-operator", name="gpu-operator", chart="gpu-operator",
        namespace="gpu-operator", version="v26.7.0",
    )  # fmt: skip
    status = state["status"]
    assert set(status) <= {"appVersion", "chart", "name", "namespace", "revision", "status", "version"}
    assert (status["status"], status["name"], status["namespace"]) == (
        "deployed",
        "gpu-operator",
        "gpu-operator",
    )
    assert status["chart"] == "gpu-operator"
    assert status["version"] == "v26.7.0"


# --- Invokes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("region", "prefix", "zones"),
    [
        ("us-west-2", "usw2", 4),
        ("us-east-1", "use1", 6),
        ("eu-central-1", "euc1", 3),
        ("ap-northeast-1", "apne1", 3),
        ("cn-north-1", "cnn1", 3),
        ("us-gov-west-1", "usgw1", 3),
    ],
)
def test_availability_zones_have_names_and_zone_ids_of_the_region(
    region: str, prefix: str, zones: int
) -> None:
    """pulumi_aws/get_availability_zones.py: `names` (`<region><letter>`), `zone_ids` (`use1-az1` form,
    AWS RAM user guide "Availability Zone IDs"), `group_names` (the region for AZs)."""
    result = call(AwsMocks(region), "aws:index/getAvailabilityZones:getAvailabilityZones", state="available")
    assert zone_id_prefix(region) == prefix
    assert result["names"] == [f"{region}{letter}" for letter in "abcdef"[:zones]]
    assert result["zoneIds"] == [f"{prefix}-az{n}" for n in range(1, zones + 1)]
    assert result["groupNames"] == [region]


def test_caller_identity_is_an_assumed_role() -> None:
    """pulumi_aws/get_caller_identity.py `account_id`, `arn`, `user_id`; STS GetCallerIdentity for an
    assumed role: `arn:aws:sts::<account>:assumed-role/<role>/<session>`, user id `<role id>:<session>`."""
    result = call(US, "aws:index/getCallerIdentity:getCallerIdentity")
    assert re.fullmatch(r"\d{12}", result["accountId"])
    assert re.fullmatch(
        rf"arn:aws:sts::{result['accountId']}:assumed-role/[\w+=,.@-]+/[\w+=,.@-]+", result["arn"]
    )
    assert re.fullmatch(r"AROA[0-9A-F]{17}:[\w+=,.@-]+", result["userId"])


@pytest.mark.parametrize(
    "addon", ["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", "aws-ebs-csi-driver"]
)
def test_addon_version_is_an_eks_build_for_the_kubernetes_version(addon: str) -> None:
    """pulumi_aws/eks/get_addon_version.py `version`; terraform-provider-aws eks/addon_version_data_source.go:
    id the add-on name; the build marked `defaultVersion` for the version, the first listed with
    `most_recent`."""
    default = call(
        US,
        "aws:eks/getAddonVersion:getAddonVersion",
        addonName=addon,
        kubernetesVersion="1.35",
        mostRecent=False,
    )
    assert default["id"] == default["addonName"] == addon
    assert ADDON_VERSION.fullmatch(default["version"])
    if addon == KUBE_PROXY:
        assert kube_proxy_minor(default["version"]) == "1.35"
    latest = call(
        US,
        "aws:eks/getAddonVersion:getAddonVersion",
        addonName=addon,
        kubernetesVersion="1.35",
        mostRecent=True,
    )
    assert ADDON_VERSION.fullmatch(latest["version"])
    assert latest["mostRecent"] is True


def test_an_unknown_invoke_is_refused_rather_than_answered() -> None:
    with pytest.raises(NotImplementedError, match="no mock for invoke aws:index/getRegion"):
        US.call(MockCallArgs(token="aws:index/getRegion:getRegion", args={}, provider=""))


def test_alerting_resources_ids_and_arns() -> None:
    """terraform-provider-aws: a KMS key's id is its KeyId (kms/key.go), a topic's and a topic policy's id the
    topic ARN (sns/topic.go, sns/topic_policy.go), a subscription's id its ARN `<topic ARN>:<uuid>`, an alert
    manager definition's id the workspace id (amp/alert_manager_definition.go)."""
    key_id, key = resource(US, "aws:kms/key:Key", "observability-alerts")
    assert key["arn"] == f"arn:aws:kms:us-west-2:{ACCOUNT_ID}:key/{key_id}"
    assert key["keyId"] == key_id
    topic_id, topic = resource(US, "aws:sns/topic:Topic", "observability-alerts", name="ml-prod-alerts")
    assert topic_id == topic["arn"] == f"arn:aws:sns:us-west-2:{ACCOUNT_ID}:ml-prod-alerts"
    policy_id, _ = resource(US, "aws:sns/topicPolicy:TopicPolicy", "observability-alerts", arn=topic_id)
    assert policy_id == topic_id
    subscription_id, subscription = resource(
        US,
        "aws:sns/topicSubscription:TopicSubscription",
        "s",
        topic=topic_id,
        protocol="email",
        endpoint="a@b.c",
    )
    assert subscription_id.startswith(f"{topic_id}:")
    assert subscription["pendingConfirmation"] is True
    definition_id, _ = resource(
        US, "aws:amp/alertManagerDefinition:AlertManagerDefinition", "observability", workspaceId="ws-1"
    )
    assert definition_id == "ws-1"


# --- SSM public parameters: the recommended node releases --------------------------------------------


@pytest.mark.parametrize(
    ("ami_type", "minor"), [("AL2023_x86_64_STANDARD", "1.35"), ("AL2023_ARM_64_STANDARD", "1.36")]
)
def test_recommended_al2023_release_is_the_minors_patch_and_a_build_date(ami_type: str, minor: str) -> None:
    """SSM answers `<Kubernetes patch version>-<build date>` (awslabs/amazon-eks-ami CHANGELOG.md, "Release
    version" of each AMI release), the value a managed node group's `releaseVersion` takes; a public
    parameter's ARN has no account."""
    name = node_group_release_parameter(ami_type, minor)
    answer = call(US, "aws:ssm/getParameter:getParameter", name=name)
    assert re.fullmatch(rf"{re.escape(minor)}\.\d+-20\d{{6}}", answer["insecureValue"])
    assert answer["value"] == answer["insecureValue"]
    assert answer["arn"] == f"arn:aws:ssm:us-west-2::parameter{name}"
    assert (answer["id"], answer["name"], answer["type"]) == (name, name, "String")


def test_bottlerocket_release_is_an_image_version() -> None:
    name = node_group_release_parameter("BOTTLEROCKET_ARM_64", "1.35")
    assert name == "/aws/service/bottlerocket/aws-k8s-1.35/arm64/latest/image_version"
    assert re.fullmatch(
        r"\d+\.\d+\.\d+-[0-9a-f]{8}", call(US, "aws:ssm/getParameter:getParameter", name=name)["value"]
    )


def test_a_parameter_ssm_does_not_hold_is_not_found() -> None:
    with pytest.raises(ValueError, match="ParameterNotFound"):
        call(
            US,
            "aws:ssm/getParameter:getParameter",
            name="/aws/service/eks/optimized-ami/1.20/amazon-linux-2023/x86_64/standard/recommended/release_version",
        )


def test_a_placement_group_is_known_by_its_name() -> None:
    """pulumi_aws/ec2/placement_group.py: imported by `name`, `arn` and `placement_group_id` computed
    (terraform-provider-aws ec2_placement_group.go builds the ARN from the name: `placement-group/<name>`)."""
    resource_id, outputs = resource(
        US, "aws:ec2/placementGroup:PlacementGroup", "pg", name="ml-prod-gpu-training", strategy="cluster"
    )
    assert resource_id == outputs["name"] == "ml-prod-gpu-training"
    assert outputs["arn"] == f"arn:aws:ec2:us-west-2:{ACCOUNT_ID}:placement-group/ml-prod-gpu-training"
    assert re.fullmatch(r"pg-[0-9a-f]{17}", outputs["placementGroupId"])
