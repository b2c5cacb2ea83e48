"""The whole stack configuration, validated once before any resource is registered."""

import json
from collections.abc import Mapping
from typing import Any

import pulumi.runtime.config as runtime_config
from pydantic import ValidationError

from components.gpu_operator_values import SUPPORTED_CHART_SERIES, gpu_resource, validate_gpu_pools
from components.node_pools import plan
from config.base import ConfigModel
from config.cluster import ClusterConfig
from config.efa_device_plugin import EfaDevicePluginConfig
from config.errors import (
    PROJECT,
    ConfigError,
    ConfigProblem,
    config_key,
    problems_from_validation_error,
    section_key,
)
from config.gpu_operator import GpuOperatorConfig
from config.karpenter import KarpenterConfig
from config.network import NetworkConfig
from config.node_pools import NodePoolConfig
from config.observability import ObservabilityConfig
from config.smoke_test import SmokeTestConfig
from config.types import AwsRegion
from facts.partitions import Partition, partition_of_region


class StackConfig(ConfigModel):
    """Every section of one stack's configuration (`Pulumi.<stack>.yaml`)."""

    region: AwsRegion
    """The AWS region everything is created in (the AWS provider's own setting); it also picks the
    partition (`aws`, `aws-cn`, `aws-us-gov`) used in ARNs."""
    cluster: ClusterConfig
    """The EKS cluster: version, API endpoint, administrators, the system node group. Required."""
    network: NetworkConfig = NetworkConfig()
    """The VPC: created (CIDR, AZ count, NAT layout) or an existing one."""
    karpenter: KarpenterConfig = KarpenterConfig()
    """The Karpenter controller (version, namespace, identity, replicas) and its AWS side (node and
    controller roles, interruption queue)."""
    gpu_operator: GpuOperatorConfig = GpuOperatorConfig()
    """The NVIDIA GPU Operator: chart version, namespace, driver mode, DCGM exporter, MIG, extra values."""
    node_pools: tuple[NodePoolConfig, ...] = ()
    """The Karpenter pools: what GPU (or CPU burst) instances may be launched, how they are tainted,
    capped and disrupted. A list; each item is one pool."""
    smoke_test: SmokeTestConfig = SmokeTestConfig()
    """An optional CUDA job on one GPU pool that proves the stack works end to end."""
    efa_device_plugin: EfaDevicePluginConfig = EfaDevicePluginConfig()
    """The AWS EFA device plugin, which makes `vpc.amazonaws.com/efa` allocatable; installed only when a
    pool has `efa: true`."""
    observability: ObservabilityConfig = ObservabilityConfig()
    """Metrics, dashboards and alerts for the GPU pools and Karpenter: none, in the cluster, or Amazon
    Managed Service for Prometheus."""

    @property
    def gpu_pools(self) -> tuple[NodePoolConfig, ...]:
        """The pools of kind `gpu`."""
        return tuple(p for p in self.node_pools if p.kind == "gpu")

    @property
    def efa_pools(self) -> tuple[NodePoolConfig, ...]:
        """The pools with `efa: true` (the EFA device plugin is installed when there is one)."""
        return tuple(p for p in self.node_pools if p.efa)

    @property
    def partition(self) -> Partition:
        """The AWS partition of the region, for ARNs."""
        return partition_of_region(self.region)


SECTIONS = {section_key(f.alias or n): f.alias or n for n, f in StackConfig.model_fields.items()}
"""Full config key (`gpu-eks:cluster`) -> StackConfig field alias (`cluster`)."""


def _node_pool_problems(config: StackConfig) -> list[ConfigProblem]:
    problems = []
    seen: dict[str, int] = {}
    for index, pool in enumerate(config.node_pools):
        if pool.name in seen:
            problems.append(
                ConfigProblem(
                    f"{PROJECT}:nodePools[{index}].name",
                    f"pool name is already used by nodePools[{seen[pool.name]}]; names must be unique",
                    pool.name,
                    True,
                )
            )
        seen.setdefault(pool.name, index)
        if pool.kind == "gpu":
            try:
                validate_gpu_pools([pool.gpu_profile()], config.gpu_operator)
            except ValueError as exc:
                problems.append(ConfigProblem(f"{PROJECT}:nodePools[{index}]", str(exc)))
    if not problems:
        try:
            validate_gpu_pools([p.gpu_profile() for p in config.gpu_pools], config.gpu_operator)
        except ValueError as exc:
            problems.append(ConfigProblem(f"{PROJECT}:nodePools", str(exc)))
    if not problems:
        # Build the Karpenter objects now: what the API server would refuse is refused before any resource.
        for index, pool in enumerate(config.node_pools):
            try:
                plan([pool], cluster_name=config.cluster.name, tags={})
            except ValidationError as exc:
                messages = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
                problems.append(ConfigProblem(f"{PROJECT}:nodePools[{index}]", messages))
    return problems


def _smoke_test_problems(config: StackConfig) -> list[ConfigProblem]:
    smoke = config.smoke_test
    if not smoke.enabled:
        return []
    key = f"{PROJECT}:smokeTest.nodePool"
    pools = {p.name: p for p in config.node_pools}
    pool = pools.get(smoke.node_pool or "")
    if pool is None:
        accepted = ", ".join(p.name for p in config.gpu_pools) or "none: add a GPU pool to nodePools"
        return [
            ConfigProblem(key, f"names no pool of nodePools; GPU pools: {accepted}", smoke.node_pool, True)
        ]
    if pool.kind != "gpu":
        return [
            ConfigProblem(key, "names a CPU pool; the smoke test needs a GPU pool", smoke.node_pool, True)
        ]
    if gpu_resource(pool.gpu_profile(), config.gpu_operator.mig.strategy) is None:
        return [
            ConfigProblem(
                key,
                "names a pool whose MIG profile has several partition sizes under the mixed strategy; "
                "pick a pool with one GPU resource",
                smoke.node_pool,
                True,
            )
        ]
    return []


