"""Which changes make a provider replace a resource instead of updating it, per resource type (pure data).

One entry per Pulumi type token the program declares (a guard test fails when a declared type has none),
plus the types the next changes will declare. `synth.plan` reads these to predict, offline, what
`pulumi up` would create, update, replace or delete.

Paths are Pulumi input paths (camelCase, as registered), `.` between keys and `[*]` for any list element;
a change at or below a path counts. How each provider decides:

- AWS (pulumi-aws 7.51.1 bridges terraform-provider-aws v6.x): an input whose Terraform schema says
  `ForceNew: true` (SDKv2) or `RequiresReplace()` (plugin framework), plus the `CustomizeDiff` rules noted.
  Sources are `hashicorp/terraform-provider-aws` files at the commit named (the stored version that was
  read; where it is a v5 file, the attributes named are unchanged in v6).
- Kubernetes (pulumi-kubernetes 4.34.2): `.metadata.name` and `.metadata.namespace` always, plus the kind's
  entry in the provider's force-new table (`provider/pkg/provider/diff.go`); a named object whose name and
  namespace stay is replaced delete-first (`provider/pkg/provider/provider.go`, `Diff`). A change of kind
  or API group changes the type token, hence the URN: a delete and a create. The pulumi-kubernetes
  snapshot read is 94977969 (main after v4.32.0; the tables are unchanged since v4.0).
- pulumi-eks 4.4.0's `eks:index:Cluster` is a remote component: the inputs listed are those that reach
  a force-new argument of the `aws.eks.Cluster` it creates (`nodejs/eks/cluster/cluster.ts`, read at
  7bf0c1b, main after v4.3.0).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

TF_AWS: Final = "hashicorp/terraform-provider-aws"
PULUMI_K8S: Final = "pulumi/pulumi-kubernetes"
PULUMI_K8S_REF: Final = "94977969d64112b04e19945818a7d5d5f38f631d"
PULUMI_EKS_REF: Final = "7bf0c1b179932ce51cb02dfc4f9bd0d7550cb0cd"
K8S_FORCE_NEW: Final = "provider/pkg/provider/diff.go"
K8S_CREATE_REFUSES_EXISTING: Final = (
    "pulumi-kubernetes creates objects client-side since v4.29.0 (pulumi/pulumi-kubernetes#4278), so a "
    "create of an object that exists already fails with AlreadyExists unless the provider sets "
    "upsertExistingObjects (off by default; the 4.34.2 SDK's `Provider` docstring)"
)
"""Why a Kubernetes object left in the cluster (a retained namespace) blocks declaring it anew."""
KARPENTER_CRDS: Final = (
    "aws/karpenter-provider-aws pkg/apis/crds @ v1.14.1 (tests/fixtures/karpenter-1.14.1/crds)"
)


@dataclass(frozen=True)
class Source:
    """Where a fact was read: repository, path and the commit (or tag) of the version read."""

    repo: str
    path: str
    ref: str
    """Commit or tag; empty when the file was not available and the fact comes from `note`."""
    note: str = ""

    def __str__(self) -> str:
        where = f"{self.repo} {self.path}" + (f" @ {self.ref[:12]}" if self.ref else "")
        return f"{where} ({self.note})" if self.note else where


@dataclass(frozen=True)
class RefusedUpdate:
    """A path the API refuses to change in place: the provider plans an update, and the update fails."""

    path: str
    why: str


@dataclass(frozen=True)
class Replacement:
    """How one resource type's provider decides between update and replace."""

    source: Source
    forces_new: tuple[str, ...] = ()
    """Input paths whose change replaces the resource."""
    unordered: tuple[str, ...] = ()
    """Set-typed inputs: a new order of the same elements is no change."""
    exclusive: tuple[str, ...] = ()
    """Inputs of which one is set: setting a different one of them replaces (e.g. a rule's source kind)."""
    forces_new_on_removal: tuple[str, ...] = ()
    """Inputs that may be added or changed in place but whose removal replaces."""
    kubeconfig: tuple[str, ...] = ()
    """Inputs holding a kubeconfig: a change of its active cluster (server, CA) replaces, other changes
    (users, exec arguments) update."""
    named_delete_before_replace: bool = False
    """The provider replaces delete-first when the object's name and namespace are unchanged."""
    identity: tuple[str, ...] = ()
    """Inputs that name the physical resource. A create-first replacement that keeps them collides with the
    old one (the name exists), or, for attachments and tags, ends with the old one's delete undoing it."""
    refused_updates: tuple[RefusedUpdate, ...] = field(default=())
    why: Mapping[str, str] = field(default_factory=dict)
    """Force-new path -> why the provider replaces there, where a reviewer would expect an update."""


