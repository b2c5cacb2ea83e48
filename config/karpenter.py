"""The `gpu-eks:karpenter` config section: how the Karpenter controller and its AWS side are deployed.

Example (Pulumi.<stack>.yaml)::

    gpu-eks:karpenter:
      identity: podIdentity
      replicas: 2
      featureGates:
        spotToSpotConsolidation: true
"""

import re
from typing import Final, Literal

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.types import Flag, KubernetesName, PositiveInt, Quantity, SemVer

KARPENTER_VERSION: Final = "1.14.1"
"""The Karpenter release this program is built and tested against (CRDs, IAM policy, chart values)."""

SUPPORTED_MINOR: Final = "1.14"
"""Releases of this minor version may be selected; another minor needs the program to follow upstream."""

LogLevel = Literal["debug", "info", "error"]
"""Log levels the 1.14 controller accepts (`LOG_LEVEL`; any other value stops it at startup)."""

Identity = Literal["podIdentity", "irsa"]
"""How the controller gets its IAM role: EKS Pod Identity, or IAM Roles for Service Accounts."""

_ZERO = re.compile(r"^\+?(0+(\.0*)?|\.0+)([KMGTPE]i|[numkMGTPE]|[eE].*)?$")


class KarpenterFeatureGates(ConfigModel):
    """`settings.featureGates` of the karpenter 1.14.1 chart: exactly its gates, with its defaults."""

    node_repair: Flag = False
    """Alpha: replace nodes whose conditions report them unhealthy (e.g. a failed GPU) after a grace time."""
    node_overlay: Flag = False
    """Alpha: let NodeOverlay resources adjust instance type prices and capacity in scheduling. Turned on
    when a pool shares GPUs (`timeSlicing`, `mig`) and gets NodeOverlays (see `gpuSharingOverlays`); `false`
    together with such a pool is refused."""
    reserved_capacity: Flag = True
    """Beta: launch into on-demand capacity reservations selected by `capacityReservationSelectorTerms`."""
    spot_to_spot_consolidation: Flag = False
    """Alpha: consolidate spot nodes by replacing them with cheaper spot nodes."""
    static_capacity: Flag = False
    """Alpha: NodePools with a fixed `replicas` count of nodes."""
    capacity_buffer: Flag = False
    """Alpha: CapacityBuffer resources that pre-provision spare capacity."""


class ControllerResources(ConfigModel):
    """CPU and memory of the controller container; requests and limits are both set to these values."""

    cpu: Quantity = "1"
    """CPU request and limit (Kubernetes quantity, e.g. `1` or `500m`)."""
    memory: Quantity = "1Gi"
    """Memory request and limit (Kubernetes quantity, e.g. `1Gi`); the controller sets GOMEMLIMIT from it."""

    @field_validator("cpu", "memory")
    @classmethod
    def _positive(cls, value: str) -> str:
        if value.startswith("-") or _ZERO.match(value):
            raise ValueError("must be a positive quantity")
        return value


class KarpenterConfig(ConfigModel):
    """Config section `gpu-eks:karpenter`."""

    version: SemVer = KARPENTER_VERSION
    """Karpenter release `X.Y.Z` (no `v`) of both charts, `karpenter-crd` and `karpenter`, kept in lockstep.
    Only 1.14 patch releases: the IAM policy and chart values are written for that minor version."""

    namespace: KubernetesName = "kube-system"
    """Namespace of the controller (upstream's recommendation: `kube-system`)."""

    identity: Identity = "podIdentity"
    """How the controller assumes its role: `podIdentity` (EKS Pod Identity association; needs the
    `eks-pod-identity-agent` add-on) or `irsa` (service-account annotation, e.g. for a Fargate controller)."""

    service_account_name: KubernetesName = "karpenter"
    """Name of the controller's service account, which the chart creates and the role is bound to."""

    replicas: PositiveInt = 2
    """Controller replicas (one leader, the rest on standby). The chart's anti-affinity puts each on its
    own node, so it may not exceed `cluster.systemNodes.minSize` (checked)."""

    interruption_handling: Flag = True
    """Create the SQS interruption queue and its five EventBridge rules, and pass the queue to the
    controller, so it drains nodes ahead of spot interruptions, scheduled maintenance and rebalance
    recommendations. When off, neither queue, rules nor the controller's interruption policy exist."""

    zonal_shift: Flag = False
    """Make the controller avoid zones under an ARC zonal shift (`settings.enableZonalShift`); also grants
    it the read-only zonal-shift policy. Effective only when zonal shift is enabled on the cluster."""

    log_level: LogLevel = "info"
    """Controller log level: `debug`, `info` or `error`."""

    gpu_sharing_overlays: Flag = True
    """Declare NodeOverlays for the pools that share GPUs (`timeSlicing`, `mig`), so that Karpenter plans
    launches with the GPU slices their nodes will advertise instead of whole GPUs; turns on the alpha
    `nodeOverlay` feature gate. `false`: no overlays, Karpenter counts whole GPUs (and overshoots on
    scale-up); not possible with `gpuOperator.mig.strategy: mixed` MIG pools, which need them to be
    provisioned at all."""

    feature_gates: KarpenterFeatureGates = Field(default_factory=KarpenterFeatureGates)
    """Feature gates of the controller; unset gates keep the chart's defaults."""

    controller_resources: ControllerResources = Field(default_factory=ControllerResources)
    """Controller container resources; requests equal limits (Guaranteed QoS), 1 CPU / 1Gi by default."""

    @field_validator("version")
    @classmethod
    def _supported_version(cls, value: str) -> str:
        major, minor, _ = value.split(".")
        if f"{major}.{minor}" != SUPPORTED_MINOR:
            raise ValueError(
                f"Karpenter {value} is not supported: this program's IAM policy, CRD models and chart values "
                f"follow Karpenter {KARPENTER_VERSION}; choose a {SUPPORTED_MINOR}.x release, or update the "
                "program to the new release first"
            )
        return value
