"""The `gpu-eks:gpuOperator` section: the NVIDIA GPU Operator Helm release and the choices it cannot derive.

Everything that follows from the GPU node pools (which operands run where, tolerations, time-slicing,
MIG labels) is derived by `components.gpu_operator_values`; this section holds only what the pools do
not say.
"""

import re
from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from config.types import Flag, KubernetesName, WholeNumber, described

CHART_NAME = "gpu-operator"
"""Helm chart name of the NVIDIA GPU Operator."""
CHART_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"
"""Helm repository of the chart (NVIDIA NGC)."""
DEFAULT_VERSION = "v26.7.0"
"""Chart version the values builder and its tests are written against (NGC tags carry the `v`)."""
DEFAULT_NAMESPACE = "gpu-operator"
DEFAULT_TIMEOUT_SECONDS = 900
"""Helm wait timeout: the operator, NFD and the first operand rollout on a fresh GPU node take minutes."""

DriverMode = Literal["auto", "preinstalled"]
MigStrategy = Literal["single", "mixed"]

MIG_PROFILE_PATTERN = r"([1-8]c\.)?[1-8]g\.[0-9]+gb([+-][a-z][a-z0-9]*([.,][a-z][a-z0-9]*)*)?"
"""A mig-parted MIG profile: `1g.10gb`, `3g.40gb`, `1c.2g.20gb`, `1g.10gb+me`, `1g.24gb+me.all`, ..."""
_MIG_PROFILE = re.compile(MIG_PROFILE_PATTERN)
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE_MAX = 63

MIG_ALL_DISABLED = "all-disabled"
"""The mig-parted config the operator labels MIG-capable nodes with when no `nvidia.com/mig.config` is set."""


class DcgmExporterConfig(ConfigModel):
    """The DCGM exporter (GPU metrics for Prometheus)."""

    enabled: Flag = True
    """Run the DCGM exporter on every GPU node."""
    service_monitor: Flag | None = None
    """Create a `ServiceMonitor` for it. Unset: exactly when `observability.backend` is not `none` (which
    installs the Prometheus Operator CRDs the ServiceMonitor needs). `false` opts out; `true` without a
    backend is refused (the operator cannot create a ServiceMonitor without those CRDs)."""

    def monitored(self, scraped: bool) -> bool:
        """Whether the exporter's ServiceMonitor exists, where an observability backend scrapes the cluster
        (`scraped`) or not: what makes its series reach Prometheus."""
        return self.enabled and (self.service_monitor if self.service_monitor is not None else scraped)

    @model_validator(mode="after")
    def _monitor_needs_exporter(self) -> Self:
        if self.service_monitor and not self.enabled:
            raise ValueError("serviceMonitor is true but enabled is false: there would be nothing to scrape")
        return self


class MigDeviceGroup(ConfigModel):
    """One entry of a mig-parted config: how a set of GPUs on a node is partitioned.

    Keys are written as mig-parted spells them (`mig-enabled`, `mig-devices`, `device-filter`).
    """

    devices: Literal["all"] | tuple[WholeNumber, ...] = "all"
    """`all`, or the GPU indexes (0-based) this entry applies to."""
    device_filter: str | tuple[str, ...] | None = Field(default=None, alias="device-filter")
    """Optional PCI device IDs (e.g. `0x233010DE`) the entry is limited to."""
    mig_enabled: Flag = Field(alias="mig-enabled")
    """Whether MIG mode is on for these GPUs."""
    mig_devices: dict[str, WholeNumber] = Field(default_factory=dict, alias="mig-devices")
    """MIG profile -> number of instances per GPU, e.g. `{"1g.10gb": 7}`."""

    # Before validation, so a wrong value gets one message rather than one per member of the union.
    @field_validator("devices", mode="before")
    @classmethod
    def _indexes(cls, value: Any) -> Any:
        indexes = isinstance(value, list | tuple) and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
        )
        if value != "all" and not (indexes and value):
            raise ValueError("must be all or a non-empty list of GPU indexes, unquoted, such as [0, 1]")
        return value

    @field_validator("device_filter", mode="before")
    @classmethod
    def _device_ids(cls, value: Any) -> Any:
        if not (
            value is None
            or isinstance(value, str)
            or (isinstance(value, list | tuple) and all(isinstance(i, str) for i in value))
        ):
            raise ValueError("must be a PCI device ID such as 0x233010DE, or a list of them")
        return value

    @field_validator("mig_devices")
    @classmethod
    def _profiles(cls, value: dict[str, int]) -> dict[str, int]:
        for profile, count in value.items():
            if not _MIG_PROFILE.fullmatch(profile):
                raise ValueError(f"{profile!r} is not a MIG profile name such as 1g.10gb or 3g.40gb")
            if count < 1:
                raise ValueError(f"instance count of {profile} must be at least 1")
        return value

    @model_validator(mode="after")
    def _devices_need_mig(self) -> Self:
        if self.mig_devices and not self.mig_enabled:
            raise ValueError("mig-devices is set but mig-enabled is false")
        return self