def _tf(path: str, ref: str, note: str = "") -> Source:
    return Source(TF_AWS, f"internal/service/{path}", ref, note)


_K8S_METADATA = ("metadata.name", "metadata.namespace")


def _k8s(
    *forces_new: str,
    refused: tuple[RefusedUpdate, ...] = (),
    note: str = "",
    why: Mapping[str, str] | None = None,
) -> Replacement:
    return Replacement(
        source=Source(PULUMI_K8S, K8S_FORCE_NEW, PULUMI_K8S_REF, note),
        forces_new=_K8S_METADATA + forces_new,
        named_delete_before_replace=True,
        refused_updates=refused,
        why=why or {},
    )


_LABEL_SELECTOR = "spec.selector"
"""diff.go lists `.spec.selector` and its matchLabels/matchExpressions; the prefix covers them."""

_NODE_POOL_REFUSED = (
    RefusedUpdate(
        "spec.template.spec.nodeClassRef.group",
        f"CEL rule 'nodeClassRef.group is immutable' ({KARPENTER_CRDS}, karpenter.sh_nodepools.yaml)",
    ),
    RefusedUpdate(
        "spec.template.spec.nodeClassRef.kind",
        f"CEL rule 'nodeClassRef.kind is immutable' ({KARPENTER_CRDS}, karpenter.sh_nodepools.yaml)",
    ),
)

_STORAGE_CLASS_REFUSED = tuple(
    RefusedUpdate(
        path,
        "the API server forbids it (kubernetes/kubernetes pkg/apis/storage/validation/validation.go, "
        "ValidateStorageClassUpdate); pulumi-kubernetes does not list it as force-new",
    )
    for path in ("reclaimPolicy", "volumeBindingMode")
)

CLUSTER_SUBNET_ZONES: Final = (
    "EKS keeps a cluster in the availability zones it was created in: an update of its subnets must name the "
    "same set of zones (aws/containers-roadmap#170, the EKS product manager announcing subnet updates: "
    '"The subnets passed as an update must contain the same set of AZs as originally passed when creating '
    'the cluster"; #2258, open, asks for zone changes)'
)
"""Why an `eks:index:Cluster` update whose subnets span other zones fails (UpdateClusterConfig)."""

