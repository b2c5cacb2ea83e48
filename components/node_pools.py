"""NodePools: one Karpenter `EC2NodeClass` per distinct node setup and one `NodePool` per configured pool.

The translation from pool config to the typed Karpenter v1 objects is pure (`plan`); the component only
registers the objects, after the Karpenter CRDs and controller, so that `pulumi destroy` removes pools
(and with them every instance Karpenter launched) while the controller and its IAM still exist.
"""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.gpu_operator_values import gpu_resource, pool_node_labels
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
    KubeletConfiguration,
    MetadataOptions,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
    NodeSelectorRequirement,
    ObjectMeta,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
    Taint,
    to_manifest,
)
from components.network import DISCOVERY_TAG
from config.node_pools import CPU_POOL_CATEGORIES, CPU_POOL_MIN_GENERATION, NodePoolConfig
from contract import GpuPool, Toleration
from contract import Taint as ContractTaint

POOL_LABEL = "gpu-eks.io/pool"
"""Label on every node with the name of its pool (Karpenter adds `karpenter.sh/nodepool` too)."""
EFA_LABEL = "gpu-eks.io/efa"


@dataclass(frozen=True)
class PoolPlan:
    """What one node class and the pools using it become."""

    node_class: EC2NodeClass
    node_pools: tuple[NodePool, ...]


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


def _node_class_settings(pool: NodePoolConfig) -> dict[str, Any]:
    """The settings that decide a pool's EC2NodeClass; pools with equal settings share one."""
    return {
        "ami": pool.ami,
        "rootVolume": pool.root_volume.model_dump(mode="json"),
        "kubelet": pool.kubelet.model_dump(mode="json", by_alias=True, exclude_none=True)
        if pool.kubelet
        else None,
        "capacityReservations": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in pool.capacity_reservations
        ],
    }


def node_class(pool: NodePoolConfig, *, name: str, cluster_name: str, tags: dict[str, str]) -> EC2NodeClass:
    """The EC2NodeClass for a pool's node settings."""
    discovery = {DISCOVERY_TAG: cluster_name}
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
        metadata=ObjectMeta(name=name, labels={"app.kubernetes.io/managed-by": "gpu-eks"}),
        spec=EC2NodeClassSpec(
            ami_selector_terms=[AMISelectorTerm(alias=pool.ami)],
            role=node_role_name(cluster_name),
            subnet_selector_terms=[SubnetSelectorTerm(tags=discovery)],
            security_group_selector_terms=[SecurityGroupSelectorTerm(tags=discovery)],
            # IMDSv2 only, and hop limit 1 so pods cannot reach the node role's credentials.
            metadata_options=MetadataOptions(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
            ),
            block_device_mappings=_block_devices(pool),
            capacity_reservation_selector_terms=reservations or None,
            kubelet=kubelet,
            tags=dict(tags) or None,
        ),
    )


def node_pool(pool: NodePoolConfig, *, node_class: EC2NodeClass) -> NodePool:
    """The NodePool for a pool."""
    limits: dict[str, int | str] = {
        key: value
        for key, value in (
            ("cpu", pool.limits.cpu),
            ("memory", pool.limits.memory),
            ("nvidia.com/gpu", pool.limits.nvidia_gpu),
        )
        if value is not None
    }
    disruption = pool.disruption
    taints = [Taint.of(t.key, t.value, t.effect) for t in pool.effective_taints]
    startup_taints = [Taint.of(t.key, t.value, t.effect) for t in pool.startup_taints]
    return NodePool(
        metadata=ObjectMeta(name=pool.name, labels={"app.kubernetes.io/managed-by": "gpu-eks"}),
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
                metadata=NodeClaimTemplateMetadata(labels=node_labels(pool)),
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


def plan(pools: Sequence[NodePoolConfig], *, cluster_name: str, tags: dict[str, str]) -> list[PoolPlan]:
    """Every EC2NodeClass with the NodePools that use it; pools with identical node settings share one.

    A class is named after its settings (`al2023-<digest>`): adding or removing a pool never renames it,
    and changing settings creates a new class that the pools move to (Karpenter then replaces their nodes
    as drifted, which a settings change needs anyway)."""
    groups: dict[str, list[NodePoolConfig]] = {}
    for pool in pools:
        digest = hashlib.sha256(json.dumps(_node_class_settings(pool), sort_keys=True).encode()).hexdigest()
        groups.setdefault(f"{pool.ami_family}-{digest[:8]}", []).append(pool)
    plans = []
    for class_name, members in groups.items():
        shared = node_class(members[0], name=class_name, cluster_name=cluster_name, tags=tags)
        plans.append(PoolPlan(shared, tuple(node_pool(p, node_class=shared) for p in members)))
    return plans


class NodePools(pulumi.ComponentResource):
    """The EC2NodeClass and NodePool custom resources of every configured pool."""

    node_classes: dict[str, k8s.apiextensions.CustomResource]
    """EC2NodeClass resources by name."""
    node_pools: dict[str, k8s.apiextensions.CustomResource]
    """NodePool resources by pool name."""

    def __init__(
        self,
        name: str,
        *,
        pools: Sequence[NodePoolConfig],
        cluster_name: str,
        tags: dict[str, str],
        provider: k8s.Provider,
        karpenter: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`karpenter`: what the objects need first (the CRD release and the controller release, which in
        turn depends on the node role and its access entry). Depending on them makes `pulumi destroy`
        delete pools first, so the controller terminates their instances."""
        super().__init__("gpu-eks:node_pools:NodePools", name, None, opts)
        self.node_classes = {}
        self.node_pools = {}
        for item in plan(pools, cluster_name=cluster_name, tags=tags):
            class_name = item.node_class.metadata.name
            node_class = self._custom_resource(
                f"{name}-class-{class_name}", item.node_class, provider, list(karpenter)
            )
            self.node_classes[class_name] = node_class
            for pool in item.node_pools:
                self.node_pools[pool.metadata.name] = self._custom_resource(
                    f"{name}-{pool.metadata.name}", pool, provider, [node_class, *karpenter]
                )
        self.register_outputs(
            {
                "nodePools": sorted(self.node_pools),
                "nodeClasses": sorted(self.node_classes),
            }
        )

    def _custom_resource(
        self,
        logical_name: str,
        obj: NodePool | EC2NodeClass,
        provider: k8s.Provider,
        depends_on: list[pulumi.Resource],
    ) -> k8s.apiextensions.CustomResource:
        manifest = to_manifest(obj)
        return k8s.apiextensions.CustomResource(
            logical_name,
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                depends_on=depends_on,
                # Named objects: a replacement must delete the old one before creating the new one.
                delete_before_replace=True,
            ),
        )


def pool_contract(pool: NodePoolConfig, *, mig_strategy: str) -> GpuPool:
    """What consuming stacks learn about a pool (the `gpuPools` output)."""
    profile = pool.gpu_profile() if pool.kind == "gpu" else None
    return GpuPool(
        name=pool.name,
        kind=pool.kind,
        capacity_types=list(pool.capacity_types),
        taints=[ContractTaint.model_validate(t.model_dump()) for t in pool.effective_taints],
        tolerations=[Toleration.model_validate(t.toleration()) for t in pool.effective_taints],
        node_selector={"karpenter.sh/nodepool": pool.name},
        labels=node_labels(pool),
        gpu_limit=pool.limits.nvidia_gpu,
        gpu_resource=gpu_resource(profile, mig_strategy) if profile else None,
        time_slicing_replicas=pool.time_slicing.replicas if pool.time_slicing else None,
        mig_profile=pool.mig.profile if pool.mig else None,
    )