class MigConfig(ConfigModel):
    """Multi-Instance GPU settings shared by every pool (each pool picks its profile itself)."""

    strategy: MigStrategy = "single"
    """How the device plugin exposes MIG devices: `single` (every GPU of a node split alike; the slices are
    advertised as `nvidia.com/gpu`) or `mixed` (`nvidia.com/mig-<profile>` resources; allows mixed profiles;
    Karpenter learns of those resources from the NodeOverlays gpu-eks declares for MIG pools)."""
    config: dict[str, tuple[MigDeviceGroup, ...]] | None = None
    """Custom mig-parted configs (`mig-configs` of the mig-parted file): name -> device groups. When set, the
    MIG manager uses these instead of the configs it generates from the hardware, and a pool's MIG profile
    must be one of these names. `all-disabled` is added when missing (the operator falls back to it)."""

    @field_validator("config")
    @classmethod
    def _names(
        cls, value: dict[str, tuple[MigDeviceGroup, ...]] | None
    ) -> dict[str, tuple[MigDeviceGroup, ...]] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must name at least one config, or be left out to use the generated configs")
        for name, groups in value.items():
            if len(name) > _LABEL_VALUE_MAX or not _LABEL_VALUE.fullmatch(name):
                raise ValueError(
                    f"config name {name!r} must be a Kubernetes label value (it is set as the "
                    "nvidia.com/mig.config node label): up to 63 letters, digits, '-', '_' or '.'"
                )
            if not groups:
                raise ValueError(f"config {name!r} has no device groups")
        return value


class GpuOperatorConfig(ConfigModel):
    """`gpu-eks:gpuOperator`: the NVIDIA GPU Operator release."""

    version: Annotated[
        str, described(r"v[0-9]+\.[0-9]+\.[0-9]+", "a chart version with its v, such as v26.7.0")
    ] = DEFAULT_VERSION
    """Chart version, with the `v` as NGC tags it (`v26.7.0`). Values are built for the v26.7 series."""
    namespace: KubernetesName = DEFAULT_NAMESPACE
    """Namespace of the release (created by the component, labelled for privileged pods)."""
    driver_mode: DriverMode = "auto"
    """Who provides the NVIDIA driver and container toolkit on GPU nodes: the AMI, so the operator's driver
    and toolkit are off. `auto` and `preinstalled` mean the same: the EKS AL2023 NVIDIA and Bottlerocket
    NVIDIA AMIs both ship them. `operator` is refused: pools select AMIs by alias only, and `al2023@...`
    always resolves GPU instance types to the NVIDIA variant, whose preinstalled driver the operator's driver
    container would clash with."""
    dcgm_exporter: DcgmExporterConfig = DcgmExporterConfig()
    """GPU metrics exporter and its Prometheus Operator ServiceMonitor."""
    mig: MigConfig = MigConfig()
    """MIG strategy and optional custom MIG partitionings."""
    extra_values: dict[str, Any] = Field(default_factory=dict)
    """Helm values merged last (deeply: mappings merge, lists and scalars replace) over the derived values.
    An escape hatch: nothing here is validated against the chart."""
    timeout_seconds: WholeNumber = Field(default=DEFAULT_TIMEOUT_SECONDS, ge=60, le=3600)
    """How long Pulumi waits for the release to become ready."""

    @field_validator("driver_mode", mode="before")
    @classmethod
    def _no_operator_driver(cls, value: Any) -> Any:
        if value == "operator":
            raise ValueError(
                "operator is not supported: GPU pools select their AMI by alias only (nodePools[].ami), "
                "and Karpenter resolves al2023@<version> for GPU instance types to the EKS AL2023 NVIDIA "
                "AMI, whose driver is preinstalled (Bottlerocket's is part of the image); gpu-eks has no "
                "custom AMI selector that could pick an AMI without a driver. Use auto"
            )
        return value
