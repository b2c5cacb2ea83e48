"""Cluster: the EKS control plane (pulumi-eks), the system node group, add-ons, admin access entries and
the Kubernetes provider every Kubernetes resource of the program uses."""

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.karpenter.iam import managed_policy_arn, node_role_trust_policy
from components.network import DISCOVERY_TAG
from config.cluster import ClusterConfig
from facts.partitions import Partition

SYSTEM_NODE_LABEL = "gpu-eks.io/node-group"
SYSTEM_NODE_SELECTOR = {SYSTEM_NODE_LABEL: "system"}
"""Node selector that places a pod on the system node group (Karpenter, operator controllers)."""

NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly")
"""Managed policies of the system node group's role."""

ADMIN_ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"

ADDONS_BEFORE_NODES = ("eks-pod-identity-agent",)
"""DaemonSet add-ons that can be ACTIVE before any node exists (vpc-cni and kube-proxy are managed by
pulumi-eks itself)."""
ADDONS_AFTER_NODES = ("coredns",)
"""Deployment add-ons that only become ACTIVE once nodes can run them."""


def principal_label(arn: str) -> str:
    """`<account>-<name>` of an IAM principal ARN: a name for its access entry that stays the same when
    principals are added to or removed from the list around it (role names are unique per account)."""
    return f"{arn.split(':')[4]}-{arn.rsplit('/', 1)[-1]}"


def kubeconfig_endpoint(kubeconfig: dict[str, Any]) -> str:
    """The API server URL of the (single) cluster in a kubeconfig."""
    return str(kubeconfig["clusters"][0]["cluster"]["server"])


def kubeconfig_certificate_authority(kubeconfig: dict[str, Any]) -> str:
    """The base64 CA bundle of the (single) cluster in a kubeconfig."""
    return str(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])


class Cluster(pulumi.ComponentResource):
    """An EKS cluster in API authentication mode with an on-demand system node group."""

    name: pulumi.Output[str]
    """The cluster name; resolves only once the control plane exists, so it carries that dependency."""
    endpoint: pulumi.Output[str]
    certificate_authority: pulumi.Output[str]
    kubeconfig: pulumi.Output[Any]
    oidc_provider_arn: pulumi.Output[str]
    oidc_provider_url: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    provider: k8s.Provider
    system_node_group: aws.eks.NodeGroup
    pod_identity_agent: aws.eks.Addon

    def __init__(
        self,
        name: str,
        *,
        config: ClusterConfig,
        partition: Partition,
        vpc_id: pulumi.Input[str],
        private_subnet_ids: pulumi.Input[list[str]],
        public_subnet_ids: pulumi.Input[list[str]],
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-eks:cluster:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        protected = pulumi.ResourceOptions(parent=self, protect=config.protect)

        cluster = eks.Cluster(
            name,
            name=config.name,
            version=config.kubernetes_version,
            vpc_id=vpc_id,
            private_subnet_ids=private_subnet_ids,
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
            # pulumi-eks would keep CoreDNS self-managed without a default node group; we manage the
            # add-on ourselves, after the system nodes exist.
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            deletion_protection=config.protect,
            tags=tags,
            opts=protected,
        )
        self.security_group_id = cluster.cluster_security_group_id
        self.name = self.security_group_id.apply(lambda _: config.name)
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        self.endpoint = pulumi.Output.unsecret(cluster.kubeconfig.apply(kubeconfig_endpoint))
        self.certificate_authority = pulumi.Output.unsecret(
            cluster.kubeconfig.apply(kubeconfig_certificate_authority)
        )
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_provider_url = cluster.oidc_provider_url

        aws.ec2.Tag(
            f"{name}-sg-discovery",
            resource_id=self.security_group_id,
            key=DISCOVERY_TAG,
            value=config.name,
            opts=child,
        )

        addons = {addon: self._addon(name, addon, child, tags) for addon in ADDONS_BEFORE_NODES}
        self.pod_identity_agent = addons["eks-pod-identity-agent"]

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
            node_role_arn=node_role.arn,
            subnet_ids=private_subnet_ids,
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
        for addon in ADDONS_AFTER_NODES:
            self._addon(name, addon, after_nodes, tags)

        for index, role_arn in enumerate(config.admin_role_arns):
            # Named after the principal, not its position: adding or removing an admin elsewhere in the
            # list never replaces this entry (a create-first replacement would collide with the old entry
            # of the same principal). The alias moves the state of the position-named entries earlier
            # versions created.
            admin = pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=f"{name}-admin-{index}")])
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{principal_label(role_arn)}",
                cluster_name=self.name,
                principal_arn=role_arn,
                type="STANDARD",
                tags=tags,
                opts=admin,
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{principal_label(role_arn)}",
                cluster_name=self.name,
                principal_arn=entry.principal_arn,
                policy_arn=f"arn:{partition}:eks::aws:cluster-access-policy/{ADMIN_ACCESS_POLICY}",
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=admin,
            )

        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=cluster.kubeconfig_json,
            enable_server_side_apply=True,
            opts=child,
        )
        self.register_outputs(
            {
                "name": self.name,
                "endpoint": self.endpoint,
                "oidcProviderArn": self.oidc_provider_arn,
                "securityGroupId": self.security_group_id,
            }
        )

    def _addon(
        self, name: str, addon: str, opts: pulumi.ResourceOptions, tags: dict[str, str]
    ) -> aws.eks.Addon:
        return aws.eks.Addon(
            f"{name}-{addon}",
            cluster_name=self.name,
            addon_name=addon,
            # Take over whatever EKS bootstrapped (self-managed CoreDNS) instead of failing on conflict.
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=opts,
        )
