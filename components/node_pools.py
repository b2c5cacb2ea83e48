"""NodePools: per configured pool, one Karpenter `NodePool` and the `EC2NodeClass` it uses, both named
after the pool, and for an EFA pool with `placementGroup` the cluster placement group its class selects.

The translation from pool config to the typed Karpenter v1 objects is pure (`pool_objects`); the component
only registers the objects, after the Karpenter CRDs and controller, so that `pulumi destroy` removes pools
(and with them every instance Karpenter launched) while the controller and its IAM still exist.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import MANAGED_BY
from components.custom_resources import api_version_aliases
from components.gpu_operator_values import pool_node_labels
from components.karpenter.iam import node_role_name
from components.karpenter_api import (
    AMISelectorTerm,
    BlockDevice,
    BlockDeviceMapping,
    Budget,
    CapacityReservationSelectorTerm,
    Disruption,
    EC2NodeClass,
    EC2NodeClassSpec,
    KarpenterModel,
    KubeletConfiguration,
    MetadataOptions,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
    NodeSelectorRequirement,
    ObjectMeta,
    PlacementGroupSelector,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
    Taint,
    to_manifest,
)
from components.network import DISCOVERY_TAG
from components.node_user_data import al2023_user_data
from config.gpu_operator import GpuOperatorConfig
from config.node_pools import CPU_POOL_CATEGORIES, CPU_POOL_MIN_GENERATION, NodePoolConfig
from config.types import duration_seconds
from contract import GpuPool, Toleration
from contract import Taint as ContractTaint
from facts.gpu_operator import DEVICE_PLUGIN_DEPLOY_LABEL, DEVICE_PLUGIN_PAUSED
from facts.replacement import K8S_DEFAULT_DELETE_TIMEOUT_SECONDS
from pools.sharing import gpu_limits, pool_gpu_resource, slices_per_gpu

POOL_TAG = "gpu-eks/pool"
"""AWS tag on every instance, volume and launch template of a pool (with `gpu-eks/stack` and
`gpu-eks/cluster`): activated as a cost-allocation tag, it splits the bill per pool (docs/costs.md).
Karpenter's own `karpenter.sh/nodepool` tag says the same, but Karpenter forbids it in a node class's tags and
names it differently from the rest of the stack's tags."""
POOL_LABEL = "gpu-eks.io/pool"
"""Label on every node with the name of its pool (Karpenter adds `karpenter.sh/nodepool` too)."""
EFA_LABEL = "gpu-eks.io/efa"


@dataclass(frozen=True)
class PoolObjects:
    """The Karpenter objects of one pool."""

    node_class: EC2NodeClass
    node_pool: NodePool


def _requirement(key: str, operator: str, values: Sequence[str] | None = None) -> NodeSelectorRequirement:
    return NodeSelectorRequirement.model_validate(
        {"key": key, "operator": operator, **({"values": list(values)} if values is not None else {})}
    )


def requirements(pool: NodePoolConfig) -> list[NodeSelectorRequirement]:
    """Scheduling requirements of a pool's nodes (Karpenter ANDs them)."""
    result = [
        _requirement("kubernetes.io/arch", "In", [pool.architecture]),
        _requirement("kubernetes.io/os", "In", ["linux"]),
        _requirement("karpenter.sh/capacity-type", "In", list(pool.capacity_types)),
    ]
    if pool.kind == "gpu":
        count = pool.gpu_count
        # Some instance types carry the label with value 0: only Gt selects instances that have GPUs.
        result.append(
            _requirement("karpenter.k8s.aws/instance-gpu-count", "Gt", [str((count.min if count else 1) - 1)])
        )
        if count is not None and count.max is not None:
            result.append(_requirement("karpenter.k8s.aws/instance-gpu-count", "Lt", [str(count.max + 1)]))
        result.append(_requirement("karpenter.k8s.aws/instance-gpu-manufacturer", "In", ["nvidia"]))
        if pool.gpu_names:
            result.append(_requirement("karpenter.k8s.aws/instance-gpu-name", "In", list(pool.gpu_names)))
    elif not pool.instance_families and not pool.instance_types:
        result.append(_requirement("karpenter.k8s.aws/instance-category", "In", list(CPU_POOL_CATEGORIES)))
        result.append(
            _requirement("karpenter.k8s.aws/instance-generation", "Gt", [str(CPU_POOL_MIN_GENERATION - 1)])
        )
    if pool.instance_families:
        result.append(_requirement("karpenter.k8s.aws/instance-family", "In", list(pool.instance_families)))
    if pool.zone is not None:
        # One zone of the VPC the stack creates, which has one private subnet there: one subnet for EFA.
        result.append(_requirement("topology.kubernetes.io/zone", "In", [pool.zone]))
    if pool.efa:
        # Karpenter has no EFA label: list the EFA-capable types the pool's other requirements allow.
        result.append(
            _requirement(
                "node.kubernetes.io/instance-type", "In", sorted(it.name for it in pool.candidates())
            )
        )
    elif pool.instance_types:
        result.append(_requirement("node.kubernetes.io/instance-type", "In", list(pool.instance_types)))
    return result


