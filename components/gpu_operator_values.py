"""Helm values for the NVIDIA GPU Operator chart v26.7, derived from the GPU node pools (pure; no Pulumi).

Two entry points for the rest of the program:

* `gpu_operator_values(pools, ...)`: the values of the `gpu-operator` release.
* `pool_node_labels(pool)`: labels the pool's NodePool must put on its nodes (`spec.template.metadata.labels`)
  so that the operator treats them as these values assume: operands off on Bottlerocket, the time-slicing
  entry of the device plugin, the MIG partitioning.

`validate_gpu_pools(pools, config)` runs every check of `gpu_operator_values` without building values, for
config validation. `advertised_gpu_resources(pool, config, instance_type)` says what the device plugin will
advertise on a node of the pool (whole GPUs, time-slices, MIG devices), for Karpenter's NodeOverlays.
Errors are `GpuOperatorValuesError` (a `ValueError`) subclasses naming the pools.

How the operator is made to serve mixed pools: global switches (`driver.enabled`, ...) cover what the AL2023
pools need, and Bottlerocket nodes are labelled `nvidia.com/gpu.deploy.operands=false`, which keeps every
operand off them. The per-operand labels (`nvidia.com/gpu.deploy.device-plugin=false`, ...) cannot do that:
the operator deletes them from every node NFD has not yet labelled as a GPU node, that is from every new node,
and then sets them to `true` (see `facts.gpu_operator.DEPLOY_OPERANDS_LABEL`). Bottlerocket nodes therefore
run Bottlerocket's own device plugin and no operator operand at all: no validator (it cannot find
Bottlerocket's nvidia-smi), no GPU Feature Discovery labels, no DCGM exporter metrics."""

import copy
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from components import yaml_text
from config.gpu_operator import MIG_ALL_DISABLED, GpuOperatorConfig, MigDeviceGroup
from config.kubernetes import Taint
from config.types import KubernetesName
from facts.gpu_operator import (
    DEPLOY_OPERANDS_LABEL,
    MIG_MANAGER_BINARY,
    MIG_MANAGER_DRIVER_READY,
    MIG_MANAGER_SHUTDOWN_ENV,
)
from facts.instance_types import (
    MIG_CAPABLE_GPUS,
    GpuInstanceType,
    MigNotSupportedError,
    UnknownInstanceTypeError,
    candidate_instance_types,
    check_mig_capable,
    mig_capable_instance_types,
)
from facts.mig import MIG_BASE_PROFILES, MIG_PROFILE_INSTANCES, balanced_mig_devices

__all__ = [
    "CDI_MIN_KUBERNETES_VERSION",
    "CHART_DAEMONSETS_TOLERATIONS",
    "CHART_NFD_GC_TOLERATIONS",
    "CHART_NFD_MASTER_TOLERATIONS",
    "CHART_NFD_WORKER_TOLERATIONS",
    "CHART_OPERATOR_TOLERATIONS",
    "DCGM_NODE_RELABELING",
    "DEPLOY_OPERANDS_LABEL",
    "DEVICE_PLUGIN_CONFIGMAP",
    "DEVICE_PLUGIN_CONFIG_LABEL",
    "DEVICE_PLUGIN_DEFAULT_CONFIG",
    "MIG_CAPABLE_GPUS",
    "MIG_CONFIG_LABEL",
    "MIG_MANAGER_ENTRYPOINT",
    "MIG_PARTED_CONFIGMAP",
    "NVIDIA_GPU",
    "SUPPORTED_CHART_SERIES",
    "TIME_SLICING_REPLICAS",
    "GpuInstanceType",
    "GpuOperatorValuesError",
    "GpuPoolProfile",
    "MigNotSupportedError",
    "MigProfileError",
    "UnknownInstanceTypeError",
    "UnsupportedPoolError",
    "advertised_gpu_resources",
    "candidate_instance_types",
    "check_mig_capable",
    "deep_merge",
    "gpu_operator_values",
    "mig_capable_instance_types",
    "mig_devices_per_gpu",
    "mig_resource_name",
    "nfd_worker_tolerations",
    "operand_tolerations",
    "pool_node_labels",
    "time_slicing_config_name",
    "tolerates",
    "validate_gpu_pools",
]

