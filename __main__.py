"""gpu-eks: one stack per environment. Validate config first, then declare the components, then export."""

import pulumi
import pulumi_aws as aws

import contract
from components.budget import CostBudget
from components.cluster import Cluster
from components.efa_device_plugin import EfaDevicePlugin
from components.gpu_node_guard import GpuNodeGuard
from components.gpu_node_guard.manifests import METRICS_JOB as GUARD_METRICS_JOB
from components.gpu_operator import GpuOperator
from components.karpenter.chart_values import CONTROLLER_CHART_NAME
from components.karpenter.component import Karpenter
from components.network import Network, vpc_zones
from components.node_overlays import NodeOverlays
from components.node_pools import NodePools, pool_contract
from components.observability.component import Observability, stack_targets
from components.smoke_test import SmokeTest
from components.storage import BlockStorage
from components.teams import Teams, team_contract
from config.errors import ConfigError
from config.stack import load_stack_config, zone_problems

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
spanned = vpc_zones(zones, config.network.availability_zones)
# A pool pinned to a zone the new VPC will not span is refused like any config mistake, before any resource.
misplaced = zone_problems(config, spanned)
if misplaced:
    raise ConfigError(misplaced)
network = Network(
    "network",
    config=config.network,
    cluster_name=config.cluster.name,
    availability_zones=spanned,
    tags=tags,
)
cluster = Cluster(
    "cluster",
    config=config.cluster,
    partition=config.partition,
    vpc_id=network.vpc_id,
    control_plane_subnet_ids=network.control_plane_subnet_ids,
    node_subnet_ids=network.private_subnet_ids,
    public_subnet_ids=network.public_subnet_ids,
    tags=tags,
    profile=config.profile,
    private_egress=network.private_egress,
)
storage = BlockStorage(
    "storage",
    cluster=cluster,
    version=config.cluster.addons.ebs_csi_driver.version,
    partition=config.partition,
    tags=tags,
)
# Before Karpenter, the GPU Operator and the GPU node guard: their ServiceMonitors need the Prometheus
# Operator CRDs first.
observability = (
    Observability(
        "observability",
        config=config.observability,
        cluster=cluster,
        cluster_name=config.cluster.name,
        region=config.region,
        # The ServiceMonitor's job is the controller Service's name, the release name (the chart's fullname).
        targets=stack_targets(
            config, gpu_node_guard_job=GUARD_METRICS_JOB, karpenter_job=CONTROLLER_CHART_NAME
        ),
        protect=config.cluster.protect,
        tags=tags,
        storage_class=storage.storage_class,
    )
    if config.observability.enabled
    else None
)
monitoring_crds = observability.crd_release if observability else None
karpenter = Karpenter(
    "karpenter",
    config=config.karpenter,
    cluster=cluster,
    cluster_name=config.cluster.name,
    region=config.region,
    partition=config.partition,
    tags=tags,
    subnet_discovery=network.discovery,
    monitoring_crds=monitoring_crds,
)
gpu_operator = GpuOperator(
    "gpu-operator",
    config=config.gpu_operator,
    pools=[pool.gpu_profile() for pool in config.gpu_pools],
    kubernetes_version=config.cluster.kubernetes_version,
    cluster=cluster,
    monitoring_crds=monitoring_crds,
)
if config.efa_pools:
    # Advertises vpc.amazonaws.com/efa on the EFA pools' nodes; without it EFA pods stay Pending.
    EfaDevicePlugin(
        "efa-device-plugin", config=config.efa_device_plugin, pools=config.efa_pools, cluster=cluster
    )
if config.gpu_pools:
    # Lifts the MIG pools' startup taint once the GPUs are partitioned; deletes GPU nodes that never
    # initialize.
    GpuNodeGuard(
        "gpu-node-guard",
        config=config.gpu_node_guard,
        pools=config.gpu_pools,
        provider=cluster.provider,
        karpenter_namespace=config.karpenter.namespace,
        # The NodeClaim API, and Karpenter's namespace (its Role there reads Karpenter's leader Lease).
        depends_on=[karpenter.crd_release, karpenter.controller_release],
        monitoring_crds=monitoring_crds,
    )
# After the CRDs and the controller (which waits for the node role's access entry): created last, and on
# `pulumi destroy` deleted first, while Karpenter can still terminate the instances it launched.
node_pools = NodePools(
    "node-pools",
    pools=config.node_pools,
    cluster_name=config.cluster.name,
    tags=tags,
    gpu_operator=config.gpu_operator,
    provider=cluster.provider,
    karpenter=[karpenter.crd_release, karpenter.controller_release],
)
if config.node_overlays:
    # How many GPU slices the sharing pools' nodes offer, for Karpenter's simulation; like the pools, deleted
    # on `pulumi destroy` while the controller still runs.
    NodeOverlays(
        "node-overlays",
        overlays=config.node_overlays,
        provider=cluster.provider,
        karpenter=[karpenter.crd_release, karpenter.controller_release],
    )
teams = (
    Teams(teams=config.teams, cluster=cluster, partition=config.partition, tags=tags)
    if config.teams
    else None
)
if config.cost.monthly_budget_usd is not None:
    CostBudget(
        "cost-budget",
        config=config.cost,
        stack=pulumi.get_stack(),
        cluster_name=config.cluster.name,
        tags=tags,
    )
if config.smoke_test.enabled and config.smoke_test.node_pool:
    SmokeTest(
        "smoke-test",
        config=config.smoke_test,
        pool=next(p for p in config.node_pools if p.name == config.smoke_test.node_pool),
        gpu_operator=config.gpu_operator,
        kubernetes_version=config.cluster.kubernetes_version,
        cluster_name=config.cluster.name,
        provider=cluster.provider,
        depends_on=[node_pools.node_pools[config.smoke_test.node_pool], gpu_operator.release],
    )

contract.export(
    {
        "region": config.region,
        "clusterName": cluster.name,
        "clusterEndpoint": cluster.endpoint,
        "clusterCertificateAuthority": cluster.certificate_authority,
        "kubeconfig": cluster.kubeconfig,
        "oidcProviderArn": cluster.oidc_provider_arn,
        "oidcProviderUrl": cluster.oidc_issuer,
        "vpcId": network.vpc_id,
        "privateSubnetIds": network.private_subnet_ids,
        "karpenterNodeRoleName": karpenter.node_role_name,
        "karpenterNodeRoleArn": karpenter.node_role_arn,
        "karpenterControllerRoleArn": karpenter.controller_role_arn,
        "karpenterInterruptionQueueName": karpenter.interruption_queue_name,
        "karpenterNamespace": karpenter.namespace,
        "gpuPools": [
            pool_contract(p, gpu_operator=config.gpu_operator).model_dump(mode="json", by_alias=True)
            for p in config.node_pools
        ],
        "gpuToleration": contract.GPU_TOLERATION.model_dump(mode="json", by_alias=True, exclude_none=True),
        "gpuOperatorNamespace": gpu_operator.namespace,
        "monitoring": observability.contract() if observability else None,
        "teams": [team_contract(t, teams.namespaces[t.name]) for t in config.teams] if teams else [],
    }
)
