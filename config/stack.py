"""The whole stack configuration, validated once before any resource is registered."""

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_CEILING, Decimal
from typing import Any
from urllib.parse import urlsplit

import pulumi
import pulumi.runtime.config as runtime_config
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from components.gpu_operator_values import (
    NVIDIA_GPU,
    SUPPORTED_CHART_SERIES,
    MigNotSupportedError,
    MigProfileError,
    validate_gpu_pools,
)
from components.karpenter_api import NodeOverlay
from components.node_overlays import pool_overlays, stack_overlays
from components.node_pools import pool_objects
from config.base import ConfigModel
from config.cluster import ClusterConfig
from config.cost import CostConfig, as_written
from config.efa_device_plugin import EfaDevicePluginConfig
from config.errors import (
    PROJECT,
    ConfigError,
    ConfigProblem,
    config_key,
    nearest,
    problems_from_validation_error,
    section_key,
)
from config.gpu_node_guard import GpuNodeGuardConfig
from config.gpu_operator import GpuOperatorConfig
from config.karpenter import KarpenterConfig
from config.network import NetworkConfig
from config.node_pools import GpuUnits, NodePoolConfig
from config.observability import ObservabilityConfig
from config.operation import Operation, current_operation
from config.production import production_stacks
from config.smoke_test import SmokeTestConfig
from config.teams import TeamConfig
from config.types import AwsProfile, AwsRegion, documentation_range
from facts.aws_provider import provider_config_keys
from facts.instance_types import instance_types
from facts.kubernetes import RESERVED_NAMESPACE_PREFIX, SYSTEM_NAMESPACES
from facts.partitions import Partition, partition_of_arn, partition_of_region
from facts.placeholders import documentation_account, documentation_domain
from facts.pricing import HOURS_PER_MONTH, on_demand_prices
from facts.system_pods import GPU_NODE_GUARD, GUARD_REPLICAS, NFD_WORKER, SYSTEM_DEPLOYMENTS, PodRequests
from pools.cost import pool_cost, stack_cost
from pools.sharing import gpu_limit_units, gpu_limits, pool_gpu_resource, sharing_capacity
from pools.spend import worst_cases


class StackConfig(ConfigModel):
    """Every section of one stack's configuration (`Pulumi.<stack>.yaml`)."""

    region: AwsRegion
    """The AWS region everything is created in (the AWS provider's own setting); it also picks the
    partition (`aws`, `aws-cn`, `aws-us-gov`) used in ARNs."""
    profile: AwsProfile | None = None
    """The AWS CLI profile the AWS provider uses (its own setting). The kubeconfig the program uses and
    exports then runs `aws eks get-token --profile <profile>`, so it authenticates as the same identity."""
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
    gpu_node_guard: GpuNodeGuardConfig = GpuNodeGuardConfig()
    """The GPU node guard, installed with any GPU pool: lifts the MIG pools' startup taint once the GPUs are
    partitioned, and deletes GPU NodeClaims that never initialize."""
    observability: ObservabilityConfig = ObservabilityConfig()
    """Metrics, dashboards and alerts for the GPU pools and Karpenter: none, in the cluster, or Amazon
    Managed Service for Prometheus."""
    cost: CostConfig = CostConfig()
    """What the stack may spend: a cap on the node pools' worst case (checked before anything is created,
    and by the policy pack), and an optional monthly AWS budget on the stack's cost-allocation tag."""
    teams: tuple[TeamConfig, ...] = ()
    """ML teams: each gets a namespace of its name (Pod Security level, optional GPU quota) and EKS access
    entries that let its IAM roles work in that namespace only. A list; each item is one team."""

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

    @property
    def node_overlays(self) -> list[NodeOverlay]:
        """The NodeOverlays of the GPU-sharing pools; none with `karpenter.gpuSharingOverlays: false`."""
        if not self.karpenter.gpu_sharing_overlays:
            return []
        return stack_overlays(self.gpu_pools, self.gpu_operator)


SECTIONS = {section_key(f.alias or n): f.alias or n for n, f in StackConfig.model_fields.items()}
"""Full config key (`gpu-eks:cluster`) -> StackConfig field alias (`cluster`)."""

ENGINE_KEYS = frozenset({"tags", "template", "autonaming", "disable-default-providers"})
"""`pulumi:` keys the Pulumi engine reads itself and the program ignores (pulumi/pulumi 3.272:
sdk/go/common/workspace/project.go `pulumi:tags` (stack tags, e.g. from Pulumi.yaml), `pulumi:template`
(pkg/cmd/pulumi/project/newcmd), pkg/cmd/pulumi/autonaming `pulumi:autonaming`,
pkg/resource/deploy/default_providers.go `pulumi:disable-default-providers`). The engine hands every key of
the stack's config, these included, to the program."""

KUBERNETES_NOT_READ = (
    "is never read: gpu-eks reaches the cluster through Kubernetes providers built from the new cluster's "
    "own kubeconfig, so kubernetes: settings of the default provider would be silently ignored; remove it"
)


def _known_keys() -> list[str]:
    """Every config key the program or the engine acts on, for suggesting the nearest one."""
    return [
        *SECTIONS,
        *(f"aws:{k}" for k in sorted(provider_config_keys())),
        *(f"pulumi:{k}" for k in sorted(ENGINE_KEYS)),
    ]