def node_labels(pool: NodePoolConfig) -> dict[str, str]:
    """Labels on every node of the pool: its name, the GPU Operator's per-pool labels, EFA, user labels."""
    labels = {POOL_LABEL: pool.name}
    if pool.kind == "gpu":
        labels |= pool_node_labels(pool.gpu_profile())
    if pool.efa:
        labels[EFA_LABEL] = "true"
    return labels | pool.labels


def startup_labels(pool: NodePoolConfig) -> dict[str, str]:
    """Labels a pool's nodes start with but do not keep (so not in the contract's `labels`): a MIG pool's
    nodes start with the device plugin paused, so that it does not advertise whole GPUs before the MIG
    manager has partitioned them (Karpenter would count them as the node's capacity and launch more nodes).
    The GPU Operator keeps the value if NFD labels the node before its next reconcile; the GPU node guard
    re-sets it otherwise and sets it to `true` once the GPUs are partitioned (`facts.gpu_operator`)."""
    return {DEVICE_PLUGIN_DEPLOY_LABEL: DEVICE_PLUGIN_PAUSED} if pool.mig is not None else {}


def _block_devices(pool: NodePoolConfig) -> list[BlockDeviceMapping]:
    volume = pool.root_volume
    data = BlockDevice(
        volume_size=f"{volume.size_gib}Gi",
        volume_type=volume.type,
        iops=volume.iops,
        throughput=volume.throughput if volume.type == "gp3" else None,
        encrypted=True,
        delete_on_termination=True,
    )
    if pool.ami_family == "bottlerocket":
        # Bottlerocket keeps the OS on a small xvda and images and pods on xvdb: size xvdb.
        os_volume = BlockDevice(
            volume_size="4Gi", volume_type="gp3", encrypted=True, delete_on_termination=True
        )
        return [
            BlockDeviceMapping(device_name="/dev/xvda", ebs=os_volume),
            BlockDeviceMapping(device_name="/dev/xvdb", ebs=data),
        ]
    return [BlockDeviceMapping(device_name="/dev/xvda", root_volume=True, ebs=data)]


def placement_group_name(cluster_name: str, pool_name: str) -> str:
    """The cluster placement group of a pool with `placementGroup` (EC2 names are unique per account and
    region, so the cluster's name comes first)."""
    return f"{cluster_name}-{pool_name}"