REPLACEMENT: Final[dict[str, Replacement]] = {
    # --- pulumi-eks ----------------------------------------------------------------------------------
    "eks:index:Cluster": Replacement(
        source=Source(
            "pulumi/pulumi-eks",
            "nodejs/eks/cluster/cluster.ts",
            PULUMI_EKS_REF,
            "inputs reaching aws_eks_cluster name, role_arn (serviceRole) and kubernetes_network_config "
            "(ForceNew; internal/service/eks/cluster.go @ 00555dc5b38f); vpc_config subnets and security "
            "groups (within the cluster's availability zones: CLUSTER_SUBNET_ZONES), version, endpoint "
            "access, logging, access_config.authentication_mode and upgrade_policy update in place; "
            "bootstrapSelfManagedAddons and accessConfig.bootstrapClusterCreatorAdminPermissions are in "
            "pulumi-eks's ignoreChanges",
        ),
        forces_new=("name", "serviceRole", "kubernetesServiceIpAddressRange", "ipFamily"),
        # CustomizeDiff ForceNewIfChange("encryption_config"): envelope encryption cannot be turned off.
        forces_new_on_removal=("encryptionConfigKeyArn",),
        unordered=("enabledClusterLogTypes", "publicAccessCidrs"),
        identity=("name",),
        refused_updates=(
            RefusedUpdate(
                "vpcId",
                "moves the cluster's subnets to another VPC; EKS keeps a cluster in the VPC it was created "
                'in (UpdateClusterConfig takes subnets of that VPC only: EKS user guide, "View Amazon EKS '
                'networking requirements for VPC and subnets"). A new network (gpu-eks:network.cidr or '
                "network.existing) is a new cluster: deploy it as a new stack and move the workloads",
            ),
        ),
    ),
    # --- AWS -----------------------------------------------------------------------------------------
    "aws:cloudwatch/eventRule:EventRule": Replacement(
        source=_tf("events/rule.go", "0cdab4ae09a963535e03dde0bff4784afe8e3517"),
        forces_new=("name", "namePrefix", "eventBusName"),
        identity=("name",),
    ),
    "aws:cloudwatch/eventTarget:EventTarget": Replacement(
        source=_tf("events/target.go", "0762c41e2027fcd3cb8340d3e6886c6975fc0a59"),
        forces_new=("rule", "targetId", "eventBusName"),
        identity=("rule", "targetId"),
    ),
    "aws:cloudwatch/logGroup:LogGroup": Replacement(
        source=_tf("logs/group.go", "0073593e7d6993ba482409f4dc35438daaa79bb3"),
        forces_new=("name", "namePrefix", "logGroupClass"),
        identity=("name",),
    ),
    "aws:ec2/eip:Eip": Replacement(
        source=_tf(
            "ec2/ec2_eip.go",
            "",
            "not in the stored index; ForceNew attributes as the v6 docs mark them "
            "(website/docs/r/eip.html.markdown)",
        ),
        forces_new=(
            "address",
            "customerOwnedIpv4Pool",
            "domain",
            "ipamPoolId",
            "networkBorderGroup",
            "publicIpv4Pool",
        ),
    ),
    "aws:ec2/internetGateway:InternetGateway": Replacement(
        source=_tf(
            "ec2/vpc_internet_gateway.go",
            "",
            "not in the stored index; vpc_id attaches and detaches in place (v6 docs)",
        ),
        refused_updates=(
            RefusedUpdate(
                "vpcId",
                "detaches the gateway from its VPC first (DetachInternetGateway), which EC2 refuses while "
                "that VPC has mapped public addresses (Gateway.DependencyViolation; Amazon VPC user guide, "
                '"Detach an internet gateway from your VPC"): its NAT gateways\' Elastic IPs, whose NAT '
                "gateways are deleted only after this update",
            ),
        ),
    ),
    "aws:ec2/natGateway:NatGateway": Replacement(
        source=_tf("ec2/vpc_nat_gateway.go", "04088eaa54948421bf1ef7494ae2b2c01d9243e3"),
        forces_new=(
            "allocationId",
            "connectivityType",
            "privateIp",
            "secondaryPrivateIpAddressCount",
            "subnetId",
        ),
        # An Elastic IP is associated with one NAT gateway at a time (CreateNatGateway fails with
        # Resource.AlreadyAssociated): a create-first replacement keeping the allocation collides.
        identity=("allocationId",),
    ),
    "aws:ec2/routeTable:RouteTable": Replacement(
        source=_tf("ec2/vpc_route_table.go", "", "not in the stored index; vpc_id is ForceNew (v6 docs)"),
        forces_new=("vpcId",),
        unordered=("routes", "propagatingVgws"),
    ),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Replacement(
        source=_tf("ec2/vpc_route_table_association.go", "0be71beb458ad8875e0acc5c91519c0ceeb214aa"),
        # route_table_id updates in place (ReplaceRouteTableAssociation).
        forces_new=("gatewayId", "subnetId"),
    ),
    "aws:ec2/securityGroup:SecurityGroup": Replacement(
        source=_tf("ec2/vpc_security_group.go", "01606926a0c0ab9174aec440f976a48b0baee722"),
        forces_new=("description", "name", "namePrefix", "vpcId"),
        identity=("name", "vpcId"),
    ),
    "aws:ec2/vpcEndpoint:VpcEndpoint": Replacement(
        source=_tf(
            "ec2/vpc_endpoint.go",
            "008db85aad5e56627b1eecab8830464a282552ed",
            "route_table_ids, subnet_ids and security_group_ids update in place (ModifyVpcEndpoint); "
            "CustomizeDiff forces a new endpoint when private_dns_enabled changes on a non-Interface one",
        ),
        forces_new=(
            "serviceName",
            "vpcId",
            "vpcEndpointType",
            "serviceRegion",
            "resourceConfigurationArn",
            "serviceNetworkArn",
            "dnsOptions.privateDnsPreference",
            "dnsOptions.privateDnsSpecifiedDomains",
        ),
        unordered=("routeTableIds", "subnetIds", "securityGroupIds"),
    ),
    "aws:ec2/securityGroupRule:SecurityGroupRule": Replacement(
        source=_tf("ec2/vpc_security_group_rule.go", "0d90774d0fdd40607cbf3b07cbab20b95c481163"),
        # Everything but the description.
        forces_new=(
            "cidrBlocks",
            "fromPort",
            "ipv6CidrBlocks",
            "prefixListIds",
            "protocol",
            "securityGroupId",
            "self",
            "sourceSecurityGroupId",
            "toPort",
            "type",
        ),
        identity=("securityGroupId", "type", "protocol", "fromPort", "toPort"),
    ),
    "aws:ec2/subnet:Subnet": Replacement(
        source=_tf("ec2/vpc_subnet.go", "00cda125a19d31754cb0d073cf551264c57955cb"),
        forces_new=(
            "availabilityZone",
            "availabilityZoneId",
            "cidrBlock",
            "ipv4IpamPoolId",
            "ipv4NetmaskLength",
            "ipv6IpamPoolId",
            "ipv6Native",
            "ipv6NetmaskLength",
            "outpostArn",
            "vpcId",
        ),
    ),
    "aws:ec2/placementGroup:PlacementGroup": Replacement(
        source=_tf(
            "ec2/ec2_placement_group.go",
            "05e34de7342261989674cfe1f047c25bb4c80db8",
            "name, strategy, partition_count and spread_level ForceNew; tags update in place; the name is "
            "the id; DeletePlacementGroup fails (InvalidPlacementGroup.InUse) while an instance is in it",
        ),
        forces_new=("name", "strategy", "partitionCount", "spreadLevel"),
        identity=("name",),
    ),
    "aws:ec2/tag:Tag": Replacement(
        source=_tf(
            "ec2/ec2_tag.go", "", "not in the stored index; resource_id and key are ForceNew (v6 docs)"
        ),
        forces_new=("resourceId", "key"),
        # A create-first replacement writes the tag, then the old resource's delete removes it.
        identity=("resourceId", "key"),
    ),
    "aws:ec2/vpc:Vpc": Replacement(
        source=_tf(
            "ec2/vpc_.go",
            "",
            "not in the stored index; cidr_block and the IPAM pool arguments are ForceNew (v6 docs)",
        ),
        forces_new=("cidrBlock", "ipv4IpamPoolId", "ipv4NetmaskLength"),
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": Replacement(
        source=_tf(
            "ec2/vpc_security_group_ingress_rule.go",
            "00a322094b4b9ade8a81b244345dbcf4b52ee8d6",
            "security_group_id RequiresReplace; ModifyPlan replaces when the source kind changes; "
            "ports, protocol and the source itself update in place (ModifySecurityGroupRules)",
        ),
        forces_new=("securityGroupId",),
        exclusive=("cidrIpv4", "cidrIpv6", "prefixListId", "referencedSecurityGroupId"),
    ),
    "aws:eks/accessEntry:AccessEntry": Replacement(
        source=_tf("eks/access_entry.go", "01f431114674c27cf790fafb67ac274bf8f765e1"),
        forces_new=("clusterName", "principalArn", "type"),
        unordered=("kubernetesGroups",),
        identity=("clusterName", "principalArn"),
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": Replacement(
        source=_tf("eks/access_policy_association.go", "01f431114674c27cf790fafb67ac274bf8f765e1"),
        forces_new=("accessScope", "clusterName", "policyArn", "principalArn"),
        unordered=("accessScope.namespaces",),
        identity=("clusterName", "principalArn", "policyArn"),
    ),
    "aws:eks/addon:Addon": Replacement(
        source=_tf("eks/addon.go", "00a35305dc1b297a6fcdecdfbba33f1e63c3da39"),
        # addon_version, configuration_values, service_account_role_arn and pod_identity_association
        # update in place (UpdateAddon).
        forces_new=("addonName", "clusterName"),
        unordered=("podIdentityAssociations",),
        identity=("clusterName", "addonName"),
    ),
    "aws:eks/nodeGroup:NodeGroup": Replacement(
        source=_tf("eks/node_group.go", "012e0a32f0686212f447447fd3d81c3d0ce256ad"),
        # version, releaseVersion, launchTemplate.version, labels, taints, scaling and update config
        # update in place.
        forces_new=(
            "amiType",
            "capacityType",
            "clusterName",
            "diskSize",
            "instanceTypes",
            "launchTemplate.id",
            "launchTemplate.name",
            "nodeGroupName",
            "nodeGroupNamePrefix",
            "nodeRoleArn",
            "remoteAccess",
            "subnetIds",
        ),
        unordered=("subnetIds", "taints", "remoteAccess.sourceSecurityGroupIds"),
        identity=("clusterName", "nodeGroupName"),
    ),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": Replacement(
        source=_tf(
            "eks/pod_identity_association.go",
            "00a35305dc1b297a6fcdecdfbba33f1e63c3da39",
            "RequiresReplace; role_arn, target_role_arn and disable_session_tags update in place",
        ),
        forces_new=("clusterName", "namespace", "serviceAccount"),
        identity=("clusterName", "namespace", "serviceAccount"),
    ),
    "aws:iam/policy:Policy": Replacement(
        source=_tf("iam/policy.go", "01ccd9a2d118a3e81a9649759bf14303526dc9e6"),
        # The description too: IAM has no call to change it.
        forces_new=("description", "name", "namePrefix", "path"),
        identity=("name",),
    ),
    "aws:iam/role:Role": Replacement(
        source=_tf("iam/role.go", "0040ea6911af00bea2cca6dbb14e86829826ad8e"),
        # assume_role_policy, description, max session, boundary, inline and managed policies update.
        forces_new=("name", "namePrefix", "path"),
        unordered=("managedPolicyArns", "inlinePolicies"),
        identity=("name",),
    ),
    "aws:iam/rolePolicy:RolePolicy": Replacement(
        source=_tf("iam/role_policy.go", "02f97af85f89a04e8ed89f5e8b64a9a67f3cfe07"),
        # The policy document updates in place (PutRolePolicy).
        forces_new=("name", "namePrefix", "role"),
        # A create-first replacement puts the same role and name (a no-op), then the old one's delete removes
        # the policy; an auto-named policy (no `name` input) gets a new name instead.
        identity=("role", "name"),
    ),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": Replacement(
        source=_tf("iam/role_policy_attachment.go", "04c79849dbe7fbe76c3054b364357bcdaade9ac5"),
        forces_new=("role", "policyArn"),
        # A create-first replacement attaches (a no-op), then the old one's delete detaches the policy.
        identity=("role", "policyArn"),
    ),
    "aws:sqs/queue:Queue": Replacement(
        source=_tf("sqs/queue.go", "00a35305dc1b297a6fcdecdfbba33f1e63c3da39"),
        forces_new=("name", "namePrefix", "fifoQueue"),
        identity=("name",),
    ),
    "aws:sqs/queuePolicy:QueuePolicy": Replacement(
        source=_tf("sqs/queue_policy.go", "0148137dc6fb802b97b74036846777ab15c0f9ad"),
        forces_new=("queueUrl",),
        # A create-first replacement sets the policy, then the old one's delete clears it.
        identity=("queueUrl",),
    ),
    "aws:amp/workspace:Workspace": Replacement(
        source=_tf(
            "amp/workspace.go",
            "0620f2a6a126dfcbc4aecbc9a117b0fbea1656ff",
            "kms_key_arn ForceNew; CustomizeDiff: an alias once set cannot be unset",
        ),
        forces_new=("kmsKeyArn",),
        forces_new_on_removal=("alias",),
    ),
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": Replacement(
        source=_tf("amp/rule_group_namespace.go", "09537f6131639c1d49ebcc38fc11972d6a4b60b5"),
        forces_new=("name", "workspaceId"),
        identity=("workspaceId", "name"),
    ),
    "aws:amp/alertManagerDefinition:AlertManagerDefinition": Replacement(
        source=_tf("amp/alert_manager_definition.go", "bfaba52288a2dc6daac79cf496b3b1c7ed6c85f7"),
        forces_new=("workspaceId",),
        identity=("workspaceId",),
    ),
    "aws:kms/key:Key": Replacement(
        source=_tf("kms/key.go", "0964ed39dadd350ec504a9535b4f507e649153d9"),
        forces_new=("customerMasterKeySpec", "keyUsage", "multiRegion", "customKeyStoreId", "xksKeyId"),
    ),
    "aws:sns/topic:Topic": Replacement(
        source=_tf("sns/topic.go", "cda04ab9f781590765d09e3883f1f56e29710079"),
        forces_new=("name", "namePrefix", "fifoTopic"),
        identity=("name",),
    ),
    "aws:sns/topicPolicy:TopicPolicy": Replacement(
        source=_tf("sns/topic_policy.go", "0964ed39dadd350ec504a9535b4f507e649153d9"),
        forces_new=("arn",),
        # A create-first replacement sets the policy, then the old one's delete resets it to the default.
        identity=("arn",),
    ),
    "aws:sns/topicSubscription:TopicSubscription": Replacement(
        source=_tf(
            "sns/topic_subscription.go",
            "04a2e6e5bc625ec85ea8c678219b483fc674877e",
            "endpoint, protocol, topic_arn ForceNew; a subscription pending confirmation cannot be deleted "
            "(Delete ignores the error)",
        ),
        forces_new=("endpoint", "protocol", "topic"),
        # SNS answers a second Subscribe of the same endpoint with the same subscription.
        identity=("topic", "protocol", "endpoint"),
    ),
    # --- Kubernetes ----------------------------------------------------------------------------------
    "pulumi:providers:kubernetes": Replacement(
        source=Source(
            PULUMI_K8S,
            "provider/pkg/provider/provider.go",
            PULUMI_K8S_REF,
            "DiffConfig: a changed active cluster of the kubeconfig (or a computed one), "
            "renderYamlToDirectory or clusterIdentifier replaces the provider, and with it every resource "
            "it manages",
        ),
        forces_new=("renderYamlToDirectory", "clusterIdentifier"),
        kubeconfig=("kubeconfig",),
    ),
    "kubernetes:helm.sh/v3:Release": Replacement(
        source=Source(
            PULUMI_K8S,
            "provider/pkg/provider/helm_release.go",
            PULUMI_K8S_REF,
            "Diff: forceNewFields .name and .namespace; DeleteBeforeReplace false (the resource option "
            "decides)",
        ),
        forces_new=("name", "namespace"),
        identity=("name", "namespace"),
    ),
    "kubernetes:core/v1:Namespace": _k8s(),
    "kubernetes:core/v1:ResourceQuota": _k8s("spec.scopes"),
    "kubernetes:core/v1:ServiceAccount": _k8s(),
    "kubernetes:core/v1:Service": _k8s("spec.clusterIP"),
    "kubernetes:core/v1:ConfigMap": _k8s(
        "data",
        "binaryData",
        note="with the provider's enableConfigMapMutable off, the default",
        why=dict.fromkeys(
            ("data", "binaryData"),
            "pulumi-kubernetes treats a ConfigMap's data as immutable unless the provider sets "
            "enableConfigMapMutable",
        ),
    ),
    "kubernetes:core/v1:Secret": _k8s(
        "type",
        "data",
        "stringData",
        note="with the provider's enableSecretMutable off, the default",
        why=dict.fromkeys(
            ("data", "stringData"),
            "pulumi-kubernetes treats a Secret's data as immutable unless the provider sets "
            "enableSecretMutable",
        ),
    ),
    "kubernetes:apps/v1:Deployment": _k8s(_LABEL_SELECTOR),
    "kubernetes:apps/v1:DaemonSet": _k8s(_LABEL_SELECTOR),
    "kubernetes:batch/v1:Job": _k8s("spec.completions", "spec.parallelism", _LABEL_SELECTOR, "spec.template"),
    "kubernetes:batch/v1:CronJob": _k8s(),
    # The force-new table lists the PodDisruptionBudget of policy/v1beta1 only (`.spec`): v1's is replaced on
    # name and namespace alone.
    "kubernetes:policy/v1:PodDisruptionBudget": _k8s(),
    # The force-new table has no networking.k8s.io group: only name and namespace.
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": _k8s(),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": _k8s(),
    "kubernetes:rbac.authorization.k8s.io/v1:Role": _k8s(),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": _k8s("roleRef"),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": _k8s("roleRef"),
    "kubernetes:storage.k8s.io/v1:StorageClass": _k8s(
        "parameters", "provisioner", refused=_STORAGE_CLASS_REFUSED
    ),
    # Custom resources: no entry in the force-new table, so only name and namespace.
    "kubernetes:karpenter.sh/v1:NodePool": _k8s(refused=_NODE_POOL_REFUSED),
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": _k8s(
        note="custom resource; the EC2NodeClass CRD of v1.14.1 has no transition (oldSelf) rules"
    ),
    "kubernetes:karpenter.sh/v1alpha1:NodeOverlay": _k8s(note="custom resource"),
    "kubernetes:monitoring.coreos.com/v1:PrometheusRule": _k8s(
        note="custom resource; the Prometheus Operator v0.93.1 CRD has no x-kubernetes-validations"
    ),
    "kubernetes:monitoring.coreos.com/v1:ServiceMonitor": _k8s(
        note="custom resource; the Prometheus Operator v0.93.1 CRD has no x-kubernetes-validations"
    ),
}
"""Replacement facts by Pulumi type token."""