def _key_problem(key: str, value: Any, secret: bool) -> ConfigProblem | None:
    """Why a key outside the sections is not acted on, or None when it belongs to the AWS provider or the
    engine (and does no harm)."""
    namespace, colon, name = key.partition(":")
    shown = "[secret]" if secret else value
    if colon and namespace == "aws" and name in provider_config_keys():
        return None
    if colon and namespace == "pulumi" and name in ENGINE_KEYS:
        return _engine_key_problem(key, value, shown)
    if colon and namespace == "kubernetes":
        return ConfigProblem(key, KUBERNETES_NOT_READ, shown, True)
    section, dot, _ = name.partition(".")
    if colon and namespace == PROJECT and dot and f"{PROJECT}:{section}" in SECTIONS:
        return ConfigProblem(
            key,
            f"is a key of its own, never read: {PROJECT}:{section} is one structured value, so write "
            f"{name[len(section) + 1 :]} nested under it ({PROJECT}:{section}: {{...}})",
            shown,
            True,
        )
    close = nearest(key, _known_keys())
    hint = f"; did you mean {close}?" if close else ""
    if colon and namespace == PROJECT:
        what = f"is no section of gpu-eks (sections: {', '.join(sorted(SECTIONS))})"
    elif colon and namespace == "aws":
        what = "is not a setting of the AWS provider (pulumi-aws), so nothing would read it"
    elif colon and namespace == "pulumi":
        what = f"is not a setting the Pulumi engine reads ({', '.join(sorted(ENGINE_KEYS))})"
    else:
        what = (
            "is never read: gpu-eks reads gpu-eks:<section>, the AWS provider's aws:<setting> and the "
            "engine's pulumi:<setting>"
        )
    return ConfigProblem(key, what + hint, shown, True)


def _engine_key_problem(key: str, value: Any, shown: Any) -> ConfigProblem | None:
    """`pulumi:disable-default-providers` must leave the AWS provider on: every AWS resource uses it."""
    if key != "pulumi:disable-default-providers":
        return None
    try:
        disabled = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        disabled = value
    if isinstance(disabled, list) and ("aws" in disabled or "*" in disabled):
        return ConfigProblem(
            key,
            "disables the default AWS provider, which every AWS resource of gpu-eks uses (configured by the "
            "aws: keys): the deployment would fail on its first resource; remove aws and *",
            shown,
            True,
        )
    return None


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
        for taint_index, why in pool.startup_taint_problems():
            key = f"{PROJECT}:nodePools[{index}].startupTaints[{taint_index}].key"
            problems.append(ConfigProblem(key, why, pool.startup_taints[taint_index].key, True))
        operator_problem = None
        if pool.kind == "gpu":
            try:
                validate_gpu_pools([pool.gpu_profile()], config.gpu_operator)
            except MigNotSupportedError as exc:
                # The root cause, said first: no other setting of the pool can make its GPUs partition.
                profile = pool.mig.profile if pool.mig else None
                operator_problem = ConfigProblem(
                    f"{PROJECT}:nodePools[{index}].mig.profile", str(exc), profile, profile is not None
                )
                problems.append(operator_problem)
            except ValueError as exc:
                operator_problem = ConfigProblem(f"{PROJECT}:nodePools[{index}]", str(exc))
        # The GPU cap's units come from what the operator makes of the pool: only once it accepts the pool.
        units = _gpu_units(pool, config) if operator_problem is None else None
        problems += pool.problems(f"{PROJECT}:nodePools[{index}]", units)
        existing = config.network.existing
        problems += pool.placement_problems(
            f"{PROJECT}:nodePools[{index}]",
            config.region,
            existing.private_subnet_ids if existing is not None else None,
        )
        if operator_problem is not None and operator_problem not in problems:
            problems.append(operator_problem)
    if not problems:
        try:
            validate_gpu_pools([p.gpu_profile() for p in config.gpu_pools], config.gpu_operator)
        except ValueError as exc:
            problems.append(ConfigProblem(f"{PROJECT}:nodePools", str(exc)))
    if not problems:
        problems.extend(_gpu_sharing_problems(config))
    if not problems:
        # Build the Karpenter objects now: what the API server would refuse is refused before any resource.
        for index, pool in enumerate(config.node_pools):
            try:
                pool_objects(
                    [pool], cluster_name=config.cluster.name, tags={}, gpu_operator=config.gpu_operator
                )
                pool_overlays(pool, config.gpu_operator)
            except ValidationError as exc:
                messages = "; ".join(_schema_message(e) for e in exc.errors())
                problems.append(ConfigProblem(f"{PROJECT}:nodePools[{index}]", messages))
    return problems


def _sharing_key(index: int, pool: NodePoolConfig) -> str:
    return f"{PROJECT}:nodePools[{index}]." + ("timeSlicing" if pool.time_slicing else "mig.profile")


