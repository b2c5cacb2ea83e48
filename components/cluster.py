"""Cluster: the EKS control plane (pulumi-eks) and its log group, who may reach its API, the system node
group, the add-ons every node needs, access entries and the Kubernetes provider every Kubernetes resource
of the program uses.

Versions move together: the control plane, the system node group and every add-on follow
`kubernetesVersion`, and each of them is addressed to the cluster through an output that resolves only
once the control plane exists (and, on an upgrade, runs the new version), so the control plane goes first.
"""

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.karpenter.iam import managed_policy_arn, node_role_trust_policy
from components.network import DISCOVERY_TAG
from config.cluster import ClusterConfig, EndpointConfig
from facts.eks import (
    CLUSTER_ADMIN_POLICY,
    COREDNS,
    KUBE_PROXY,
    POD_IDENTITY_AGENT,
    VPC_CNI,
    cluster_access_policy_arn,
    control_plane_log_group,
    node_group_release_parameter,
)
from facts.partitions import Partition

SYSTEM_NODE_LABEL = "gpu-eks.io/node-group"
SYSTEM_NODE_SELECTOR = {SYSTEM_NODE_LABEL: "system"}
"""Node selector that places a pod on the system node group (Karpenter, operator controllers)."""

NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly")
"""Managed policies of the system node group's role."""

API_PORT = 443


@dataclass(frozen=True)
class ClusterAddon:
    """An EKS add-on the cluster component manages."""

    name: str
    """EKS add-on name."""
    config_field: str
    """Field of `AddonsConfig` that may pin its version."""
    after_nodes: bool
    """Deployments only become ACTIVE once nodes can run them; DaemonSets are ACTIVE with no node."""
    preserve: bool = False
    """Leave the software in the cluster when the add-on resource is deleted (pod networking and service
    routing must survive taking the add-on out of the stack)."""
    configuration: tuple[tuple[str, str], ...] = ()
    """The add-on's configuration values (EKS `configurationValues`, JSON), key by key."""


VPC_CNI_CONFIGURATION = (("enableNetworkPolicy", "true"),)
"""vpc-cni enforces NetworkPolicies (its network policy agent in the aws-node pods, with the controller EKS
runs in the control plane); without it the stack's NetworkPolicies (the GPU node guard's, the smoke test's)
are accepted and ignored. A string, as the add-on's configuration schema has it (EKS user guide, "Restrict Pod
network traffic with Kubernetes network policies"). Pods no policy selects keep all their traffic."""


ADDONS = (
    ClusterAddon(VPC_CNI, "vpc_cni", after_nodes=False, preserve=True, configuration=VPC_CNI_CONFIGURATION),
    ClusterAddon(KUBE_PROXY, "kube_proxy", after_nodes=False, preserve=True),
    ClusterAddon(POD_IDENTITY_AGENT, "pod_identity_agent", after_nodes=False),
    ClusterAddon(COREDNS, "coredns", after_nodes=True),
)
"""The add-ons of the cluster component, in creation order (the EBS CSI driver belongs to BlockStorage).

pulumi-eks 4.4.0 would manage vpc-cni and kube-proxy itself, resolving the newest build on every `up`
(`mostRecent: true` in nodejs/eks/cluster/cluster.ts and addons/cni-addon.ts, pulumi/pulumi-eks
@ccf53f17); it is told to leave them alone (`useDefaultVpcCni`, `kubeProxyAddonOptions.enabled: false`) and
they are declared here like the others, so they are pinned and the declared graph orders them."""

PULUMI_EKS_ADDON_PARENTS = {
    VPC_CNI: "eks:index:VpcCniAddon",
    KUBE_PROXY: None,
}
"""Where pulumi-eks 4.4.0 declared the add-ons taken over here, under its `eks:index:Cluster` component:
the vpc-cni `aws:eks/addon:Addon` inside an `eks:index:VpcCniAddon` component, kube-proxy directly
(both named `<cluster resource>-<add-on>`; nodejs/eks/cluster/cluster.ts @ccf53f17). Aliases to those URNs
turn the takeover into an update of the existing add-ons in stacks deployed before it."""


@dataclass(frozen=True)
class ApiAccessRule:
    """One tcp/443 ingress rule on the cluster security group, letting a network reach the private API."""

    name: str
    """Logical-name suffix, derived from the source alone: adding a source never renames the others."""
    description: str
    cidr_ipv4: str | None = None
    referenced_security_group_id: str | None = None