SUPPORTED_CHART_SERIES = "v26.7"
"""Chart minor series these values are written and tested against (keys checked against its values.yaml)."""

CDI_MIN_KUBERNETES_VERSION = (1, 32)
"""From this Kubernetes minor on, CDI is turned on for pools served by the operator's device plugin
(EKS AL2023 nodes: kubelet with CDI devices in the device-plugin API and a containerd that reads CDI specs).
Below it the device plugin keeps the `envvar` device list and the AMI's nvidia runtime injects GPUs."""

TIME_SLICING_REPLICAS = range(2, 65)
"""Time-slices per GPU a pool may ask for. The device-plugin ConfigMap has an entry for every one of them, so
changing a pool's `timeSlicing.replicas` never removes the entry its running nodes still select: those keep
working until Karpenter replaces them (the NodePool's label changed, so they drift)."""
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
"""Node label the device plugin's config-manager reads to pick an entry of `devicePlugin.config.data`."""
MIG_MANAGER_ENTRYPOINT = f"""until [ -f {MIG_MANAGER_DRIVER_READY} ]; do
  echo "waiting for the driver validations to be ready..."
  sleep 5
done
set -o allexport
. {MIG_MANAGER_DRIVER_READY}
# gpu-eks: never stop and restart the host's kubelet around a MIG mode change (NVIDIA/gpu-operator#2415:
# AL2023 nodes stay NotReady). A mode change the held GPUs refuse in place reboots the node (WITH_REBOOT).
export {MIG_MANAGER_SHUTDOWN_ENV}=false
echo "{MIG_MANAGER_SHUTDOWN_ENV}=${MIG_MANAGER_SHUTDOWN_ENV}"
exec {MIG_MANAGER_BINARY}
"""
"""The MIG manager container's script (chart value `migManager.args`, run by the container's
`/bin/sh -c`): the operator's own entrypoint but for the one line that would set
`WITH_SHUTDOWN_HOST_GPU_CLIENTS` to `IS_HOST_DRIVER` (true on the AMI's preinstalled driver). See
`facts.gpu_operator.MIG_MANAGER_SHUTDOWN_ENV`."""

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
"""Node label the MIG manager reads to pick a mig-parted config."""

DEVICE_PLUGIN_CONFIGMAP = "gpu-eks-device-plugin-config"
"""ConfigMap the chart creates with the device-plugin configs (whenever the operator's device plugin runs)."""
DEVICE_PLUGIN_DEFAULT_CONFIG = "default"
"""Entry used by nodes without `nvidia.com/device-plugin.config`: plain GPUs, no sharing."""
MIG_PARTED_CONFIGMAP = "gpu-eks-mig-parted-config"
"""ConfigMap the chart creates with the custom mig-parted configs (only with `mig.config` set)."""

DCGM_NODE_RELABELING: Mapping[str, Any] = {
    "sourceLabels": ["__meta_kubernetes_pod_node_name"],
    "targetLabel": "node",
    "action": "replace",
}
"""Relabeling of the DCGM exporter's ServiceMonitor: the exporter's own labels name the GPU, not the node
it is on, and a ServiceMonitor adds no `node` label; this one adds the node name of the exporter pod."""

_CONTROL_PLANE_TOLERATION = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Equal",
    "value": "",
    "effect": "NoSchedule",
}
_GPU_EXISTS_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

CHART_DAEMONSETS_TOLERATIONS: tuple[Mapping[str, str], ...] = (_GPU_EXISTS_TOLERATION,)
"""Chart default of `daemonsets.tolerations` (all operands); kept at the head of the derived list."""
CHART_NFD_WORKER_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    _CONTROL_PLANE_TOLERATION,
    _GPU_EXISTS_TOLERATION,
)
"""The gpu-operator chart's `node-feature-discovery.worker.tolerations` (overrides the subchart's `[]`)."""
CHART_OPERATOR_TOLERATIONS: tuple[Mapping[str, str], ...] = (_CONTROL_PLANE_TOLERATION,)
"""Chart default of `operator.tolerations`."""
CHART_NFD_MASTER_TOLERATIONS: tuple[Mapping[str, str], ...] = (_CONTROL_PLANE_TOLERATION,)
"""NFD subchart default of `master.tolerations` (the gpu-operator chart does not override it)."""
CHART_NFD_GC_TOLERATIONS: tuple[Mapping[str, str], ...] = ()
"""NFD subchart default of `gc.tolerations`."""