def node_class(pool: NodePoolConfig, *, cluster_name: str, tags: dict[str, str]) -> EC2NodeClass:
    """The EC2NodeClass of a pool, named after the pool (see `pool_objects`)."""
    discovery = {DISCOVERY_TAG: cluster_name}
    subnets = (
        [SubnetSelectorTerm(id=pool.subnet_id)] if pool.subnet_id else [SubnetSelectorTerm(tags=discovery)]
    )
    reservations = [
        CapacityReservationSelectorTerm.model_validate(
            c.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        for c in pool.capacity_reservations
    ]
    kubelet = (
        KubeletConfiguration.model_validate(
            pool.kubelet.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        if pool.kubelet
        else None
    )
    return EC2NodeClass(
        metadata=ObjectMeta(name=pool.name, labels={**MANAGED_BY}),
        spec=EC2NodeClassSpec(
            ami_selector_terms=[AMISelectorTerm(alias=pool.ami)],
            role=node_role_name(cluster_name),
            subnet_selector_terms=subnets,
            security_group_selector_terms=[SecurityGroupSelectorTerm(tags=discovery)],
            # IMDSv2 only, and hop limit 1 so pods cannot reach the node role's credentials.
            metadata_options=MetadataOptions(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
            ),
            block_device_mappings=_block_devices(pool),
            capacity_reservation_selector_terms=reservations or None,
            placement_group_selector=PlacementGroupSelector(
                name=placement_group_name(cluster_name, pool.name)
            )
            if pool.placement_group
            else None,
            kubelet=kubelet,
            # Karpenter puts these on the instances, their volumes and launch templates (GetTags).
            tags={**tags, POOL_TAG: pool.name},
            # Bottlerocket already ignores NVIDIA_VISIBLE_DEVICES from unprivileged pods (facts.bottlerocket).
            user_data=al2023_user_data() if pool.ami_family == "al2023" else None,
        ),
    )


def node_pool(
    pool: NodePoolConfig, *, node_class: EC2NodeClass, gpu_operator: GpuOperatorConfig | None = None
) -> NodePool:
    """The NodePool for a pool; `gpu_operator` says how a GPU-sharing pool's nodes advertise their GPUs
    (its cap is in those units, `pools.sharing.gpu_limits`)."""
    limits: dict[str, int | str] = {
        key: value
        for key, value in (("cpu", pool.limits.cpu), ("memory", pool.limits.memory))
        if value is not None
    }
    limits |= gpu_limits(pool, gpu_operator or GpuOperatorConfig())
    disruption = pool.disruption
    taints = [Taint.of(t.key, t.value, t.effect) for t in pool.effective_taints]
    startup_taints = [Taint.of(t.key, t.value, t.effect) for t in pool.effective_startup_taints]
    return NodePool(
        metadata=ObjectMeta(name=pool.name, labels={**MANAGED_BY}),
        spec=NodePoolSpec(
            weight=pool.weight,
            limits=limits,
            disruption=Disruption(
                consolidation_policy=disruption.consolidation_policy,
                consolidate_after=disruption.consolidate_after,
                budgets=[
                    Budget.model_validate(b.model_dump(mode="json", exclude_none=True))
                    for b in disruption.budgets
                ]
                or None,
            ),
            template=NodeClaimTemplate(
                metadata=NodeClaimTemplateMetadata(labels=node_labels(pool) | startup_labels(pool)),
                spec=NodeClaimTemplateSpec(
                    node_class_ref=node_class.node_class_ref(),
                    requirements=requirements(pool),
                    taints=taints or None,
                    startup_taints=startup_taints or None,
                    expire_after=pool.expire_after,
                    termination_grace_period=pool.termination_grace_period,
                ),
            ),
        ),
    )


def pool_objects(
    pools: Sequence[NodePoolConfig],
    *,
    cluster_name: str,
    tags: dict[str, str],
    gpu_operator: GpuOperatorConfig | None = None,
) -> list[PoolObjects]:
    """The EC2NodeClass and NodePool of every pool, both named after the pool; `gpu_operator` says how a
    GPU-sharing pool's nodes advertise their GPUs (see `node_pool`).

    The class's name is the pool's, never a digest of its settings: changing the AMI, root volume, kubelet
    or reservations updates the class in place, and Karpenter replaces the pool's nodes as drifted within
    the pool's disruption budgets. A name derived from the settings would instead create a new class and
    delete the old one, a deletion Karpenter's finalizer holds until every node of the old class is gone
    (hours, when a budget forbids drift). One class per pool also keeps a bump of one pool's AMI from
    rolling any other pool."""
    objects = []
    for pool in pools:
        pool_class = node_class(pool, cluster_name=cluster_name, tags=tags)
        objects.append(
            PoolObjects(pool_class, node_pool(pool, node_class=pool_class, gpu_operator=gpu_operator))
        )
    return objects


class NodePools(pulumi.ComponentResource):
    """The EC2NodeClass and NodePool custom resources of every configured pool."""

    node_classes: dict[str, k8s.apiextensions.CustomResource]
    """EC2NodeClass resources by pool name (which is also the class's name)."""
    node_pools: dict[str, k8s.apiextensions.CustomResource]
    """NodePool resources by pool name."""
    placement_groups: dict[str, aws.ec2.PlacementGroup]
    """The cluster placement groups of the pools with `placementGroup`, by pool name."""

    def __init__(
        self,
        name: str,
        *,
        pools: Sequence[NodePoolConfig],
        cluster_name: str,
        tags: dict[str, str],
        gpu_operator: GpuOperatorConfig,
        provider: k8s.Provider,
        karpenter: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`gpu_operator`: how GPU-sharing pools advertise their GPUs (their limits count slices).
        `karpenter`: what the objects need first (the CRD release and the controller release, which in
        turn depends on the node role and its access entry). Depending on them makes `pulumi destroy`
        delete pools first, so the controller terminates their instances."""
        super().__init__("gpu-eks:node_pools:NodePools", name, None, opts)
        self.node_classes = {}
        self.node_pools = {}
        self.placement_groups = {}
        for item in pool_objects(pools, cluster_name=cluster_name, tags=tags, gpu_operator=gpu_operator):
            pool_name = item.node_pool.metadata.name
            placement: list[pulumi.Resource] = []
            selector = item.node_class.spec.placement_group_selector
            if selector is not None:
                # The group the class selects, created before it; on `pulumi destroy` deleted after it, once
                # Karpenter has terminated the pool's instances.
                self.placement_groups[pool_name] = aws.ec2.PlacementGroup(
                    f"{name}-placement-{pool_name}",
                    name=selector.name,
                    strategy="cluster",
                    tags=tags,
                    opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
                )
                placement.append(self.placement_groups[pool_name])
            # Logical names follow the pool too, so a settings change is an update of the same resource.
            node_class = karpenter_object(
                f"{name}-class-{pool_name}",
                item.node_class,
                parent=self,
                provider=provider,
                depends_on=[*placement, *karpenter],
            )
            self.node_classes[pool_name] = node_class
            self.node_pools[pool_name] = karpenter_object(
                f"{name}-{pool_name}",
                item.node_pool,
                parent=self,
                provider=provider,
                depends_on=[node_class, *karpenter],
                delete_timeout=node_pool_delete_timeout(item.node_pool),
            )
        self.register_outputs(
            {
                "nodePools": sorted(self.node_pools),
                "nodeClasses": sorted(self.node_classes),
                "placementGroups": sorted(self.placement_groups),
            }
        )


def node_pool_delete_timeout(pool: NodePool) -> str | None:
    """How long `pulumi up` waits for a deleted NodePool to be gone: its `terminationGracePeriod` (the
    longest a drain of its nodes may take; Karpenter drains them all at once) plus pulumi-kubernetes' own
    default wait, for the instances to terminate. None without a grace period: a drain is then unbounded,
    and the default (10 minutes) stands."""
    grace = pool.spec.template.spec.termination_grace_period
    if grace is None:
        return None
    return f"{duration_seconds(grace) + K8S_DEFAULT_DELETE_TIMEOUT_SECONDS}s"


def karpenter_object(
    logical_name: str,
    obj: KarpenterModel,
    *,
    parent: pulumi.Resource,
    provider: k8s.Provider,
    depends_on: list[pulumi.Resource],
    delete_timeout: str | None = None,
) -> k8s.apiextensions.CustomResource:
    """A Karpenter custom resource (NodePool, EC2NodeClass, NodeOverlay) from its typed model."""
    manifest = to_manifest(obj)
    return k8s.apiextensions.CustomResource(
        logical_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=depends_on,
            # Named objects: a replacement must delete the old one before creating the new one.
            delete_before_replace=True,
            custom_timeouts=pulumi.CustomTimeouts(delete=delete_timeout) if delete_timeout else None,
            aliases=api_version_aliases(manifest["apiVersion"], manifest["kind"]),
        ),
    )


def pool_contract(pool: NodePoolConfig, *, gpu_operator: GpuOperatorConfig) -> GpuPool:
    """What consuming stacks learn about a pool (the `gpuPools` output)."""
    return GpuPool(
        name=pool.name,
        kind=pool.kind,
        capacity_types=list(pool.capacity_types),
        taints=[ContractTaint.model_validate(t.model_dump()) for t in pool.effective_taints],
        tolerations=[Toleration.model_validate(t.toleration()) for t in pool.effective_taints],
        node_selector={"karpenter.sh/nodepool": pool.name},
        labels=node_labels(pool),
        gpu_limit=pool.limits.nvidia_gpu,
        gpu_resource=pool_gpu_resource(pool, gpu_operator),
        time_slicing_replicas=pool.time_slicing.replicas if pool.time_slicing else None,
        mig_profile=pool.mig.profile if pool.mig else None,
        slices_per_gpu=slices_per_gpu(pool, gpu_operator),
    )