def _gpu_sharing_problems(config: StackConfig) -> list[ConfigProblem]:
    """What GPU-sharing pools offer must be derivable (their NodeOverlays and limits are built from it), the
    overlays need the `nodeOverlay` feature gate, and mixed-strategy MIG pools need the overlays."""
    problems = []
    sharing: list[tuple[int, NodePoolConfig]] = []
    for index, pool in enumerate(config.node_pools):
        try:
            if pool_overlays(pool, config.gpu_operator):
                sharing.append((index, pool))
            gpu_limits(pool, config.gpu_operator)
        except MigProfileError as exc:
            value = pool.mig.profile if pool.mig else None
            problems.append(ConfigProblem(_sharing_key(index, pool), str(exc), value, value is not None))
    if problems:
        return problems
    karpenter = config.karpenter
    if not karpenter.gpu_sharing_overlays:
        mixed = [
            (index, pool)
            for index, pool in sharing
            if any(set(c) - {NVIDIA_GPU} for c in sharing_capacity(pool, config.gpu_operator).values())
        ]
        return [
            ConfigProblem(
                config_key(("karpenter", "gpuSharingOverlays")),
                f"MIG pool {pool.name!r} ({_sharing_key(index, pool)}) runs under gpuOperator.mig.strategy "
                "mixed: its pods request nvidia.com/mig-* resources, which no instance type offers to "
                "Karpenter without a NodeOverlay, so its nodes would never be launched; set "
                "gpuSharingOverlays to true (or leave it out) or use mig.strategy single",
                False,
                True,
            )
            for index, pool in mixed
        ]
    gates = karpenter.feature_gates
    if sharing and "node_overlay" in gates.model_fields_set and not gates.node_overlay:
        keys = ", ".join(f"{_sharing_key(index, pool)} ({pool.name})" for index, pool in sharing)
        return [
            ConfigProblem(
                config_key(("karpenter", "featureGates", "nodeOverlay")),
                "GPU-sharing pools get NodeOverlays, which the controller ignores with this gate off: "
                f"{keys}. Leave the gate out (it is turned on for them) or set it to true; to run without "
                "overlays, set gpu-eks:karpenter.gpuSharingOverlays to false",
                False,
                True,
            )
        ]
    return []


def _with_overlay_gate(config: StackConfig) -> StackConfig:
    """`config` with the `nodeOverlay` feature gate on when NodeOverlays are declared."""
    gates = config.karpenter.feature_gates
    if not config.node_overlays or gates.node_overlay:
        return config
    karpenter = config.karpenter.model_copy(
        update={"feature_gates": gates.model_copy(update={"node_overlay": True})}
    )
    return config.model_copy(update={"karpenter": karpenter})