AmiFamily = Literal["al2023", "bottlerocket"]

_GENERATED_ALL_PROFILE = re.compile(r"all-(?P<g>[1-8])g\.(?P<gb>[0-9]+)gb(?P<attrs>([.-][a-z][a-z0-9]*)*)")
_PROFILE_BASE = re.compile(r"(?P<g>[1-8])g\.(?P<gb>[0-9]+)gb")
_MIG_ALL_BALANCED = "all-balanced"
_MIG_ALL_ENABLED = "all-enabled"


class GpuOperatorValuesError(ValueError):
    """GPU pools or settings that the GPU Operator cannot serve as asked."""


class UnsupportedPoolError(GpuOperatorValuesError):
    """A pool asks the operator for something its AMI family or the driver mode rules out."""


class MigProfileError(GpuOperatorValuesError):
    """A MIG profile that the pool's GPUs or the MIG strategy cannot provide."""


class GpuPoolProfile(BaseModel):
    """What the GPU Operator must know about one GPU NodePool; the node-pool code maps its config onto it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: KubernetesName
    """NodePool name; used in error messages only."""
    ami_family: AmiFamily
    """`al2023` (EKS AL2023 NVIDIA AMI: driver and toolkit preinstalled) or `bottlerocket` (Bottlerocket
    NVIDIA variant: driver, toolkit, device plugin and MIG handling built in)."""
    taints: tuple[Taint, ...] = ()
    """Taints of the pool's nodes (`spec.template.spec.taints`); every operand must tolerate them."""
    startup_taints: tuple[Taint, ...] = ()
    """Startup taints (`spec.template.spec.startupTaints`); tolerated too, or the GPU never registers."""
    instance_types: tuple[str, ...] = ()
    """`node.kubernetes.io/instance-type In` values of the pool, if it restricts them."""
    instance_families: tuple[str, ...] = ()
    """`karpenter.k8s.aws/instance-family In` values, if any."""
    gpu_names: tuple[str, ...] = ()
    """`karpenter.k8s.aws/instance-gpu-name In` values, if any (`a100`, `h100`, ...)."""
    time_slicing_replicas: int | None = Field(
        default=None, ge=TIME_SLICING_REPLICAS.start, le=TIME_SLICING_REPLICAS.stop - 1
    )
    """Time-slice each GPU into this many `nvidia.com/gpu` (None: no sharing)."""
    mig_profile: str | None = None
    """mig-parted config name for the pool's nodes (`all-1g.10gb`, `all-balanced`, a custom config name);
    None leaves MIG off (the operator labels MIG-capable nodes `all-disabled`)."""


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    """Whether any toleration tolerates the taint, with Kubernetes' `ToleratesTaint` semantics.

    An empty effect matches every effect; an empty key (with `Exists`) every key; `Exists` any value;
    `Equal` (or no operator) the exact value, a taint without value counting as `""`.
    """
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        key = toleration.get("key") or ""
        if key and key != taint.key:
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists":
            return True
        if operator == "Equal" and (toleration.get("value") or "") == (taint.value or ""):
            return True
    return False


def _all_taints(pools: Iterable[GpuPoolProfile]) -> list[Taint]:
    unique = {(t.key, t.value, t.effect): t for p in pools for t in (*p.taints, *p.startup_taints)}
    # Taints without value (tolerated with Exists) first, so an Exists toleration covers the valued ones.
    return sorted(unique.values(), key=lambda t: (t.key, t.effect, t.value is not None, t.value or ""))


