"""NodeOverlays: tell Karpenter how many GPU slices the nodes of a GPU-sharing pool will offer.

Karpenter plans launches with its instance-type table, where a `g6.xlarge` has one `nvidia.com/gpu`. A pool
that time-slices it 4 ways advertises 4 once the GPU Operator has set the node up, so without help four
pending pods asking for one slice each launch four instances. A `karpenter.sh/v1alpha1` NodeOverlay scoped to
the pool (`karpenter.sh/nodepool In [<pool>]`) sets the instance types' `capacity` to what their nodes will
advertise (`pools.sharing`), and the simulation, the pool's limits and consolidation all count
slices. One overlay per group of instance types that offer the same: by GPU count for time-slicing, by GPU
model and count for MIG.

Mechanism (sigs.k8s.io/karpenter @ 6e7eab7a0f48, vendored by Karpenter AWS 1.14.1): the controller applies
overlays only with the alpha `NodeOverlay` feature gate (`pkg/controllers/controllers.go`), and its capacity
replaces an extended resource the instance type already has (`InstanceType.ApplyCapacityOverlay` is
`lo.Assign(capacity, overlay)` in `pkg/cloudprovider/types.go`). The AWS provider applies the overlays
again when it launches (`pkg/cloudprovider/cloudprovider.go` `Create`), so the NodeClaim's capacity, which
the pool's limits count until the node is initialized, is in slices too.
"""

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components import MANAGED_BY
from components.karpenter_api import NodeOverlay, NodeOverlayRequirement, NodeOverlaySpec, ObjectMeta
from components.node_pools import POOL_LABEL, karpenter_object
from config.gpu_operator import GpuOperatorConfig
from config.node_pools import NodePoolConfig
from facts.instance_types import GpuInstanceType
from pools.sharing import sharing_capacity

__all__ = ["OVERLAY_WEIGHT", "NodeOverlays", "pool_overlays", "stack_overlays"]

OVERLAY_WEIGHT = 1000
"""Weight of the derived overlays: above hand-written generic ones (the blueprints use 10), which would
otherwise set `nvidia.com/gpu` for every pool alike, and below 10000 so a deliberate override still can."""


def _requirement(key: str, value: str) -> NodeOverlayRequirement:
    return NodeOverlayRequirement(key=key, operator="In", values=[value])


def _selector(pool: NodePoolConfig, it: GpuInstanceType) -> tuple[tuple[str, str], ...]:
    """The instance-type labels that decide what a node of the pool advertises."""
    count = ("karpenter.k8s.aws/instance-gpu-count", str(it.gpu_count))
    if pool.mig is None:
        return (count,)
    return (
        ("karpenter.k8s.aws/instance-gpu-name", it.gpu_name),
        ("karpenter.k8s.aws/instance-gpu-memory", str(it.gpu_memory_mib)),
        count,
    )


def _name(pool: NodePoolConfig, it: GpuInstanceType) -> str:
    if pool.mig is None:
        return f"{pool.name}-{it.gpu_count}gpu"
    return f"{pool.name}-{it.gpu_name}-{it.gpu_memory_mib}mib-{it.gpu_count}gpu"


def pool_overlays(pool: NodePoolConfig, gpu_operator: GpuOperatorConfig) -> list[NodeOverlay]:
    """The NodeOverlays of one pool: one per group of candidate instance types that advertise the same GPU
    resources, sorted by name; none for a pool that does not share GPUs."""
    groups: dict[tuple[tuple[str, str], ...], tuple[str, dict[str, int]]] = {}
    for it, advertised in sharing_capacity(pool, gpu_operator).items():
        selector = _selector(pool, it)
        name, capacity = groups.setdefault(selector, (_name(pool, it), advertised))
        if capacity != advertised:  # the selector leaves out something the capacity depends on
            raise AssertionError(f"{name}: instance types it selects advertise {capacity} and {advertised}")
    return sorted(
        (
            NodeOverlay(
                metadata=ObjectMeta(name=name, labels={**MANAGED_BY, POOL_LABEL: pool.name}),
                spec=NodeOverlaySpec(
                    requirements=[
                        _requirement("karpenter.sh/nodepool", pool.name),
                        *(_requirement(key, value) for key, value in selector),
                    ],
                    # Quantities as strings: the API server returns them so, and Pulumi then sees no diff.
                    capacity={resource: str(count) for resource, count in capacity.items()},
                    weight=OVERLAY_WEIGHT,
                ),
            )
            for selector, (name, capacity) in groups.items()
        ),
        key=lambda overlay: overlay.metadata.name,
    )


def stack_overlays(pools: Sequence[NodePoolConfig], gpu_operator: GpuOperatorConfig) -> list[NodeOverlay]:
    """The NodeOverlays of every pool of the stack."""
    return [overlay for pool in pools for overlay in pool_overlays(pool, gpu_operator)]


class NodeOverlays(pulumi.ComponentResource):
    """The NodeOverlay custom resources of the GPU-sharing pools."""

    node_overlays: dict[str, k8s.apiextensions.CustomResource]
    """NodeOverlay resources by name."""

    def __init__(
        self,
        name: str,
        *,
        overlays: Sequence[NodeOverlay],
        provider: k8s.Provider,
        karpenter: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`karpenter`: the CRD release (which serves `karpenter.sh/v1alpha1` NodeOverlay) and the controller
        release, as for the pools: on `pulumi destroy` the overlays go while the controller still runs."""
        super().__init__("gpu-eks:node_overlays:NodeOverlays", name, None, opts)
        self.node_overlays = {
            overlay.metadata.name: karpenter_object(
                f"{name}-{overlay.metadata.name}",
                overlay,
                parent=self,
                provider=provider,
                depends_on=list(karpenter),
            )
            for overlay in overlays
        }
        self.register_outputs({"nodeOverlays": sorted(self.node_overlays)})