def api_access_rules(endpoint: EndpointConfig) -> list[ApiAccessRule]:
    """One rule per `privateAccessCidrs` and `privateAccessSecurityGroupIds` entry."""
    rules = []
    for cidr in endpoint.private_access_cidrs:  # IPv4 only: the cluster's API has IPv4 addresses only
        rules.append(
            ApiAccessRule(
                name=f"api-from-{cidr.replace('/', '-')}",
                description=f"Kubernetes API from {cidr} (cluster.endpoint.privateAccessCidrs)",
                cidr_ipv4=cidr,
            )
        )
    for group in endpoint.private_access_security_group_ids:
        rules.append(
            ApiAccessRule(
                name=f"api-from-{group}",
                description=f"Kubernetes API from {group} (cluster.endpoint.privateAccessSecurityGroupIds)",
                referenced_security_group_id=group,
            )
        )
    return rules


@dataclass(frozen=True)
class AccessGrant:
    """An IAM role given an access policy on the whole cluster."""

    name: str
    """Logical-name suffix of its access entry and policy association, derived from the principal alone."""
    principal_arn: str
    policy: str
    previous_name: str | None = None
    """The suffix earlier versions used (by list position); an alias moves that state to `name`."""
    was_team_role: bool = False
    """The role may have been a team's before (`adminRoleArns` and teams are both lists of people): its
    entry aliases the one the Teams component had for it (`team_entry_alias`)."""


def access_grants(config: ClusterConfig) -> list[AccessGrant]:
    """Admins and the CI roles. Both CI roles need cluster admin: `pulumi preview` diffs Kubernetes objects
    by server-side dry-run, which is authorized like the write itself, on cluster-scoped kinds too."""
    grants = [
        # Named after the principal, not its position: adding or removing an admin elsewhere in the list
        # never replaces this entry (a create-first replacement would collide with the old entry of the
        # same principal).
        AccessGrant(
            admin_grant_name(arn),
            arn,
            CLUSTER_ADMIN_POLICY,
            previous_name=f"admin-{index}",
            was_team_role=True,
        )
        for index, arn in enumerate(config.admin_role_arns)
    ]
    for purpose, arn in (
        ("preview", config.automation.preview_role_arn),
        ("deploy", config.automation.deploy_role_arn),
    ):
        if arn is not None:
            grants.append(AccessGrant(f"automation-{purpose}", arn, CLUSTER_ADMIN_POLICY))
    return grants


def principal_label(arn: str) -> str:
    """`<account>-<name>` of an IAM principal ARN: a name for its access entry that stays the same when
    principals are added to or removed from the list around it (role names are unique per account)."""
    return f"{arn.split(':')[4]}-{arn.rsplit('/', 1)[-1]}"


TEAMS_COMPONENT = ("gpu-eks:teams:Teams", "teams")
"""Type and name of the component holding the teams' access entries (`components.teams`)."""


def team_entry_name(arn: str) -> str:
    """The resource name of a team role's access entry (one per role, whatever its teams)."""
    return f"{TEAMS_COMPONENT[1]}-{principal_label(arn)}"


def admin_grant_name(arn: str) -> str:
    """The name suffix of an admin role's access entry and policy association."""
    return f"admin-{principal_label(arn)}"


def team_entry_alias(arn: str) -> pulumi.Alias:
    """Where a role's access entry was while the role belonged to a team. EKS allows one access entry per
    principal, and the engine creates a new resource before it deletes the old one, so a role moving between
    `adminRoleArns` and a team keeps its one entry (aliases make it the same resource), and only its policy
    associations are created and deleted."""
    kind, name = TEAMS_COMPONENT
    teams = f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{kind}::{name}"
    return pulumi.Alias(name=team_entry_name(arn), parent=teams)


def kubeconfig_endpoint(kubeconfig: dict[str, Any]) -> str:
    """The API server URL of the (single) cluster in a kubeconfig."""
    return str(kubeconfig["clusters"][0]["cluster"]["server"])


def kubeconfig_certificate_authority(kubeconfig: dict[str, Any]) -> str:
    """The base64 CA bundle of the (single) cluster in a kubeconfig."""
    return str(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])