def replacement_facts(type_token: str) -> Replacement:
    """The facts for a type token; `KeyError` naming where to add them when there are none. A Kubernetes
    kind at another API version than the one listed (an aliased version move) has the facts of its kind:
    pulumi-kubernetes decides by group and kind."""
    if type_token in REPLACEMENT:
        return REPLACEMENT[type_token]
    package, _, rest = type_token.partition(":")
    group_version, _, kind = rest.rpartition(":")
    group = group_version.rpartition("/")[0]
    for token, facts in REPLACEMENT.items():
        if (
            package == "kubernetes"
            and token.startswith(f"kubernetes:{group}/")
            and token.endswith(f":{kind}")
        ):
            return facts
    raise KeyError(
        f"no replacement facts for {type_token}: add its entry to facts/replacement.py REPLACEMENT"
    )


# --- What a Helm release owns outside its namespace ----------------------------------------------------


@dataclass(frozen=True)
class ChartScope:
    """Objects a chart's release owns outside its own namespace (by the chart name, the last segment of a
    Release's `chart`). Helm records the owning release on each object (`meta.helm.sh/release-name` and
    `-namespace` annotations) and refuses to install a release over objects another one owns ("invalid
    ownership metadata"): a create-first replacement of such a release fails, whatever its new namespace."""

    cluster_scoped: str
    """The cluster-scoped kinds the release installs, as a reviewer reads them."""
    source: Source
    crds: str = ""
    """Kinds whose CRDs the release holds as templates: deleting it deletes the CRDs, and the API server then
    deletes every object of those kinds."""
    outage: str = ""
    """What stops while the release is uninstalled and installed again (a delete-first replacement)."""


