"""What the alerts must know about one GPU pool (pure; no Pulumi): when it can launch no more nodes, how long
its nodes may take to initialize, which pods it can take, and whether its GPUs report DCGM metrics.

Every threshold comes from the same functions the rest of the program uses for the pool: the candidates and
what each counts against the pool's limits (`pools.capacity`, as Karpenter counts them), the GPU resources
the cap is written on (`pools.sharing.gpu_limits`), and the GPU node guard's initialization timeout
(`components.gpu_node_guard.manifests.pool_policy`, as the guard itself takes it).
"""

from dataclasses import dataclass
from decimal import Decimal

from components.gpu_node_guard.guard import MIG_DEADLINE_CAP
from components.gpu_node_guard.manifests import pool_policy
from components.gpu_operator_values import NVIDIA_GPU
from config.gpu_node_guard import GpuNodeGuardConfig
from config.gpu_operator import GpuOperatorConfig
from config.kubernetes import Taint
from config.node_pools import NodePoolConfig
from config.types import duration_seconds
from pools.capacity import NodeCapacity, minimal_nodes, node_capacities, pool_limits
from pools.sharing import gpu_limits

__all__ = [
    "IDLE_NODE_SECONDS",
    "NOT_INITIALIZED_GRACE_SECONDS",
    "PoolAlerting",
    "pool_alerting",
]

NOT_INITIALIZED_GRACE_SECONDS = 5 * 60
"""Beyond the guard's timeout and one sync interval: the time Karpenter takes to terminate the instance of a
NodeClaim the guard deleted (its finalizer), during which the NodeClaim and its condition series remain."""
IDLE_NODE_SECONDS = 60 * 60
"""How long a GPU node may run without a pod that requests a GPU before an alert, at the least (and at least
the pool's `consolidateAfter` plus a quarter hour, so that Karpenter's own consolidation goes first)."""
_CONSOLIDATION_MARGIN_SECONDS = 15 * 60

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
"""Taint effects that keep a pod without a matching toleration off a node (PreferNoSchedule does not)."""


@dataclass(frozen=True)
class PoolAlerting:
    """One GPU pool as the alert rules and dashboards see it."""

    name: str
    mig: bool
    """The pool partitions its GPUs with MIG: DCGM reports engine activity per MIG device, not utilisation."""
    dcgm: bool
    """The DCGM exporter runs on the pool's nodes and is scraped (not on Bottlerocket, whose nodes run no
    GPU Operator operand, nor with the exporter or its ServiceMonitor off)."""
    taints: tuple[Taint, ...]
    """The taints a pod must tolerate to be scheduled on the pool's nodes (startup taints left out:
    Karpenter ignores them when it matches pods to pools)."""
    limits: dict[str, Decimal]
    """`limits` the pool sets, Kubernetes resource name -> amount (`pools.capacity.pool_limits`)."""
    smallest_nodes: tuple[NodeCapacity, ...]
    """The Pareto-minimal candidates over the limited resources: Karpenter can launch a node for the pool
    exactly while one of them fits under what is left of every limit."""
    gpu_limit_resources: tuple[tuple[str, Decimal], ...]
    """The resources the GPU cap is enforced on as Karpenter counts them, each with how many of it one unit
    of `NodeCapacity.counts["nvidia.com/gpu"]` takes: `nvidia.com/gpu` (whole GPUs, time-slices, MIG devices
    of the single strategy), or under `mig.strategy: mixed` the pool's MIG resources."""
    initialization_timeout_seconds: int | None
    """The GPU node guard's timeout for the pool; None for `Never` (the guard replaces nothing)."""
    not_initialized_seconds: int
    """How long a NodeClaim may stay uninitialized before a person must look: past the latest the guard
    replaces it (its timeout; on MIG pools, whose clock restarts on each step of the MIG manager, the guard's
    cap of `MIG_DEADLINE_CAP` timeouts after launch), one sync interval and the termination it starts; with
    `Never`, the timeout a pool of its kind gets by default."""
    idle_node_seconds: int
    """How long a GPU node may run with no pod requesting a GPU before it is reported as idle."""


def _gpu_limit_resources(
    pool: NodePoolConfig, gpu_operator: GpuOperatorConfig
) -> tuple[tuple[str, Decimal], ...]:
    written = gpu_limits(pool, gpu_operator)
    mig = [name for name in written if name != NVIDIA_GPU]
    if not mig:
        return ((NVIDIA_GPU, Decimal(1)),) if written else ()
    if len(mig) == 1:
        return ((mig[0], Decimal(1)),)
    # Several MIG resources: the cap counts physical GPUs, each resource capped at that many GPUs' devices.
    gpus = Decimal(written[NVIDIA_GPU])
    return tuple((name, Decimal(written[name]) / gpus) for name in sorted(mig))


def pool_alerting(
    pool: NodePoolConfig,
    gpu_operator: GpuOperatorConfig,
    guard: GpuNodeGuardConfig,
    *,
    overlays: bool = True,
    scraped: bool = True,
) -> PoolAlerting:
    """What the alerts know of one GPU pool. `overlays`: the pool's NodeOverlays are declared
    (`karpenter.gpuSharingOverlays`); `scraped`: an observability backend scrapes the DCGM exporter."""
    if pool.kind != "gpu":
        raise ValueError(f"pool {pool.name!r} is a CPU pool: only GPU pools have GPU alerts")
    limits = pool_limits(pool)
    capacities = node_capacities(pool, gpu_operator, overlays=overlays)
    timeout_seconds, mig_gated = pool_policy(pool, guard)
    if timeout_seconds is None:
        # Nobody replaces such a node: a person should look once a pool of its kind would have replaced it.
        threshold = duration_seconds(GpuNodeGuardConfig().timeout_for(None, mig_gated))
    else:
        # A MIG node that keeps progressing may take up to the guard's cap of timeouts before it is replaced.
        latest = timeout_seconds * (MIG_DEADLINE_CAP if mig_gated else 1)
        threshold = latest + guard.sync_interval_seconds + NOT_INITIALIZED_GRACE_SECONDS
    consolidate_after = pool.disruption.consolidate_after
    idle = IDLE_NODE_SECONDS
    if consolidate_after != "Never":
        idle = max(idle, duration_seconds(consolidate_after) + _CONSOLIDATION_MARGIN_SECONDS)
    return PoolAlerting(
        name=pool.name,
        mig=pool.mig is not None,
        dcgm=gpu_operator.dcgm_exporter.monitored(scraped) and pool.ami_family != "bottlerocket",
        taints=tuple(t for t in pool.effective_taints if t.effect in BLOCKING_EFFECTS),
        limits=limits,
        smallest_nodes=minimal_nodes(capacities, limits) if limits else (),
        gpu_limit_resources=_gpu_limit_resources(pool, gpu_operator),
        initialization_timeout_seconds=timeout_seconds,
        not_initialized_seconds=threshold,
        idle_node_seconds=idle,
    )
