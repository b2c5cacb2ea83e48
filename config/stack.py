"""The whole stack configuration, validated once before any resource is registered."""

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
from pydantic import ValidationError

from components.gpu_operator_values import SUPPORTED_CHART_SERIES, validate_gpu_pools
from config.base import ConfigModel
from config.cluster import ClusterConfig
from config.errors import (
    PROJECT,
    ConfigError,
    ConfigProblem,
    problems_from_validation_error,
    section_key,
)
from config.gpu_operator import GpuOperatorConfig
from config.network import NetworkConfig
from config.node_pools import NodePoolConfig
from config.types import AwsRegion


class StackConfig(ConfigModel):
    """Every section of one stack's configuration (`Pulumi.<stack>.yaml`)."""

    region: AwsRegion
    """The AWS region everything is created in (the AWS provider's own setting); it also picks the
    partition (`aws`, `aws-cn`, `aws-us-gov`) used in ARNs."""
    cluster: ClusterConfig
    """The EKS cluster: version, API endpoint, administrators, the system node group. Required."""
    network: NetworkConfig = NetworkConfig()
    """The VPC: created (CIDR, AZ count, NAT layout) or an existing one."""
    gpu_operator: GpuOperatorConfig = GpuOperatorConfig()
    """The NVIDIA GPU Operator: chart version, namespace, driver mode, DCGM exporter, MIG, extra values."""
    node_pools: tuple[NodePoolConfig, ...] = ()
    """The Karpenter pools: what GPU (or CPU burst) instances may be launched, how they are tainted,
    capped and disrupted. A list; each item is one pool."""

    @property
    def gpu_pools(self) -> tuple[NodePoolConfig, ...]:
        """The pools of kind `gpu`."""
        return tuple(p for p in self.node_pools if p.kind == "gpu")

    @property
    def partition(self) -> str:
        """The AWS partition of the region, for ARNs."""
        if self.region.startswith("cn-"):
            return "aws-cn"
        if self.region.startswith("us-gov-"):
            return "aws-us-gov"
        return "aws"


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
    return problems


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


def _cross_section_problems(config: StackConfig) -> list[ConfigProblem]:
    """Checks that span sections; each names the key to change."""
    return _gpu_operator_problems(config) + _node_pool_problems(config)


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
    # Touch the namespace through the public API too, so `pulumi` records the keys as used.
    pulumi.Config(PROJECT)
    return parse_stack_config(raw, secret_keys)