CHARTS: Final[dict[str, ChartScope]] = {
    "gpu-operator": ChartScope(
        "ClusterRole, ClusterRoleBinding, ClusterPolicy and NodeFeatureRules (and NFD's ClusterRoles)",
        Source(
            "NVIDIA/gpu-operator",
            "deployments/gpu-operator/templates",
            "10ee5b3638b89e11e949412aafa5ba99279c3721",
            "v26.7.0: clusterrole.yaml, clusterrolebinding.yaml, clusterpolicy.yaml, nodefeaturerules.yaml",
        ),
        outage="its ClusterPolicy goes, and with it the operands on every GPU node (device plugin, GPU "
        "feature discovery, DCGM exporter, MIG manager) until the new release is ready: running GPU pods "
        "keep their GPUs, new ones wait, and nodes launched meanwhile stay uninitialized",
    ),
    "karpenter": ChartScope(
        "ClusterRoles and ClusterRoleBindings",
        Source(
            "aws/karpenter-provider-aws",
            "charts/karpenter/templates",
            "bde00654cd316fddb3dccfba3f5ac07039865429",
            "v1.14.1: clusterrole.yaml, clusterrole-core.yaml, aggregate-clusterrole.yaml",
        ),
        outage="no controller runs until the new release is ready: pending pods get no node, and nothing is "
        "consolidated, drained or repaired (the nodes themselves keep running)",
    ),
    "karpenter-crd": ChartScope(
        "CustomResourceDefinitions",
        Source(
            "aws/karpenter-provider-aws",
            "charts/karpenter-crd/templates",
            "bde00654cd316fddb3dccfba3f5ac07039865429",
            "v1.14.1: the CRDs of karpenter.sh, karpenter.k8s.aws and autoscaling.x-k8s.io",
        ),
        crds="NodePool, NodeClaim, EC2NodeClass, NodeOverlay and CapacityBuffer",
    ),
    "kube-prometheus-stack": ChartScope(
        "ClusterRoles, ClusterRoleBindings and admission webhook configurations",
        Source(
            "prometheus-community/helm-charts",
            "charts/kube-prometheus-stack/templates/prometheus-operator",
            "",
            "clusterrole.yaml, clusterrolebinding.yaml, admission-webhooks/*WebhookConfiguration.yaml of the "
            "stored chart; 88.5.3 is pinned in facts/prometheus_stack.py",
        ),
        outage="no scraping, alerting or dashboards until the new release is ready (an inCluster "
        "Prometheus's volume goes with its namespace)",
    ),
    "prometheus-operator-crds": ChartScope(
        "CustomResourceDefinitions",
        Source(
            "prometheus-community/helm-charts",
            "charts/prometheus-operator-crds/charts/crds/templates",
            "4529d7bb4b4be3b2aa8ef0b4d40152d394213a61",
        ),
        crds="ServiceMonitor, PodMonitor, PrometheusRule and other Prometheus Operator",
    ),
}
"""Charts of the program whose releases own cluster-scoped objects. aws-efa-k8s-device-plugin renders a
DaemonSet only (aws/eks-charts stable/aws-efa-k8s-device-plugin/templates: daemonset.yaml): not listed."""