def _schema_message(error: ErrorDetails) -> str:
    """A Karpenter schema refusal in words: where in the object, and what (no regular expressions)."""
    where = ".".join(str(part) for part in error["loc"] if not str(part).startswith("function-"))
    if error["type"] == "string_pattern_mismatch":
        what = f"{error.get('input')!r} is not accepted by Karpenter's schema"
    else:
        what = error["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
    return f"Karpenter would refuse {where}: {what}" if where else f"Karpenter would refuse it: {what}"


def _gpu_units(pool: NodePoolConfig, config: StackConfig) -> GpuUnits | None:
    """The units the pool's GPU cap counts in, or None where they cannot be derived (a MIG profile
    `_gpu_sharing_problems` refuses)."""
    try:
        return gpu_limit_units(pool, config.gpu_operator, overlays=config.karpenter.gpu_sharing_overlays)
    except MigProfileError:
        return None


def _placeholders(config: StackConfig) -> list[ConfigProblem]:
    """Documentation examples where a real value goes: an API allow list entry in a documentation range (the
    committed prod stack's runner address), a role ARN in an AWS documentation account, an alert address or
    heartbeat URL under a reserved domain. `pulumi preview` warns about each; `pulumi up` refuses them."""
    endpoint = config.cluster.endpoint
    cidrs = [
        ConfigProblem(
            f"{PROJECT}:cluster.endpoint.{key}[{index}]",
            f"lies in {documentation}, a range reserved for documentation that no runner sends from, so "
            "nothing could reach the API through it: put your runner's egress address there before pulumi "
            "up (docs/private-production.md)",
            cidr,
            True,
        )
        for key, cidrs in (
            ("publicAccessCidrs", endpoint.public_access_cidrs if endpoint.public_access else ()),
            ("privateAccessCidrs", endpoint.private_access_cidrs),
        )
        for index, cidr in enumerate(cidrs)
        if (documentation := documentation_range(cidr)) is not None
    ]
    roles = [
        ConfigProblem(
            config_key(path),
            f"is a role of account {account}, an example account of the AWS documentation that no "
            "organization deploys in, so its access entry would let nobody in: put the ARN of your own role "
            "there before pulumi up",
            arn,
            True,
        )
        for path, arn in _access_entry_roles(config)
        if arn is not None and (account := documentation_account(arn)) is not None
    ]
    return cidrs + roles + _alerting_placeholders(config)


def _alerting_placeholders(config: StackConfig) -> list[ConfigProblem]:
    """E-mail addresses and the heartbeat URL under a domain reserved for examples (example.com, ...): the
    committed prod stack's, which reach nobody."""
    alerting = config.observability.alerting
    if alerting is None:
        return []
    found: list[tuple[tuple[str | int, ...], str, str, str]] = [
        (("emailSubscriptions", index), address, "the on-call address", domain)
        for index, address in enumerate(alerting.email_subscriptions)
        if (domain := documentation_domain(address.rpartition("@")[2])) is not None
    ]
    url = alerting.heartbeat_url
    host = urlsplit(url).hostname if url else None
    if url and host and (domain := documentation_domain(host)) is not None:
        found.append((("heartbeatUrl",), url, "your heartbeat check's URL", domain))
    return [
        ConfigProblem(
            config_key(("observability", "alerting", *path)),
            f"lies under {domain}, a domain reserved for examples where nobody receives anything: put "
            f"{what} there before pulumi up (docs/observability.md#alert-routing)",
            value,
            True,
        )
        for path, value, what, domain in found
    ]


def config_warnings(config: StackConfig) -> list[str]:
    """What is allowed but worth a second look in `pulumi preview`: an implausibly large pool, a
    documentation placeholder (`pulumi up` refuses those), nodes of an existing VPC that depend on the public
    allow list."""
    placeholders = [str(problem) for problem in _placeholders(config)]
    nodes = (
        [
            f"{PROJECT}:cluster.endpoint.privateAccess = false: nodes reach the API through the public "
            "endpoint from the existing VPC's NAT addresses, so publicAccessCidrs must hold them, or no node "
            "joins; privateAccess: true keeps that traffic inside the VPC"
        ]
        if config.network.existing is not None and _nodes_outside_public_allow_list(config)
        else []
    )
    return (
        placeholders
        + nodes
        + [
            f"{PROJECT}:nodePools[{index}].limits: {case}"
            for index, pool in enumerate(config.node_pools)
            if (case := pool.worst_case(_gpu_units(pool, config)))
        ]
        + _idle_node_warnings(config)
        + _endless_drain_warnings(config)
    )


def _endless_drain_warnings(config: StackConfig) -> list[str]:
    """A pool that expires its nodes without a `terminationGracePeriod`: an expired node whose drain a
    PodDisruptionBudget or a do-not-disrupt pod blocks bills for ever beside the replacement Karpenter has
    already launched (draining nodes do not count against the limits; Karpenter 1.14.1 docs, disruption.md:
    such pods "may block draining indefinitely", until `terminationGracePeriod` where one is set)."""
    return [
        f"{PROJECT}:nodePools[{index}].terminationGracePeriod is unset while expireAfter is "
        f"{pool.expire_after} ({pool.name}): an expired node whose drain a PodDisruptionBudget or a "
        "karpenter.sh/do-not-disrupt pod blocks is never terminated, and bills beside its replacement, which "
        "Karpenter launches at once (draining nodes do not count against the limits). Set it to the longest "
        "a pod may take to finish (e.g. 1h for serving, 24h for training), or expireAfter: Never"
        for index, pool in enumerate(config.node_pools)
        if pool.expire_after != "Never" and pool.termination_grace_period is None
    ]


def _idle_node_warnings(config: StackConfig) -> list[str]:
    """A GPU pool that can never remove an empty node: consolidation off (`consolidateAfter: Never`), drift
    blocked at all times by a 0-node budget, no expiry. An idle node then bills until someone deletes it."""
    warnings = []
    for index, pool in enumerate(config.node_pools):
        if pool.kind != "gpu":
            continue
        never_drifts = any(
            b.nodes in ("0", "0%") and b.schedule is None and (b.reasons is None or "Drifted" in b.reasons)
            for b in pool.disruption.budgets
        )
        if pool.disruption.consolidate_after != "Never" or pool.expire_after != "Never" or not never_drifts:
            continue
        spend = pool_cost(pool, config.gpu_operator, overlays=config.karpenter.gpu_sharing_overlays).spend
        prices = on_demand_prices()
        priced = [n for n in pool.launchable() if n.name in prices]
        dearest = max(priced, key=lambda it: prices[it.name], default=None)
        cost = (
            f"one idle {dearest.name} costs ${prices[dearest.name]:,.2f}/h "
            f"(${prices[dearest.name] * HOURS_PER_MONTH:,.0f} a {HOURS_PER_MONTH}-hour month, us-east-1 "
            "on-demand list price)"
            if dearest is not None
            else "its nodes have no list price to say what an idle one costs"
        )
        at_limit = f", ${spend.worst_case.usd_per_hour:,.2f}/h at its limits" if spend.worst_case else ""
        warnings.append(
            f"{PROJECT}:nodePools[{index}] ({pool.name}) can never shed an empty node: consolidateAfter is "
            "Never, a 0-node budget blocks drift at all times and expireAfter is Never, so an idle node "
            f"bills until someone deletes it; {cost}{at_limit}. Set consolidateAfter (e.g. 1h), or an "
            "expireAfter, or give the 0-node budget a schedule"
        )
    return warnings


def _smoke_test_problems(config: StackConfig) -> list[ConfigProblem]:
    """The smoke test must name a GPU pool with one GPU resource to request."""
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
    try:
        # What the pool advertises is derived only once the operator accepts it.
        validate_gpu_pools([pool.gpu_profile()], config.gpu_operator)
        resource = pool_gpu_resource(pool, config.gpu_operator)
    except ValueError:
        return []  # the pool's own problem (`_node_pool_problems`, `_gpu_sharing_problems`) says why
    if resource is None:
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
    """The chart version must be of the series the values are built for (the model checks only its form), and
    `extraValues` must not turn CDI off while AL2023 GPU pools exist: their nodes ignore
    `NVIDIA_VISIBLE_DEVICES` from unprivileged pods (`components/node_user_data.py`), so GPU pods get their
    GPUs only as CDI devices."""
    cdi = config.gpu_operator.extra_values.get("cdi")
    if isinstance(cdi, dict) and cdi.get("enabled") is False:
        al2023 = [p.name for p in config.gpu_pools if p.ami_family == "al2023"]
        if al2023:
            return [
                ConfigProblem(
                    f"{PROJECT}:gpuOperator.extraValues.cdi.enabled",
                    f"CDI must stay on with AL2023 GPU pools ({', '.join(al2023)}): their nodes ignore "
                    "NVIDIA_VISIBLE_DEVICES from unprivileged pods, so without CDI devices no GPU pod would "
                    "get a GPU; remove the override",
                    False,
                    True,
                )
            ]
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


def _observability_problems(config: StackConfig) -> list[ConfigProblem]:
    """The section's own cross-key checks, and the DCGM exporter's ServiceMonitor, which needs the Prometheus
    Operator CRDs that only an observability backend installs."""
    observability = config.observability
    problems = [
        ConfigProblem(config_key(("observability", *path)), message, value, value is not None)
        for path, message, value in observability.problems()
    ]
    topic = observability.alerting.sns_topic if observability.alerting else None
    if topic not in (None, "create") and topic.split(":")[1:4:2] != [config.partition, config.region]:
        problems.append(
            ConfigProblem(
                config_key(("observability", "alerting", "snsTopic")),
                f"is a topic outside this stack's partition and region ({config.partition}, "
                f"{config.region}): Amazon Managed Service for Prometheus publishes only to topics of its "
                "own account and region; use a topic there, or create",
                topic,
                True,
            )
        )
    if config.gpu_operator.dcgm_exporter.service_monitor and not config.observability.enabled:
        problems.append(
            ConfigProblem(
                f"{PROJECT}:gpuOperator.dcgmExporter.serviceMonitor",
                "needs the Prometheus Operator CRDs, which only an observability backend installs: set "
                "gpu-eks:observability.backend to inCluster or managed, or leave serviceMonitor unset",
                True,
                True,
            )
        )
    return problems


def _production_alerting_problems(config: StackConfig) -> list[ConfigProblem]:
    """A production stack's alerts must reach a person, and their absence be noticed (run for production
    stacks only): a receiver someone is known to read, and a heartbeat check for the Watchdog."""
    observability = config.observability
    alerting = observability.alerting
    if alerting is None:
        what = (
            "has no alert receiver, so no alert reaches anyone"
            if observability.enabled
            else "has no observability backend, so nothing alerts anyone"
        )
        return [
            ConfigProblem(
                config_key(("observability", "alerting" if observability.enabled else "backend")),
                f"{what}: this is a production stack (policy/policy-config.json productionStacks). Set "
                "backend to managed with alerting.snsTopic (create, or an SNS topic ARN), or to inCluster "
                "with alerting.receiverSecret and alerting.critical (docs/observability.md#alert-routing)",
                observability.backend if not observability.enabled else None,
                not observability.enabled,
            )
        ]
    problems = []
    # inCluster receivers are PagerDuty, Opsgenie or Slack, with receiverSecret and critical required: they
    # reach whoever owns the credential. An SNS topic reaches only its subscribers.
    topic = alerting.sns_topic
    if topic is not None and not alerting.email_subscriptions and alerting.subscribed_by is None:
        accepted = (
            "alerting.emailSubscriptions (addresses subscribed by this stack) or alerting.subscribedBy"
            if topic == "create"
            else "alerting.subscribedBy"
        )
        problems.append(
            ConfigProblem(
                config_key(("observability", "alerting", "snsTopic")),
                "has no subscriber this stack knows of, so its alerts may reach nobody: this is a production "
                f"stack (policy/policy-config.json productionStacks). Set {accepted} (who receives them "
                "through a subscription made elsewhere, e.g. 'PagerDuty service ml-platform via its SNS "
                "integration') (docs/observability.md#alert-routing)",
                topic,
                True,
            )
        )
    if alerting.heartbeat_url is None:
        problems.append(
            ConfigProblem(
                config_key(("observability", "alerting", "heartbeatUrl")),
                "is required on a production stack (policy/policy-config.json productionStacks): without it "
                "the Watchdog goes to no receiver, so nobody notices when alerting itself stops. Set the "
                "https:// URL of a heartbeat check (healthchecks.io, Dead Man's Snitch, Better Stack) that "
                "pages when the Watchdog stops arriving (docs/observability.md#alert-routing)",
                None,
                True,
            )
        )
    return problems


def _cross_section_problems(config: StackConfig, production: bool) -> list[ConfigProblem]:
    """Checks that span sections; each names the key to change. Every check returns its problems; a fact
    that refuses the configuration by raising (a `ValueError` from `facts/` or a component's translation)
    becomes a problem of the check's section too, so the user sees it listed, never as a traceback."""
    problems: list[ConfigProblem] = []
    checks = CROSS_SECTION_CHECKS + (PRODUCTION_CHECKS if production else ())
    for section, check in checks:
        after = CHECKED_AFTER.get(check)
        if after is not None and any(p.key.startswith(section_key(after)) for p in problems):
            continue
        try:
            found = check(config)
        except ValueError as exc:
            found = [ConfigProblem(section_key(section), str(exc))]
        problems += found
    return problems


def _cost_problems(config: StackConfig) -> list[ConfigProblem]:
    """The `cost` section's own cross-key checks."""
    return [
        ConfigProblem(config_key(("cost", *path)), message, value, True)
        for path, message, value in config.cost.problems()
    ]


def _cost_cap_problems(config: StackConfig) -> list[ConfigProblem]:
    """The pools' worst case (`pools.cost`) must stay at or below `cost.maxWorstCaseUsdPerHour` (run once the
    pools themselves are valid: `CHECKED_AFTER`)."""
    cap = config.cost.max_worst_case_usd_per_hour
    if cap is None:
        return []
    cost = stack_cost(config.node_pools, config.gpu_operator, overlays=config.karpenter.gpu_sharing_overlays)
    key = config_key(("cost", "maxWorstCaseUsdPerHour"))
    unknowable = [
        f"{p.pool} may launch "
        + (
            f"any number of {', '.join(p.spend.unbounded_by)} (they count against none of its limits: "
            "set limits.cpu or limits.memory)"
            if p.spend.unbounded_by
            else f"{', '.join(p.spend.unpriced)}, which the price table has no price for (leave them out "
            "with instanceTypes or instanceFamilies)"
        )
        for p in cost.pools
        if p.spend.unbounded_by or p.spend.unpriced
    ]
    if unknowable:
        return [
            ConfigProblem(
                key,
                f"caps the node pools at ${cap}/h, but their worst case cannot be bounded: "
                f"{'; '.join(unknowable)}; or remove the cap",
                as_written(cap),
                True,
            )
        ]
    # Where the search stopped before proving its optimum, the proven bound decides: a cap must hold.
    worst, shown = worst_cases(p.spend for p in cost.pools)
    if worst <= cap:
        return []
    return [
        ConfigProblem(
            key,
            f"caps the node pools at ${cap:,}/h, but at their limits they may run ${worst:,.2f}/h at once "
            f"(${worst * HOURS_PER_MONTH:,.0f} a {HOURS_PER_MONTH}-hour month, at us-east-1 on-demand list "
            f"price): {shown}. Lower those pools' limits (nvidia.com/gpu, cpu, memory), or raise the cap "
            f"to at least {worst.quantize(Decimal('0.01'), rounding=ROUND_CEILING)}; `python -m synth cost` "
            "shows each pool",
            as_written(cap),
            True,
        ),
    ]


def _cluster_problems(config: StackConfig) -> list[ConfigProblem]:
    return (
        [
            ConfigProblem(config_key(("cluster", *path)), message, value, True)
            for path, message, value in config.cluster.problems()
        ]
        + _node_api_access_problems(config)
        + _role_partition_problems(config)
    )


def _nodes_outside_public_allow_list(config: StackConfig) -> bool:
    """Nodes would use the public endpoint (no private one) and its allow list is not open to all: they
    reach it from the VPC's NAT addresses, which the list then has to hold."""
    endpoint = config.cluster.endpoint
    return not endpoint.private_access and "0.0.0.0/0" not in endpoint.public_access_cidrs


def _node_api_access_problems(config: StackConfig) -> list[ConfigProblem]:
    """In a VPC this stack creates, the NAT addresses exist only once it has run: no allow list can name
    them, so no node (system or GPU) would ever join."""
    if config.network.existing is not None or not _nodes_outside_public_allow_list(config):
        return []
    cidrs = ", ".join(config.cluster.endpoint.public_access_cidrs)
    return [
        ConfigProblem(
            f"{PROJECT}:cluster.endpoint.privateAccess",
            f"is false while publicAccessCidrs admits only {cidrs}: the nodes would reach the API through "
            "the public endpoint from the NAT gateways' addresses, which this stack creates and the list "
            "cannot hold, so no node would join. Set privateAccess: true (nodes then reach the API inside "
            "the VPC; publicAccessCidrs still limits who reaches it from outside), or open "
            "publicAccessCidrs to 0.0.0.0/0",
            False,
            True,
        )
    ]


def _access_entry_roles(config: StackConfig) -> list[tuple[tuple[str | int, ...], str | None]]:
    """(config path, ARN) of every role the config gives an access entry."""
    cluster = config.cluster
    return [
        *((("cluster", "adminRoleArns", index), arn) for index, arn in enumerate(cluster.admin_role_arns)),
        (("cluster", "automation", "previewRoleArn"), cluster.automation.preview_role_arn),
        (("cluster", "automation", "deployRoleArn"), cluster.automation.deploy_role_arn),
        *(
            (("teams", team_index, "roleArns", index), arn)
            for team_index, team in enumerate(config.teams)
            for index, arn in enumerate(team.role_arns)
        ),
    ]


def _role_partition_problems(config: StackConfig) -> list[ConfigProblem]:
    """Every role given an access entry must be of the region's partition: IAM principals never cross
    partitions, so a role of another one could never sign in, and its access entry fails after the cluster
    exists."""
    problems = []
    for path, arn in _access_entry_roles(config):
        if arn is None:
            continue
        partition = partition_of_arn(arn, argument=config_key(path))
        if partition != config.partition:
            problems.append(
                ConfigProblem(
                    config_key(path),
                    f"is a role of the {partition} partition, but aws:region {config.region} is in "
                    f"{config.partition}: roles never cross partitions, so it could never sign in to this "
                    f"cluster; use a role ARN of the form arn:{config.partition}:iam::<account>:role/<name>",
                    arn,
                    True,
                )
            )
    return problems


def _used_namespaces(config: StackConfig) -> dict[str, str]:
    """Namespace -> who uses it: the cluster's own, and those of what this configuration installs (each
    with the key that names it), so no team's namespace is shared with them."""
    used = dict.fromkeys(SYSTEM_NAMESPACES, "a namespace every Kubernetes cluster has")
    installed: list[tuple[bool, tuple[str, ...], str, str]] = [
        (
            bool(config.smoke_test.enabled),
            ("smokeTest", "namespace"),
            config.smoke_test.namespace,
            "the smoke test",
        ),
        (
            bool(config.gpu_pools),
            ("gpuNodeGuard", "namespace"),
            config.gpu_node_guard.namespace,
            "the GPU node guard",
        ),
        (
            config.observability.enabled,
            ("observability", "namespace"),
            config.observability.namespace,
            "observability",
        ),
        (True, ("gpuOperator", "namespace"), config.gpu_operator.namespace, "the GPU Operator"),
        (True, ("karpenter", "namespace"), config.karpenter.namespace, "Karpenter"),
    ]
    for installs, path, namespace, what in installed:
        if installs:
            used.setdefault(namespace, f"the namespace of {what} ({config_key(path)})")
    return used


def _team_problems(config: StackConfig) -> list[ConfigProblem]:
    """Team names are unique namespaces of their own; their roles have no other access entry (admins and
    automation roles are cluster-admin already, and EKS allows one entry per principal)."""
    problems = []
    used = _used_namespaces(config)
    seen: dict[str, int] = {}
    # The cluster-admin roles: the admins' and the automation roles' entries.
    elsewhere = {
        arn: config_key(path)
        for path, arn in _access_entry_roles(config)
        if path[0] == "cluster" and arn is not None
    }
    for index, team in enumerate(config.teams):
        key = config_key(("teams", index, "name"))
        if team.name in seen:
            problems.append(
                ConfigProblem(
                    key,
                    f"is already the name of teams[{seen[team.name]}]; team names must be unique",
                    team.name,
                    True,
                )
            )
        seen.setdefault(team.name, index)
        if team.name in used or team.name.startswith(RESERVED_NAMESPACE_PREFIX):
            why = used.get(team.name, "a name Kubernetes reserves for its own namespaces (kube-*)")
            problems.append(
                ConfigProblem(
                    key,
                    f"is {why}; a team's namespace must be its own: choose another name",
                    team.name,
                    True,
                )
            )
        for role_index, arn in enumerate(team.role_arns):
            if arn in elsewhere:
                problems.append(
                    ConfigProblem(
                        config_key(("teams", index, "roleArns", role_index)),
                        f"is also listed as {elsewhere[arn]}, hence cluster-admin already, and EKS allows "
                        "one access entry per role: list it in one place only (in the team, to narrow its "
                        "access)",
                        arn,
                        True,
                    )
                )
    return problems


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


@dataclass(frozen=True)
class _SystemWorkload:
    """Pods that must run on the system nodes."""

    pod: PodRequests
    replicas: int = 1
    keys: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Resource -> (config key, value as written) of the requests the stack sets; without one, the system
    nodes' instance type is what to change."""


def _set_keys(section: tuple[str, ...], settings: ConfigModel, fields: Mapping[str, str]) -> dict[str, Any]:
    """(key, value) of the settings' `fields` (resource -> field) that the stack file sets."""
    return {
        resource: (
            config_key((*section, type(settings).model_fields[name].alias or name)),
            getattr(settings, name),
        )
        for resource, name in fields.items()
        if name in settings.model_fields_set
    }


def _system_workloads(config: StackConfig) -> list[_SystemWorkload]:
    """What runs on the system node group: the Karpenter controller (one replica per node), the GPU
    Operator's controller and NFD (always installed), the GPU node guard (with GPU pools) and Prometheus (with
    an observability backend)."""
    karpenter = config.karpenter.controller_resources
    requests = {"cpu": "cpu", "memory": "memory"}
    workloads = [
        _SystemWorkload(
            PodRequests.of("the Karpenter controller", karpenter.cpu, karpenter.memory),
            # More replicas than minSize are refused by `_karpenter_replicas_problems` already.
            min(config.karpenter.replicas, config.cluster.system_nodes.min_size),
            _set_keys(("karpenter", "controllerResources"), karpenter, requests),
        ),
        *(_SystemWorkload(pod) for pod in SYSTEM_DEPLOYMENTS),
        *([_SystemWorkload(GPU_NODE_GUARD, replicas=GUARD_REPLICAS)] if config.gpu_pools else []),
    ]
    if config.observability.enabled:
        prometheus = config.observability.prometheus
        workloads.append(
            _SystemWorkload(
                PodRequests.of("Prometheus", prometheus.cpu, prometheus.memory),
                keys=_set_keys(("observability", "prometheus"), prometheus, requests),
            )
        )
    return workloads


def _quantity(value: Decimal, resource: str) -> str:
    """`1.93` cores -> `1930m`, bytes -> `6903Mi`: as `kubectl describe node` shows allocatable."""
    return f"{value * 1000:.0f}m" if resource == "cpu" else f"{value / 1024**2:.0f}Mi"


def _system_node_problems(config: StackConfig) -> list[ConfigProblem]:
    """Every pod that must run on the system nodes fits on the smallest of their instance types (its
    allocatable from `facts.instance_types`, less the DaemonSet pod every node runs), and together they fit
    on the group at its minimum size. Instance types outside the Karpenter reference are not checked."""
    nodes = config.cluster.system_nodes
    known = [(i, instance_types()[t]) for i, t in enumerate(nodes.instance_types) if t in instance_types()]
    if not known:
        return []
    workloads = _system_workloads(config)
    problems = []
    room: dict[str, Decimal] = {}
    for resource in ("cpu", "memory"):
        index, smallest = min(known, key=lambda item: getattr(item[1], resource))
        allocatable = getattr(smallest, resource)
        room[resource] = allocatable - getattr(NFD_WORKER, resource)
        for workload in workloads:
            need = getattr(workload.pod, resource)
            if need <= room[resource]:
                continue
            key, value = workload.keys.get(
                resource, (config_key(("cluster", "systemNodes", "instanceTypes", index)), smallest.name)
            )
            problems.append(
                ConfigProblem(
                    key,
                    f"{workload.pod.workload} requests {_quantity(need, resource)} of {resource}, more "
                    f"than a {smallest.name} system node can give it ({_quantity(allocatable, resource)} "
                    f"allocatable, {_quantity(room[resource], resource)} after {NFD_WORKER.workload} every "
                    "node runs), so it would stay Pending; "
                    + ("lower it, or choose " if resource in workload.keys else "choose ")
                    + "larger gpu-eks:cluster.systemNodes.instanceTypes",
                    value,
                    True,
                )
            )
    if problems:
        return problems
    for resource in ("cpu", "memory"):
        total = sum((getattr(w.pod, resource) * w.replicas for w in workloads), Decimal(0))
        if total <= room[resource] * nodes.min_size:
            continue
        listed = ", ".join(
            f"{w.pod.workload} {_quantity(getattr(w.pod, resource), resource)}"
            + (f" x {w.replicas}" if w.replicas > 1 else "")
            for w in workloads
        )
        capacity = _quantity(room[resource] * nodes.min_size, resource)
        problems.append(
            ConfigProblem(
                config_key(("cluster", "systemNodes", "minSize")),
                f"{nodes.min_size} system nodes can give {capacity} of {resource} to what must run there "
                f"({listed}: {_quantity(total, resource)}), before counting CoreDNS and the EKS add-ons; "
                "raise minSize or choose larger instanceTypes",
                nodes.min_size,
                True,
            )
        )
    return problems


CROSS_SECTION_CHECKS: tuple[tuple[str, Callable[[StackConfig], list[ConfigProblem]]], ...] = (
    ("cluster", _cluster_problems),
    ("karpenter", _karpenter_replicas_problems),
    ("cluster", _system_node_problems),
    ("gpuOperator", _gpu_operator_problems),
    ("observability", _observability_problems),
    ("nodePools", _node_pool_problems),
    ("smokeTest", _smoke_test_problems),
    ("teams", _team_problems),
    ("cost", _cost_problems),
    ("cost", _cost_cap_problems),
)
"""The cross-section checks, each with the section its problems belong to, in the order they are listed."""
CHECKED_AFTER: Mapping[Callable[[StackConfig], list[ConfigProblem]], str] = {_cost_cap_problems: "nodePools"}
"""Checks that run only when an earlier section has no problem: the cap prices valid pools only."""
PRODUCTION_CHECKS: tuple[tuple[str, Callable[[StackConfig], list[ConfigProblem]]], ...] = (
    ("observability", _production_alerting_problems),
)
"""What production stacks are held to besides (policy/policy-config.json `productionStacks`)."""


def parse_stack_config(
    raw: Mapping[str, Any],
    secret_keys: frozenset[str] = frozenset(),
    *,
    operation: Operation = "preview",
    production: bool = False,
) -> StackConfig:
    """Validate raw config (full key -> value as Pulumi stores it: JSON text for objects) for `operation`:
    an `up` also refuses the documentation placeholders a preview only warns about. `production`: the stack is
    one the policy pack treats as production (its alerts must reach someone).

    Raises `ConfigError` listing every problem, each with the full config key.
    """
    problems: list[ConfigProblem] = []
    sections: dict[str, Any] = {}
    for key, value in sorted(raw.items()):
        if key not in SECTIONS:
            problem = _key_problem(key, value, key in secret_keys)
            if problem is not None:
                problems.append(problem)
        elif key.startswith("aws:") or not isinstance(value, str):
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
    problems.extend(_cross_section_problems(config, production))
    if operation == "up":
        problems.extend(
            replace(p, message=f"{p.message}; pulumi preview only warns, pulumi up refuses it")
            for p in _placeholders(config)
        )
    if problems:
        raise ConfigError(problems)
    return _with_overlay_gate(config)


def zone_problems(config: StackConfig, vpc_zones: Sequence[str]) -> list[ConfigProblem]:
    """Pools pinned to a zone the VPC the stack creates does not span (known once the region's zones are
    looked up, still before any resource): nothing there for Karpenter to launch into."""
    if config.network.existing is not None:
        return []
    return [
        ConfigProblem(
            f"{PROJECT}:nodePools[{index}].zone",
            f"the VPC this stack creates spans {', '.join(vpc_zones)} (network.availabilityZones: "
            f"{config.network.availability_zones}, the first of the region's zones in order); choose one of "
            "them",
            pool.zone,
            True,
        )
        for index, pool in enumerate(config.node_pools)
        if pool.zone is not None and pool.zone not in vpc_zones
    ]


def load_stack_config() -> StackConfig:
    """Read this stack's Pulumi config and validate it (see `parse_stack_config`) for the operation the
    program runs for (`config.operation`)."""
    raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = frozenset(runtime_config._SECRET_KEYS.get())
    config = parse_stack_config(
        raw,
        secret_keys,
        operation=current_operation(),
        production=pulumi.get_stack() in production_stacks(),
    )
    for warning in config_warnings(config):
        pulumi.log.warn(warning)
    return config
