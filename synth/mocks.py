"""Mocks that answer the way AWS and the providers would: ids, ARNs and names of the right shape, in the
stack's partition, region and account, deterministic so that snapshots stay stable."""

import hashlib
import json
from typing import Any

import pulumi

from facts.partitions import partition_of_region

ACCOUNT_ID = "111122223333"
"""The account the mocked caller identity reports (the documentation account)."""

# type token -> id prefix of what AWS would return
_EC2_ID_PREFIX = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
}


def _digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


class AwsMocks(pulumi.runtime.Mocks):
    """Resource and invoke mocks for everything gpu-eks declares."""

    def __init__(self, region: str, account_id: str = ACCOUNT_ID) -> None:
        self.region = region
        self.account_id = account_id
        self.partition = partition_of_region(region)

    def _arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        region = self.region if regional else ""
        return f"arn:{self.partition}:{service}:{region}:{self.account_id}:{resource}"

    def _physical_name(self, args: pulumi.runtime.MockResourceArgs, key: str = "name") -> str:
        """The name a provider would give: the explicit one, or the logical name plus a random suffix."""
        explicit = args.inputs.get(key)
        return str(explicit) if explicit else f"{args.name}-{_digest(args.typ, args.name, length=7)}"

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        typ, inputs = args.typ, dict(args.inputs)
        state: dict[str, Any] = dict(inputs)
        if typ in _EC2_ID_PREFIX:
            resource_id = f"{_EC2_ID_PREFIX[typ]}-{_digest(typ, args.name)}"
            state["arn"] = self._arn("ec2", f"{_EC2_ID_PREFIX[typ]}/{resource_id}")
            if typ == "aws:ec2/vpc:Vpc":
                state["defaultSecurityGroupId"] = f"sg-{_digest('default-sg', args.name)}"
            if typ == "aws:ec2/eip:Eip":
                state["publicIp"] = f"198.51.100.{int(_digest(args.name, length=2), 16) % 254 + 1}"
            return resource_id, state
        handler = getattr(self, "_" + typ.replace(":", "_").replace("/", "_").replace(".", "_"), None)
        if handler is not None:
            return handler(args, state)  # type: ignore[no-any-return]
        if typ.startswith("kubernetes:"):
            return self._kubernetes(args, state)
        return f"{args.name}-id", state

    # AWS resources, named after their type tokens.
    def _aws_ec2_tag_Tag(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return f"{state.get('resourceId')},{state.get('key')}", state

    def _aws_iam_role_Role(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        name = self._physical_name(args)
        path = state.get("path") or "/"
        state.update(
            name=name,
            arn=f"arn:{self.partition}:iam::{self.account_id}:role{path}{name}",
            uniqueId=f"AROA{_digest(name, length=17).upper()}",
        )
        return name, state

    def _aws_iam_policy_Policy(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        name = self._physical_name(args)
        arn = f"arn:{self.partition}:iam::{self.account_id}:policy/{name}"
        state.update(name=name, arn=arn, policyId=f"ANPA{_digest(name, length=17).upper()}")
        return arn, state

    def _aws_iam_rolePolicyAttachment_RolePolicyAttachment(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        return f"{state.get('role')}-{_digest(args.name, length=8)}", state

    def _aws_iam_openIdConnectProvider_OpenIdConnectProvider(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        host = str(state.get("url", "")).removeprefix("https://")
        arn = f"arn:{self.partition}:iam::{self.account_id}:oidc-provider/{host}"
        state["arn"] = arn
        return arn, state

    def _aws_eks_nodeGroup_NodeGroup(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        name = self._physical_name(args, "nodeGroupName")
        cluster = state.get("clusterName")
        state.update(
            nodeGroupName=name,
            arn=self._arn("eks", f"nodegroup/{cluster}/{name}/{_digest(name, length=8)}"),
            status="ACTIVE",
        )
        return f"{cluster}:{name}", state

    def _aws_eks_addon_Addon(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        cluster, addon = state.get("clusterName"), state.get("addonName")
        state.setdefault("addonVersion", "v1.0.0-eksbuild.1")
        state["arn"] = self._arn("eks", f"addon/{cluster}/{addon}/{_digest(str(addon), length=8)}")
        return f"{cluster}:{addon}", state

    def _aws_eks_accessEntry_AccessEntry(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        cluster, principal = state.get("clusterName"), state.get("principalArn")
        state["accessEntryArn"] = self._arn("eks", f"access-entry/{cluster}/role/{_digest(str(principal))}")
        return f"{cluster}:{principal}", state

    def _aws_eks_accessPolicyAssociation_AccessPolicyAssociation(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        return f"{state.get('clusterName')}#{state.get('principalArn')}#{state.get('policyArn')}", state

    def _aws_eks_podIdentityAssociation_PodIdentityAssociation(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        association_id = f"a-{_digest(args.name)}"
        cluster = state.get("clusterName")
        state.update(
            associationId=association_id,
            associationArn=self._arn("eks", f"podidentityassociation/{cluster}/{association_id}"),
        )
        return f"{cluster},{association_id}", state

    def _aws_sqs_queue_Queue(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        name = self._physical_name(args)
        url = f"https://sqs.{self.region}.amazonaws.com/{self.account_id}/{name}"
        state.update(name=name, url=url, arn=self._arn("sqs", name))
        return url, state

    def _aws_sqs_queuePolicy_QueuePolicy(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        return str(state.get("queueUrl")), state  # AWS identifies a queue policy by its queue's URL

    def _aws_cloudwatch_eventRule_EventRule(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
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
        """Ids `ws-<uuid>`; endpoint `https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/` (the
        `prometheus_endpoint` docstring of pulumi_aws/amp/workspace.py and AMP's CreateWorkspace response)."""
        digest = _digest(args.name, length=32)
        workspace_id = f"ws-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        suffix = "amazonaws.com.cn" if self.partition == "aws-cn" else "amazonaws.com"
        state.update(
            arn=self._arn("aps", f"workspace/{workspace_id}"),
            prometheusEndpoint=f"https://aps-workspaces.{self.region}.{suffix}/workspaces/{workspace_id}/",
        )
        return workspace_id, state

    def _aws_amp_ruleGroupNamespace_RuleGroupNamespace(
        self, args: Any, state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """Identified by its ARN `...:rulegroupsnamespace/<workspace id>/<name>` (terraform-provider-aws
        internal/service/amp/rule_group_namespace.go sets the id to the ARN)."""
        arn = self._arn("aps", f"rulegroupsnamespace/{state.get('workspaceId')}/{state.get('name')}")
        state["arn"] = arn
        return arn, state

    def _aws_iam_rolePolicy_RolePolicy(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Identified as `<role>:<policy name>`; the name is generated when not given (terraform-provider-aws
        internal/service/iam/role_policy.go)."""
        name = self._physical_name(args)
        state["name"] = name
        return f"{state.get('role')}:{name}", state

    def _eks_index_Cluster(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """pulumi-eks' Cluster is a remote component: its outputs are exactly what it would report."""
        name = str(state.get("name") or args.name)
        oidc_id = _digest(name, length=32).upper()
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{oidc_id}"
        endpoint = f"https://{oidc_id}.gr7.{self.region}.eks.amazonaws.com"
        certificate = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1PQ0sKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": endpoint, "certificate-authority-data": certificate}}
            ],
            "contexts": [{"name": "aws", "context": {"cluster": name, "user": "aws"}}],
            "current-context": "aws",
            "preferences": {},
            "users": [
                {
                    "name": "aws",
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["--region", self.region, "eks", "get-token", "--cluster-name", name],
                        }
                    },
                }
            ],
        }
        outputs = {
            "kubeconfig": kubeconfig,
            "kubeconfigJson": json.dumps(kubeconfig),
            "clusterSecurityGroupId": f"sg-{_digest('eks-cluster-sg', name)}",
            "oidcProviderArn": f"arn:{self.partition}:iam::{self.account_id}:oidc-provider/{issuer}",
            "oidcProviderUrl": issuer,
            "oidcIssuer": issuer,
        }
        return f"{name}-eks", outputs

    def _kubernetes(self, args: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if args.typ == "kubernetes:helm.sh/v3:Release":
            name = self._physical_name(args)
            namespace = state.get("namespace") or "default"
            state.update(
                name=name,
                status={"name": name, "namespace": namespace, "status": "deployed", "revision": 1},
            )
            return f"{namespace}/{name}", state
        metadata = dict(state.get("metadata") or {})
        metadata.setdefault("name", f"{args.name}-{_digest(args.typ, args.name, length=8)}")
        state["metadata"] = metadata
        namespace = metadata.get("namespace")
        return (f"{namespace}/{metadata['name']}" if namespace else str(metadata["name"])), state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token = args.token
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            letters = "abcd"
            return {
                "names": [f"{self.region}{x}" for x in letters],
                "zoneIds": [f"usw2-az{i + 1}" for i in range(len(letters))],
                "id": self.region,
            }, []
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": self.account_id,
                "arn": f"arn:{self.partition}:iam::{self.account_id}:user/deployer",
                "userId": "AIDAEXAMPLE",
                "id": self.account_id,
            }, []
        if token == "aws:index/getPartition:getPartition":
            suffix = "amazonaws.com.cn" if self.partition == "aws-cn" else "amazonaws.com"
            return {"partition": self.partition, "dnsSuffix": suffix, "id": self.partition}, []
        if token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}, []
        raise NotImplementedError(f"no mock for invoke {token}: add one that answers like AWS would")