def _tolerating(
    defaults: Iterable[Mapping[str, Any]], pools: Iterable[GpuPoolProfile]
) -> list[dict[str, Any]]:
    result = [dict(t) for t in defaults]
    for taint in _all_taints(pools):
        if not tolerates(result, taint):
            result.append(taint.toleration())
    return result


def operand_tolerations(pools: Iterable[GpuPoolProfile]) -> list[dict[str, Any]]:
    """`daemonsets.tolerations`: the chart default, then one toleration per pool taint or startup taint
    not already tolerated, sorted by key, effect and value. The list replaces the chart default in Helm."""
    return _tolerating(CHART_DAEMONSETS_TOLERATIONS, pools)


def nfd_worker_tolerations(pools: Iterable[GpuPoolProfile]) -> list[dict[str, Any]]:
    """`node-feature-discovery.worker.tolerations`, built like `operand_tolerations` on the chart's list."""
    return _tolerating(CHART_NFD_WORKER_TOLERATIONS, pools)


def _with_extra(
    defaults: Iterable[Mapping[str, Any]], extra: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    result = [dict(t) for t in defaults]
    for toleration in extra:
        if dict(toleration) not in result:
            result.append(dict(toleration))
    return result


def time_slicing_config_name(replicas: int) -> str:
    """Name of the device-plugin config entry (and node label value) for N time-slices per GPU."""
    return f"time-slicing-{replicas}"


def pool_node_labels(pool: GpuPoolProfile) -> dict[str, str]:
    """Labels the pool's NodePool must carry (`spec.template.metadata.labels`), sorted by key.

    * Bottlerocket: `nvidia.com/gpu.deploy.operands=false`, so no operator operand runs there even when other
      pools need them (the validator could not finish on Bottlerocket, and every operand waits for it).
    * Time-slicing: `nvidia.com/device-plugin.config=time-slicing-<N>`, the entry `gpu_operator_values` adds.
    * MIG: `nvidia.com/mig.config=<profile>`.

    Raises `UnsupportedPoolError` for settings the operator cannot serve on the pool's AMI family; the checks
    that need the operator config (MIG profile names, driver mode) are in `validate_gpu_pools`.
    """
    _check_pool_family(pool)
    labels: dict[str, str] = {}
    if pool.ami_family == "bottlerocket":
        labels[DEPLOY_OPERANDS_LABEL] = "false"
    if pool.time_slicing_replicas is not None:
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = time_slicing_config_name(pool.time_slicing_replicas)
    if pool.mig_profile is not None:
        labels[MIG_CONFIG_LABEL] = pool.mig_profile
    return dict(sorted(labels.items()))


def _check_pool_family(pool: GpuPoolProfile) -> None:
    if pool.ami_family != "bottlerocket":
        return
    if pool.time_slicing_replicas is not None:
        raise UnsupportedPoolError(
            f"GPU pool {pool.name!r} (bottlerocket) asks for time-slicing, but Bottlerocket runs its own "
            "device plugin, which the GPU Operator does not configure. Set it in the EC2NodeClass user data "
            "(settings.kubelet-device-plugins.nvidia.device-sharing-strategy and time-slicing replicas) or "
            "use al2023 for this pool"
        )
    if pool.mig_profile is not None:
        raise UnsupportedPoolError(
            f"GPU pool {pool.name!r} (bottlerocket) asks for MIG profile {pool.mig_profile!r}, but "
            "Bottlerocket partitions GPUs itself and the GPU Operator's MIG manager does not run there. "
            "Set it in the EC2NodeClass user data "
            "(settings.kubelet-device-plugins.nvidia.device-partitioning-strategy) or use al2023 for this "
            "pool"
        )


def _custom_mig_configs(config: GpuOperatorConfig) -> dict[str, tuple[MigDeviceGroup, ...]] | None:
    """The custom mig-parted configs, with `all-disabled` added when missing (the operator's fallback)."""
    custom = config.mig.config
    if custom is None:
        return None
    if MIG_ALL_DISABLED in custom:
        return dict(custom)
    return {MIG_ALL_DISABLED: (MigDeviceGroup.model_validate({"mig-enabled": False}),), **custom}


def _profile_problem(base: tuple[int, int], candidates: Sequence[GpuInstanceType]) -> str | None:
    """Why a base MIG profile (slices, GB) is not offered by some candidate's GPU, or None."""
    for it in candidates:
        offered = MIG_BASE_PROFILES.get((it.gpu_name, it.gpu_memory_mib))
        if offered is not None and base not in offered:
            names = ", ".join(f"all-{g}g.{gb}gb" for g, gb in sorted(offered))
            return (
                f"{it.name} has {it.gpu_name} GPUs with {it.gpu_memory_mib} MiB, whose generated configs are "
                f"all-disabled, all-balanced and {names} (optionally with an attribute suffix such as .me)"
            )
    return None


def _check_mig(pool: GpuPoolProfile, config: GpuOperatorConfig) -> None:
    profile = pool.mig_profile
    if profile is None:
        return
    candidates = check_mig_capable(
        pool.name,
        instance_types=pool.instance_types,
        instance_families=pool.instance_families,
        gpu_names=pool.gpu_names,
    )
    strategy = config.mig.strategy
    where = f"GPU pool {pool.name!r}: MIG profile {profile!r}"
    if pool.time_slicing_replicas is not None and strategy == "mixed":
        raise MigProfileError(
            f"{where} with time-slicing needs mig.strategy single (time-slicing shares nvidia.com/gpu, which "
            "mixed strategy does not advertise for MIG devices)"
        )
    custom = _custom_mig_configs(config)
    if custom is not None:
        if profile not in custom:
            raise MigProfileError(
                f"{where} is not one of the custom configs in gpuOperator.mig.config: "
                f"{', '.join(sorted(custom))}"
            )
        profiles = {p for group in custom[profile] for p in group.mig_devices}
        if strategy == "single" and len(profiles) > 1:
            raise MigProfileError(
                f"{where} mixes MIG profiles ({', '.join(sorted(profiles))}); mig.strategy single needs one "
                "profile per node: use mig.strategy mixed or a single-profile config"
            )
        for group in custom[profile]:
            if group.device_filter is not None:
                continue
            for name in group.mig_devices:
                match = _PROFILE_BASE.match(name)  # compute-instance profiles (1c.2g.20gb) are not checked
                if match is None:
                    continue
                problem = _profile_problem((int(match["g"]), int(match["gb"])), candidates)
                if problem:
                    raise MigProfileError(f"{where} uses {name}, which its GPUs do not offer: {problem}")
        return
    if profile == MIG_ALL_DISABLED:
        return
    if profile == _MIG_ALL_ENABLED:
        raise MigProfileError(
            f"{where} turns MIG on without creating any MIG device: the node would advertise no GPU and "
            "Karpenter would never mark it initialized"
        )
    if profile == _MIG_ALL_BALANCED:
        if strategy == "single":
            raise MigProfileError(
                f"{where} creates 1g, 2g and 3g devices on each GPU, which mig.strategy single cannot "
                "advertise: set gpuOperator.mig.strategy to mixed"
            )
        return
    match = _GENERATED_ALL_PROFILE.fullmatch(profile)
    if match is None:
        raise MigProfileError(
            f"{where} is not a config the MIG manager generates (all-disabled, all-balanced or "
            "all-<profile> such as all-1g.10gb, all-3g.40gb, all-1g.10gb.me); define custom configs in "
            "gpuOperator.mig.config to use other names"
        )
    problem = _profile_problem((int(match["g"]), int(match["gb"])), candidates)
    if problem:
        raise MigProfileError(f"{where} is not offered by every instance type of the pool: {problem}")


def validate_gpu_pools(pools: Iterable[GpuPoolProfile], config: GpuOperatorConfig) -> None:
    """Every check `gpu_operator_values` makes on the pools, for config validation before any resource.

    Raises `UnsupportedPoolError`, `MigNotSupportedError`, `MigProfileError` or `UnknownInstanceTypeError`
    (all `ValueError`s), naming the pool.
    """
    pools = tuple(pools)
    names = [p.name for p in pools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise GpuOperatorValuesError(f"GPU pool names must be unique: {', '.join(duplicates)}")
    for pool in pools:
        _check_pool_family(pool)
        _check_mig(pool, config)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: `override` merged into `base`; mappings merge recursively, anything else replaces.

    A `None` in `override` is kept (Helm then drops the chart default of that key)."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _kubernetes_minor(version: str) -> tuple[int, int]:
    match = re.fullmatch(r"([0-9]+)\.([0-9]+)", version)
    if match is None:
        raise GpuOperatorValuesError(f"kubernetes_version {version!r} must be a minor version such as 1.35")
    return int(match[1]), int(match[2])


# Cached: the ConfigMap holds an entry for every replica count whatever the pools; dumping those 64 entries
# again on each call cost 12 ms a synth and 4 s of the test suite.
@functools.cache
def _device_plugin_config(strategy: str, replicas: int | None) -> str:
    document: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": strategy}}
    if replicas is not None:
        document["sharing"] = {
            "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]},
        }
    return yaml_text.dump(document, sort_keys=False)


def _mig_parted_config(configs: Mapping[str, tuple[MigDeviceGroup, ...]]) -> str:
    def group(g: MigDeviceGroup) -> dict[str, Any]:
        out: dict[str, Any] = {"devices": g.devices if g.devices == "all" else list(g.devices)}
        if g.device_filter is not None:
            out["device-filter"] = (
                g.device_filter if isinstance(g.device_filter, str) else list(g.device_filter)
            )
        out["mig-enabled"] = g.mig_enabled
        if g.mig_devices:
            out["mig-devices"] = dict(g.mig_devices)
        return out

    document = {
        "version": "v1",
        "mig-configs": {name: [group(g) for g in configs[name]] for name in sorted(configs)},
    }
    return yaml_text.dump(document, sort_keys=False)


def gpu_operator_values(
    pools: Iterable[GpuPoolProfile],
    *,
    kubernetes_version: str,
    config: GpuOperatorConfig,
    system_node_selector: Mapping[str, str],
    system_tolerations: Sequence[Mapping[str, Any]] = (),
    scraped: bool = False,
) -> dict[str, Any]:
    """Helm values of the `gpu-operator` chart (v26.7 series) for a cluster with these GPU pools.

    * Driver and container toolkit: off (both supported AMI families ship them). Device plugin and MIG
      manager: on when an al2023 pool (or no pool) needs them, off when every pool is Bottlerocket;
      Bottlerocket nodes keep every operand off by the label from `pool_node_labels`.
    * NFD on: without its PCI labels the operator deploys nothing to a node.
    * `daemonsets.tolerations` and `node-feature-discovery.worker.tolerations` (which replace the chart
      defaults) keep the defaults and add every pool taint and startup taint.
    * Operator controller, NFD master and NFD gc on `system_node_selector`, tolerating `system_tolerations`.
    * CDI on only if the operator's device plugin serves some pool and Kubernetes >= 1.32. GPU pods of AL2023
      pools get their GPUs through CDI, since the nodes ignore `NVIDIA_VISIBLE_DEVICES` from unprivileged pods
      (`components.node_user_data`).
    * DCGM exporter as `config.dcgmExporter` says; its ServiceMonitor too, or, when that is unset, exactly
      when `scraped` (a Prometheus Operator scrapes the cluster). The ServiceMonitor labels every series
      with the `node` it comes from (`DCGM_NODE_RELABELING`), which the dashboards and alerts join on.
    * Device plugin config: whenever the operator's device plugin runs, a ConfigMap with a `default` entry and
      a `time-slicing-<N>` entry for every N of `TIME_SLICING_REPLICAS`, selected by the node label from
      `pool_node_labels`; independent of the pools, so no change of a pool removes an entry nodes still use.
    * MIG: `mig.strategy`, `WITH_REBOOT=true` for the MIG manager and its entrypoint that never restarts
      kubelet (`MIG_MANAGER_ENTRYPOINT`), custom mig-parted configs if any.
    * `config.extraValues` deep-merged last.

    `kubernetes_version` is the cluster minor (`1.35`). Raises the errors of `validate_gpu_pools`, and
    `GpuOperatorValuesError` for an unsupported chart series or an empty `system_node_selector`.
    """
    pools = tuple(pools)
    if not config.version.startswith(f"{SUPPORTED_CHART_SERIES}."):
        raise GpuOperatorValuesError(
            f"gpuOperator.version {config.version} is not in the {SUPPORTED_CHART_SERIES} series these "
            "values are built and tested for; re-vendor the chart values and review gpu_operator_values first"
        )
    if not system_node_selector:
        raise GpuOperatorValuesError(
            "system_node_selector is empty: the operator controller would run anywhere"
        )
    minor = _kubernetes_minor(kubernetes_version)
    validate_gpu_pools(pools, config)

    operator_plugin = not pools or any(p.ami_family == "al2023" for p in pools)
    dcgm = config.dcgm_exporter
    service_monitor = dcgm.monitored(scraped)

    mig_manager: dict[str, Any] = {"enabled": operator_plugin}
    if operator_plugin:
        mig_manager["env"] = [{"name": "WITH_REBOOT", "value": "true"}]
        mig_manager["args"] = [MIG_MANAGER_ENTRYPOINT]
    custom_mig = _custom_mig_configs(config)
    if custom_mig is not None:
        mig_manager["config"] = {
            "create": True,
            "name": MIG_PARTED_CONFIGMAP,
            "default": MIG_ALL_DISABLED,
            "data": {"config.yaml": _mig_parted_config(custom_mig)},
        }

    device_plugin: dict[str, Any] = {"enabled": operator_plugin}
    if operator_plugin:
        strategy = config.mig.strategy
        data = {DEVICE_PLUGIN_DEFAULT_CONFIG: _device_plugin_config(strategy, None)}
        data.update(
            {time_slicing_config_name(n): _device_plugin_config(strategy, n) for n in TIME_SLICING_REPLICAS}
        )
        device_plugin["config"] = {
            "create": True,
            "name": DEVICE_PLUGIN_CONFIGMAP,
            "default": DEVICE_PLUGIN_DEFAULT_CONFIG,
            "data": data,
        }

    values: dict[str, Any] = {
        "nfd": {"enabled": True},
        "cdi": {"enabled": operator_plugin and minor >= CDI_MIN_KUBERNETES_VERSION},
        "operator": {
            "nodeSelector": dict(system_node_selector),
            "tolerations": _with_extra(CHART_OPERATOR_TOLERATIONS, system_tolerations),
        },
        "daemonsets": {"tolerations": operand_tolerations(pools)},
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "devicePlugin": device_plugin,
        "mig": {"strategy": config.mig.strategy},
        "migManager": mig_manager,
        "dcgmExporter": {
            "enabled": dcgm.enabled,
            "serviceMonitor": {"enabled": True, "relabelings": [dict(DCGM_NODE_RELABELING)]}
            if service_monitor
            else {"enabled": False},
        },
        "node-feature-discovery": {
            "worker": {"tolerations": nfd_worker_tolerations(pools)},
            "master": {
                "nodeSelector": dict(system_node_selector),
                "tolerations": _with_extra(CHART_NFD_MASTER_TOLERATIONS, system_tolerations),
            },
            "gc": {
                "nodeSelector": dict(system_node_selector),
                "tolerations": _with_extra(CHART_NFD_GC_TOLERATIONS, system_tolerations),
            },
        },
    }
    return deep_merge(values, config.extra_values)


NVIDIA_GPU: Final = "nvidia.com/gpu"
"""The device plugin's resource for whole GPUs, time-slices and (`mig.strategy: single`) MIG devices."""


def mig_resource_name(profile: str) -> str:
    """The resource the device plugin advertises a MIG profile as under `mig.strategy: mixed`.

    `nvidia.com/mig-<profile>` with `+` written `.` (`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me`): NVIDIA
    k8s-device-plugin v0.20.0 (the GPU Operator v26.7.0's), `internal/rm/rm.go` `AddDefaultResourcesToConfig`.
    """
    return "nvidia.com/mig-" + profile.replace("+", ".")


def mig_devices_per_gpu(
    pool: GpuPoolProfile, config: GpuOperatorConfig, gpu: GpuInstanceType
) -> dict[str, int]:
    """The MIG devices the pool's MIG config creates on each GPU of `gpu` (profile -> count); {} without MIG.

    From the generated configs (`all-<profile>`: the most instances of the profile a GPU holds;
    `all-balanced`: mig-parted's formula) per `facts.mig`, or from the custom config's `mig-devices`.
    Raises `MigProfileError` where that cannot be known ahead: a custom config with several device groups,
    GPU indexes or a `device-filter` (which GPUs of a node get which partition depends on their PCI ids),
    compute-instance profiles (`1c.2g.20gb`, which the device plugin does not advertise as such), or a GPU
    model without MIG facts. Assumes `validate_gpu_pools` accepted the pool.
    """
    profile = pool.mig_profile
    if profile is None or profile == MIG_ALL_DISABLED:
        return {}
    where = f"GPU pool {pool.name!r}: MIG profile {profile!r}"
    custom = _custom_mig_configs(config)
    if custom is not None:
        groups = custom[profile]
        group = groups[0]
        if len(groups) != 1 or group.devices != "all" or group.device_filter is not None:
            raise MigProfileError(
                f"{where}: gpu-eks must know how many MIG devices each node offers (Karpenter's NodeOverlays "
                "are derived from it), which a custom config tells only with exactly one device group with "
                "devices: all and no device-filter; split the config per pool, so that each names one "
                "partition for all GPUs of its nodes"
            )
        compute = sorted(p for p in group.mig_devices if not _PROFILE_BASE.match(p))
        if compute:
            raise MigProfileError(
                f"{where} uses compute-instance profiles ({', '.join(compute)}), which the device plugin "
                "does not advertise one per profile; use GPU-instance profiles such as 1g.10gb"
            )
        return dict(group.mig_devices) if group.mig_enabled else {}
    model = (gpu.gpu_name, gpu.gpu_memory_mib)
    offered = MIG_PROFILE_INSTANCES.get(model)
    if offered is None:
        raise MigProfileError(
            f"{where}: {gpu.name} has {gpu.gpu_name} GPUs with {gpu.gpu_memory_mib} MiB, for which gpu-eks "
            "has no MIG profile facts (facts/mig.py), so the MIG devices of its nodes are not known; define "
            "the partition in gpuOperator.mig.config"
        )
    if profile == _MIG_ALL_BALANCED:
        return balanced_mig_devices(model)
    for name, count in offered.items():
        if profile == "all-" + name.replace("+", "."):
            return {name: count}
    names = ", ".join("all-" + name.replace("+", ".") for name in offered)
    raise MigProfileError(
        f"{where} is not offered by {gpu.name} ({gpu.gpu_name}, {gpu.gpu_memory_mib} MiB): its generated "
        f"configs are all-disabled, all-balanced and {names}"
    )


def advertised_gpu_resources(
    pool: GpuPoolProfile, config: GpuOperatorConfig, gpu: GpuInstanceType
) -> dict[str, int]:
    """What the device plugin advertises on a node of `pool` launched as `gpu`: resource -> count.

    Whole GPUs: `nvidia.com/gpu` = GPUs. Time-slicing: GPUs x replicas. MIG under `single`: GPUs x MIG devices
    per GPU, as `nvidia.com/gpu`. MIG under `mixed`: `nvidia.com/mig-<profile>` = GPUs x devices of the
    profile per GPU, and `nvidia.com/gpu` 0 (every GPU is partitioned, and the device plugin serves no
    resource it has no device for: `cmd/nvidia-device-plugin/main.go` v0.20.0 skips plugins without devices).
    """
    devices = mig_devices_per_gpu(pool, config, gpu)
    if not devices:
        return {NVIDIA_GPU: gpu.gpu_count * (pool.time_slicing_replicas or 1)}
    if config.mig.strategy == "single":
        return {NVIDIA_GPU: gpu.gpu_count * sum(devices.values())}
    return {NVIDIA_GPU: 0} | {
        mig_resource_name(name): gpu.gpu_count * count for name, count in sorted(devices.items())
    }
