"""gpu-eks: one stack per environment. Validate config first, then declare the components, then export."""

import pulumi
import pulumi_aws as aws

from components.cluster import Cluster
from components.karpenter.component import Karpenter
from components.network import Network
from config import load_stack_config

config = load_stack_config()  # Fails with every config mistake before any resource is registered.
tags = {"gpu-eks/stack": pulumi.get_stack(), "gpu-eks/cluster": config.cluster.name, **config.cluster.tags}

zones = (
    []
    if config.network.existing
    else aws.get_availability_zones(
        state="available",
        # Local and Wavelength zones are opt-in and lack most instance types.
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
    ).names
)
network = Network(
    "network",
    config=config.network,
    cluster_name=config.cluster.name,
    availability_zones=sorted(zones),
    tags=tags,
)
cluster = Cluster(
    "cluster",
    config=config.cluster,
    partition=config.partition,
    vpc_id=network.vpc_id,
    private_subnet_ids=network.private_subnet_ids,
    public_subnet_ids=network.public_subnet_ids,
    tags=tags,
)
karpenter = Karpenter(
    "karpenter",
    config=config.karpenter,
    cluster=cluster,
    cluster_name=config.cluster.name,
    region=config.region,
    partition=config.partition,
    tags=tags,
)

pulumi.export("region", config.region)
pulumi.export("clusterName", cluster.name)
pulumi.export("clusterEndpoint", cluster.endpoint)
pulumi.export("clusterCertificateAuthority", cluster.certificate_authority)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
pulumi.export("oidcProviderUrl", cluster.oidc_provider_url)
pulumi.export("vpcId", network.vpc_id)
pulumi.export("privateSubnetIds", network.private_subnet_ids)
pulumi.export("karpenterNodeRoleName", karpenter.node_role_name)
pulumi.export("karpenterNodeRoleArn", karpenter.node_role_arn)
pulumi.export("karpenterControllerRoleArn", karpenter.controller_role_arn)
pulumi.export("karpenterInterruptionQueueName", karpenter.interruption_queue_name)
pulumi.export("karpenterNamespace", karpenter.namespace)