def _gpu_operator_problems(config: StackConfig) -> list[ConfigProblem]:
    """The chart version must be of the series the values are built for (the model checks only its form)."""
    version = config.gpu_operator.version
    if version.startswith(f"{SUPPORTED_CHART_SERIES}."):
        return []
    return [
        ConfigProblem(
            f"{PROJECT}:gpuOperator.version",
            f"the GPU Operator values are built and tested for the {SUPPORTED_CHART_SERIES} series "
            f"({SUPPORTED_CHART_SERIES}.x); another series needs its chart values vendored and reviewed "
            "first",
            version,
            True,
        )
    ]


def _service_monitor_problems(config: StackConfig) -> list[ConfigProblem]:
    """A ServiceMonitor needs the Prometheus Operator CRDs, which only an observability backend installs."""
    if config.gpu_operator.dcgm_exporter.service_monitor and not config.observability.enabled:
        return [
            ConfigProblem(
                f"{PROJECT}:gpuOperator.dcgmExporter.serviceMonitor",
                "needs the Prometheus Operator CRDs, which only an observability backend installs: set "
                "gpu-eks:observability.backend to inCluster or managed, or leave serviceMonitor unset",
                True,
                True,
            )
        ]
    return []


def _cross_section_problems(config: StackConfig) -> list[ConfigProblem]:
    """Checks that span sections; each names the key to change."""
    return (
        _karpenter_replicas_problems(config)
        + _gpu_operator_problems(config)
        + _service_monitor_problems(config)
        + _node_pool_problems(config)
        + _smoke_test_problems(config)
    )


def _karpenter_replicas_problems(config: StackConfig) -> list[ConfigProblem]:
    """`karpenter.replicas` must fit on the system node group at its smallest.

    The 1.14.1 chart gives the controller a *required* pod anti-affinity on `kubernetes.io/hostname` (one
    replica per node) and only lets it run on nodes Karpenter does not manage; here that is the system node
    group. So:

    - more replicas than `systemNodes.maxSize`: the surplus can never be scheduled. Refused.
    - more replicas than `systemNodes.minSize`: refused too, not merely warned about. Nothing in this
      program scales the system node group (no cluster autoscaler, and Karpenter cannot host itself), so
      the nodes above `minSize` exist only while someone keeps `desiredSize` up by hand. At `minSize` a
      replica stays Pending, and with one replica already unavailable the chart's PodDisruptionBudget
      (`maxUnavailable: 1`) allows no eviction of the others, so a managed node group update fails with
      `PodEvictionFailure` unless forced. A warning in `pulumi up` output is easy to miss; that failure
      shows up only at the next upgrade.
    """
    replicas = config.karpenter.replicas
    nodes = config.cluster.system_nodes
    key = config_key(("karpenter", "replicas"))
    if replicas > nodes.max_size:
        return [
            ConfigProblem(
                key,
                f"{replicas} controller replicas cannot be scheduled: the chart places one per node and "
                f"the system node group has at most {nodes.max_size} (gpu-eks:cluster.systemNodes.maxSize); "
                f"lower replicas to at most {nodes.min_size} or raise systemNodes.minSize",
                value=replicas,
                has_value=True,
            )
        ]
    if replicas > nodes.min_size:
        return [
            ConfigProblem(
                key,
                f"{replicas} controller replicas need {replicas} system nodes (one per node), but the "
                f"system node group may shrink to {nodes.min_size} (gpu-eks:cluster.systemNodes.minSize), "
                "leaving a replica Pending and node-group updates blocked by its disruption budget; "
                f"lower replicas to at most {nodes.min_size} or raise systemNodes.minSize",
                value=replicas,
                has_value=True,
            )
        ]
    return []


def parse_stack_config(raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset()) -> StackConfig:
    """Validate raw config (full key -> value as Pulumi stores it: JSON text for objects).

    Raises `ConfigError` listing every problem, each with the full config key.
    """
    problems: list[ConfigProblem] = []
    sections: dict[str, Any] = {}
    for key, value in sorted(raw.items()):
        if not key.startswith(f"{PROJECT}:") and key != "aws:region":
            continue
        if key not in SECTIONS:
            problems.append(
                ConfigProblem(key, f"unknown config section; accepted: {', '.join(sorted(SECTIONS))}")
            )
        elif key == "aws:region" or not isinstance(value, str):
            sections[SECTIONS[key]] = value
        else:
            try:
                sections[SECTIONS[key]] = json.loads(value)
            except json.JSONDecodeError:
                problems.append(
                    ConfigProblem(key, "must be a structured value (a YAML mapping or list), not a string")
                )
    try:
        config = StackConfig.model_validate(sections)
    except ValidationError as exc:
        problems.extend(problems_from_validation_error(exc, StackConfig, secret_keys))
        raise ConfigError(problems) from None
    problems.extend(_cross_section_problems(config))
    if problems:
        raise ConfigError(problems)
    return config


def load_stack_config() -> StackConfig:
    """Read this stack's Pulumi config and validate it (see `parse_stack_config`)."""
    raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = frozenset(runtime_config._SECRET_KEYS.get())
    return parse_stack_config(raw, secret_keys)
