"""What a GPU pool that shares its GPUs offers per node, in the units its pods request (pure; no Pulumi).

Karpenter's instance-type table reports `nvidia.com/gpu` = physical GPUs. A pool that time-slices or
partitions them with MIG advertises something else once the GPU Operator has set the node up: GPUs x
replicas, GPUs x MIG devices (`mig.strategy: single`), or `nvidia.com/mig-<profile>` resources (`mixed`).
`sharing_capacity` states that per instance type; the NodeOverlays (`components.node_overlays`) tell
Karpenter's scheduling simulation, and `gpu_limits` and `slices_per_gpu` keep the pool's cap and its
contract in the same units.
"""

from components.gpu_operator_values import NVIDIA_GPU, MigProfileError, advertised_gpu_resources
from config.gpu_operator import GpuOperatorConfig
from config.node_pools import GpuUnits, NodePoolConfig
from facts.instance_types import GpuInstanceType

__all__ = ["gpu_limit_units", "gpu_limits", "pool_gpu_resource", "sharing_capacity", "slices_per_gpu"]


def sharing_capacity(
    pool: NodePoolConfig, gpu_operator: GpuOperatorConfig
) -> dict[GpuInstanceType, dict[str, int]]:
    """For each candidate instance type of the pool whose nodes advertise other GPU resources than
    Karpenter's table (`nvidia.com/gpu` = GPUs), what they advertise (resource -> count per node).

    Empty for CPU pools and pools that do not share GPUs. Raises `MigProfileError` where a MIG pool's
    devices cannot be derived (see `mig_devices_per_gpu`)."""
    if pool.kind != "gpu":
        return {}
    profile = pool.gpu_profile()
    result = {}
    for it in pool.candidates():
        advertised = advertised_gpu_resources(profile, gpu_operator, it)
        if advertised != {NVIDIA_GPU: it.gpu_count}:
            result[it] = advertised
    return result


def _mig_resources(capacity: dict[GpuInstanceType, dict[str, int]]) -> list[str]:
    return sorted({r for advertised in capacity.values() for r in advertised if r != NVIDIA_GPU})


def pool_gpu_resource(pool: NodePoolConfig, gpu_operator: GpuOperatorConfig) -> str | None:
    """The resource a pod requests for one GPU or slice of the pool: `nvidia.com/gpu`, or under
    `mig.strategy: mixed` the pool's MIG resource; None with several (the pod must name one) or a CPU pool."""
    if pool.kind != "gpu":
        return None
    mig_resources = _mig_resources(sharing_capacity(pool, gpu_operator))
    if not mig_resources:
        return NVIDIA_GPU
    return mig_resources[0] if len(mig_resources) == 1 else None


def _shapes(capacity: dict[GpuInstanceType, dict[str, int]]) -> set[tuple[tuple[str, int], ...]]:
    """The distinct per-GPU shares (resource -> count per GPU, zeros left out) of the instance types."""
    return {
        tuple(sorted((name, count // it.gpu_count) for name, count in advertised.items() if count))
        for it, advertised in capacity.items()
    }


def slices_per_gpu(pool: NodePoolConfig, gpu_operator: GpuOperatorConfig) -> int | None:
    """How many of the pool's GPU resource (`gpuResource`) one physical GPU provides: 1 for whole GPUs, the
    time-slicing replicas, or the MIG devices per GPU. None for CPU pools, for mixed-strategy pools with
    several MIG resources, and where the pool's GPU models partition differently (e.g. `all-1g.10gb` gives
    4 per A100 40GB and 7 per H100)."""
    if pool.kind != "gpu":
        return None
    capacity = sharing_capacity(pool, gpu_operator)
    if not capacity:
        return 1
    shapes = _shapes(capacity)
    if len(shapes) != 1:
        return None
    (per_gpu,) = shapes
    return per_gpu[0][1] if len(per_gpu) == 1 else None


def gpu_limits(pool: NodePoolConfig, gpu_operator: GpuOperatorConfig) -> dict[str, str]:
    """The NodePool's `spec.limits` on GPU resources, from the pool's `limits.nvidia.com/gpu`.

    The cap is in the units the pool's pods request (`gpuResource`): GPUs, time-slices, or MIG devices, which
    is also what Karpenter counts, both for the instance types it may launch (with the NodeOverlays) and for
    the nodes it has (what they advertise). Under `mig.strategy: mixed` the nodes advertise no
    `nvidia.com/gpu`, so the cap is written on the MIG resource too; with several MIG resources (e.g.
    `all-balanced`) the value counts physical GPUs and each resource is capped at that many GPUs' worth, which
    needs every GPU model of the pool to be partitioned alike (`MigProfileError` otherwise). `nvidia.com/gpu`
    itself is always written: the policy pack (and a reader) expects a GPU cap on every GPU pool.
    """
    limit = pool.limits.nvidia_gpu
    if pool.kind != "gpu" or limit is None:
        return {}
    limits = {NVIDIA_GPU: limit}
    capacity = sharing_capacity(pool, gpu_operator)
    mig_resources = _mig_resources(capacity)
    if len(mig_resources) <= 1:
        return limits | dict.fromkeys(mig_resources, limit)
    shapes = _shapes(capacity)
    if len(shapes) != 1 or not limit.isdigit():
        raise MigProfileError(
            f"GPU pool {pool.name!r} advertises several MIG resources ({', '.join(mig_resources)}), so its "
            "limits.nvidia.com/gpu counts physical GPUs and is written as a cap per MIG resource; that needs "
            + (
                "a whole number of GPUs"
                if len(shapes) == 1
                else "every GPU model of the pool to be partitioned alike: split the pool per GPU model "
                "(instanceFamilies or gpuNames)"
            )
        )
    (per_gpu,) = shapes
    return limits | {name: str(int(limit) * count) for name, count in per_gpu}


def gpu_limit_units(pool: NodePoolConfig, gpu_operator: GpuOperatorConfig, *, overlays: bool) -> GpuUnits:
    """What one node of each candidate instance type takes under the pool's `limits.nvidia.com/gpu`, as
    Karpenter counts it: an instance fits only if its capacity of every resource of `gpu_limits` is under
    that resource's cap (kubernetes-sigs/karpenter v1.14.1 `filterByRemainingResources`).

    With the pool's NodeOverlays (`overlays`) that capacity is what the nodes advertise: time-slices, MIG
    devices (`single`), or under `mixed` the MIG resource, whose cap is the limit, or with several MIG
    resources the limit in physical GPUs times each resource's devices per GPU, so a node takes its GPUs.
    Without overlays Karpenter's table counts physical GPUs. Raises `MigProfileError` as `sharing_capacity`.
    """
    if pool.kind != "gpu":
        return GpuUnits({})
    capacity = sharing_capacity(pool, gpu_operator) if overlays else {}
    physical = len(_mig_resources(capacity)) > 1
    per_instance = {
        it.name: max(capacity[it].values()) if it in capacity and not physical else it.gpu_count
        for it in pool.candidates()
    }
    sliced = any(per_instance[it.name] != it.gpu_count for it in pool.candidates())
    unit = ("time-slices" if pool.time_slicing else "MIG devices") if sliced else "GPUs"
    return GpuUnits(per_instance, unit)