def chart_of(release_inputs: Mapping[str, object]) -> str:
    """The chart name of a Release's inputs: the last segment of `chart` (`oci://.../karpenter`)."""
    return str(release_inputs.get("chart", "")).rsplit("/", 1)[-1]


# --- Regions and waits ---------------------------------------------------------------------------------

REGION_SOURCE: Final = Source(
    TF_AWS,
    "website/docs/guides/enhanced-region-support.html.markdown",
    "0cb788ce0d5adada2f2b98572dc8462f8ed5738d",
    "v6: every regional resource has a top-level region, Optional and Computed from the provider's; "
    "'Changing the value of region will force resource replacement'; IAM (aws_iam_*) is global",
)
GLOBAL_AWS_MODULES: Final = frozenset({"iam"})
"""pulumi-aws modules of global services among the program's types (`aws:iam/...`): not replaced when
`aws:region` changes."""


def regional(type_token: str) -> bool:
    """Whether a resource lives in the stack's AWS region, so that an `aws:region` change replaces it: every
    AWS resource of a regional service (see `REGION_SOURCE`), and pulumi-eks's cluster (its
    `aws:eks/cluster:Cluster`). Kubernetes objects follow their cluster through its provider."""
    package, module, _ = type_token.split(":", 2)
    if package == "eks":
        return True
    return package == "aws" and module.split("/")[0] not in GLOBAL_AWS_MODULES


K8S_DEFAULT_DELETE_TIMEOUT_SECONDS: Final = 10 * 60
"""How long pulumi-kubernetes waits for a deleted object to be gone without a `customTimeouts.delete`
(or `pulumi.com/timeoutSeconds` annotation), then fails the delete; the next `up` deletes again
(provider/pkg/await/await.go `Deletion`, at PULUMI_K8S_REF). It deletes with foreground propagation by
default (provider/pkg/metadata/overrides.go `DeletionPropagation`), so an object stays until its dependents
that block owner deletion are gone: a NodePool waits for its NodeClaims."""