def kubeconfig_with_profile(kubeconfig: dict[str, Any], profile: str) -> dict[str, Any]:
    """`kubeconfig` whose `aws eks get-token` runs with `--profile <profile>`.

    pulumi-eks 4.4.0 adds the profile only to the kubeconfig of its own internal provider; the `kubeconfig`
    and `kubeconfigJson` outputs are generated without it (`genKubeconfig(false)` in
    nodejs/eks/cluster/cluster.ts @ccf53f17), so without this a `pulumi up` under `aws:profile` would
    authenticate to the cluster with the default credentials. An argument rather than `AWS_PROFILE`, as
    pulumi-eks does it, because ambient credentials override that variable.
    """
    result = copy.deepcopy(kubeconfig)
    for user in result["users"]:
        command = user["user"]["exec"]
        args = [str(a) for a in command["args"]]
        if "--profile" not in args:
            command["args"] = [*args, "--profile", profile]
    return result


def default_addon_version(addon: str, kubernetes_version: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    """The build EKS marks as default for `addon` on `kubernetes_version` (not the newest: that moves on
    every release and would roll the add-on out unreviewed)."""
    return aws.eks.get_addon_version_output(
        addon_name=addon,
        kubernetes_version=kubernetes_version,
        most_recent=False,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    ).version


def eks_addon(
    resource_name: str,
    *,
    cluster_name: pulumi.Input[str],
    addon: str,
    version: pulumi.Input[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
    **extra: Any,
) -> aws.eks.Addon:
    """An EKS add-on at `version`, taking over whatever EKS bootstrapped instead of failing on conflict."""
    return aws.eks.Addon(
        resource_name,
        cluster_name=cluster_name,
        addon_name=addon,
        addon_version=version,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        tags=tags,
        opts=opts,
        **extra,
    )


def pulumi_eks_child_urn(cluster_urn: str, child_type: str, child_name: str) -> str:
    """The URN of a resource pulumi-eks declares right under its `eks:index:Cluster` (`cluster_urn`)."""
    head, _, _ = cluster_urn.rpartition("::")
    return f"{head}${child_type}::{child_name}"


def adopted_log_group(name: str, existing: Sequence[str]) -> str | None:
    """The import id of the control-plane log group when it exists already, else None (create it).

    EKS writes the last control-plane logs while a cluster is deleted and recreates the group to do so
    (terraform-aws-modules/terraform-aws-eks issues #920, #2486, #2763), so after `pulumi destroy` the group
    is back, and creating it again would fail with ResourceAlreadyExistsException. With the import option
    the engine adopts it and then sets this stack's retention and tags; while the group is in the stack's
    state under that id, the option changes nothing (pulumi/pulumi `developer-docs/architecture/import.md`).
    """
    return name if name in existing else None


class Cluster(pulumi.ComponentResource):
    """An EKS cluster in API authentication mode with an on-demand system node group."""

    name: pulumi.Output[str]
    """The cluster name; resolves only once the control plane exists, so it carries that dependency."""
    kubernetes_version: str
    endpoint: pulumi.Output[str]
    certificate_authority: pulumi.Output[str]
    kubeconfig: pulumi.Output[Any]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    """The OIDC issuer without `https://`, as IAM condition keys (`<issuer>:sub`) spell it."""
    security_group_id: pulumi.Output[str]
    provider: k8s.Provider
    system_node_group: aws.eks.NodeGroup
    addons: dict[str, aws.eks.Addon]
    pod_identity_agent: aws.eks.Addon
    controller_dependencies: list[pulumi.Resource]
    """What a controller on the system nodes needs while it runs and drains: DNS, pod networking, service
    routing, Pod Identity and the security group's discovery tag. Karpenter's release depends on them, so
    they outlive it on `pulumi destroy` while it terminates its instances."""

    def __init__(
        self,
        name: str,
        *,
        config: ClusterConfig,
        partition: Partition,
        vpc_id: pulumi.Input[str],
        control_plane_subnet_ids: pulumi.Input[list[str]],
        node_subnet_ids: pulumi.Input[list[str]],
        public_subnet_ids: pulumi.Input[list[str]],
        tags: dict[str, str],
        profile: str | None = None,
        private_egress: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`control_plane_subnet_ids` may resolve before the subnets route to the internet (the control
        plane needs no egress); `node_subnet_ids` must not. `profile` is the stack's `aws:profile`.
        `private_egress`: what a deployer inside the VPC reaches AWS and Pulumi Cloud through (NAT routes,
        VPC endpoints); every Kubernetes object depends on it."""
        super().__init__("gpu-eks:cluster:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        protected = pulumi.ResourceOptions(parent=self, protect=config.protect)
        self.kubernetes_version = config.kubernetes_version

        # EKS would create this group itself on first use, with no retention; ours exists first.
        log_group = None
        if config.log_types:
            group_name = control_plane_log_group(config.name)
            existing = aws.cloudwatch.get_log_groups(log_group_name_prefix=group_name).log_group_names
            log_group = aws.cloudwatch.LogGroup(
                f"{name}-control-plane-logs",
                name=group_name,
                retention_in_days=config.log_retention_days,
                tags=tags,
                opts=pulumi.ResourceOptions.merge(
                    protected, pulumi.ResourceOptions(import_=adopted_log_group(group_name, existing))
                ),
            )
        cluster = eks.Cluster(
            name,
            name=config.name,
            version=config.kubernetes_version,
            vpc_id=vpc_id,
            private_subnet_ids=control_plane_subnet_ids,
            public_subnet_ids=public_subnet_ids,
            # Access entries only: no aws-auth ConfigMap to drift or lock people out.
            authentication_mode=eks.AuthenticationMode.API,
            skip_default_node_group=True,
            # Use the security group EKS creates; Karpenter's nodes join it through the discovery tag.
            skip_default_security_groups=True,
            create_oidc_provider=True,
            endpoint_public_access=config.endpoint.public_access,
            endpoint_private_access=config.endpoint.private_access,
            public_access_cidrs=list(config.endpoint.public_access_cidrs)
            if config.endpoint.public_access
            else None,
            enabled_cluster_log_types=list(config.log_types),
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=config.upgrade_policy),
            # Every add-on is declared below, pinned; pulumi-eks would manage vpc-cni and kube-proxy (newest
            # build on every up). It adds CoreDNS only with its default node group (none here), so turning
            # that off only states the intent.
            use_default_vpc_cni=True,
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=False),
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            provider_credential_opts=eks.KubeconfigOptionsArgs(profile_name=profile) if profile else None,
            deletion_protection=config.protect,
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self, protect=config.protect, depends_on=[log_group] if log_group else None
            ),
        )
        self.security_group_id = cluster.cluster_security_group_id
        self.name = self.security_group_id.apply(lambda _: config.name)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer

        # --- Who reaches the API: the private endpoint admits only the cluster security group itself. ---
        api_access: list[pulumi.Resource] = [
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-{rule.name}",
                security_group_id=self.security_group_id,
                ip_protocol="tcp",
                from_port=API_PORT,
                to_port=API_PORT,
                cidr_ipv4=rule.cidr_ipv4,
                referenced_security_group_id=rule.referenced_security_group_id,
                description=rule.description,
                tags=tags,
                opts=child,
            )
            for rule in api_access_rules(config.endpoint)
        ]
        for grant in access_grants(config):
            previous = [pulumi.Alias(name=f"{name}-{grant.previous_name}")] if grant.previous_name else []
            grant_opts = pulumi.ResourceOptions(parent=self, aliases=previous)
            moved = [team_entry_alias(grant.principal_arn)] if grant.was_team_role else []
            entry = aws.eks.AccessEntry(
                f"{name}-{grant.name}",
                cluster_name=self.name,
                principal_arn=grant.principal_arn,
                type="STANDARD",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, aliases=[*previous, *moved]),
            )
            association = aws.eks.AccessPolicyAssociation(
                f"{name}-{grant.name}",
                cluster_name=self.name,
                principal_arn=entry.principal_arn,
                policy_arn=cluster_access_policy_arn(partition, grant.policy),
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=grant_opts,
            )
            api_access += [entry, association]

        discovery = aws.ec2.Tag(
            f"{name}-sg-discovery",
            resource_id=self.security_group_id,
            key=DISCOVERY_TAG,
            value=config.name,
            opts=child,
        )

        # --- Add-ons that run before any node, then the system nodes, then the add-ons they host. ---
        self.addons = {}
        for addon in ADDONS:
            if not addon.after_nodes:
                self.addons[addon.name] = self._addon(
                    name, addon, config=config, cluster=cluster, tags=tags, opts=child
                )
        self.pod_identity_agent = self.addons[POD_IDENTITY_AGENT]

        node_role = aws.iam.Role(
            f"{name}-system-nodes",
            assume_role_policy=pulumi.Output.json_dumps(node_role_trust_policy(partition)),
            tags=tags,
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-system-nodes-{policy}",
                role=node_role.name,
                policy_arn=managed_policy_arn(partition, policy),
                opts=child,
            )
            for policy in NODE_POLICIES
        ]
        nodes = config.system_nodes
        self.system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.name,
            # Follows the control plane: EKS refuses the next minor upgrade while a node group lags.
            version=config.kubernetes_version,
            # The AMI release EKS recommends for that minor, so a new one (security fixes between minors)
            # is a reviewed `releaseVersion` line of the preview, rolled out as an update of the group.
            release_version=aws.ssm.get_parameter_output(
                name=node_group_release_parameter(nodes.ami_type, config.kubernetes_version),
                opts=pulumi.InvokeOutputOptions(parent=self),
            ).insecure_value,
            node_role_arn=node_role.arn,
            subnet_ids=node_subnet_ids,
            instance_types=list(nodes.instance_types),
            capacity_type="ON_DEMAND",
            ami_type=nodes.ami_type,
            disk_size=nodes.disk_size_gib,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=nodes.min_size, desired_size=nodes.desired_size, max_size=nodes.max_size
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            labels=SYSTEM_NODE_SELECTOR,
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                # Nodes need their policies to join; the desired size is changed by people and autoscalers.
                depends_on=attachments,
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=[self.system_node_group])
        for addon in ADDONS:
            if addon.after_nodes:
                self.addons[addon.name] = self._addon(
                    name, addon, config=config, cluster=cluster, tags=tags, opts=after_nodes
                )
        self.controller_dependencies = [*self.addons.values(), discovery]

        # --- The Kubernetes provider, reaching the API only once the way in exists. ---
        kubeconfig = (
            cluster.kubeconfig.apply(lambda value: kubeconfig_with_profile(value, profile))
            if profile
            else cluster.kubeconfig
        )
        # The exported one runs `aws eks get-token` with its reader's credentials, as pulumi-eks's own output
        # does: another team's stack or CI has no profile of the platform team's name.
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        self.endpoint = pulumi.Output.unsecret(cluster.kubeconfig.apply(kubeconfig_endpoint))
        self.certificate_authority = pulumi.Output.unsecret(
            cluster.kubeconfig.apply(kubeconfig_certificate_authority)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.json_dumps(kubeconfig) if profile else cluster.kubeconfig_json,
            enable_server_side_apply=True,
            # Every Kubernetes resource uses this provider, so on `pulumi destroy` all of them go before the
            # ingress rules and access entries the deployer reaches the API through, and before the routes and
            # endpoints an in-VPC deployer reaches AWS and Pulumi Cloud through.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*api_access, *private_egress]),
        )
        self.register_outputs(
            {
                "name": self.name,
                "endpoint": self.endpoint,
                "oidcProviderArn": self.oidc_provider_arn,
                "oidcIssuer": self.oidc_issuer,
                "securityGroupId": self.security_group_id,
            }
        )

    def admin_entry_alias(self, arn: str) -> pulumi.Alias:
        """Where a role's access entry was while the role was in `adminRoleArns` (see `team_entry_alias`
        for the way back)."""
        return pulumi.Alias(name=f"{self.pulumi_resource_name}-{admin_grant_name(arn)}", parent=self)

    def _addon(
        self,
        name: str,
        addon: ClusterAddon,
        *,
        config: ClusterConfig,
        cluster: eks.Cluster,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions,
    ) -> aws.eks.Addon:
        resource_name = f"{name}-{addon.name}"
        aliases: Sequence[pulumi.Input[pulumi.Alias]] = ()
        if addon.name in PULUMI_EKS_ADDON_PARENTS:
            component = PULUMI_EKS_ADDON_PARENTS[addon.name]
            parent: pulumi.Input[str] = (
                cluster.urn.apply(lambda urn: pulumi_eks_child_urn(urn, component, resource_name))
                if component
                else cluster.urn
            )
            aliases = [pulumi.Alias(parent=parent)]
        return eks_addon(
            resource_name,
            cluster_name=self.name,
            addon=addon.name,
            version=config.addons.pinned(addon.config_field)
            or default_addon_version(addon.name, config.kubernetes_version, self),
            tags=tags,
            preserve=addon.preserve or None,
            configuration_values=json.dumps(dict(addon.configuration)) if addon.configuration else None,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=list(aliases))),
        )
