"""The `gpu-eks:nodePools` section: the Karpenter pools GPU (and optional CPU burst) nodes come from.

Each pool becomes one Karpenter v1 `NodePool` and one `EC2NodeClass`, both named after the pool. The checks
here refuse what would cost money or never work, before anything exists.
"""

import datetime
import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BeforeValidator, Field, field_validator, model_validator

from components.gpu_operator_values import TIME_SLICING_REPLICAS, GpuPoolProfile
from config.base import ConfigModel
from config.errors import ConfigProblem
from config.gpu_node_guard import check_initialization_timeout
from config.kubernetes import GPU_TAINT, MIG_PENDING_TAINT, LabelValue, QualifiedName, Taint
from config.types import (
    BudgetDuration,
    CronSchedule,
    DurationOrNever,
    Flag,
    GoDuration,
    InstanceType,
    KubernetesName,
    PositiveQuantity,
    Quantity,
    WholeNumber,
    described,
    number_as_text,
)
from facts.instance_types import (
    GpuInstanceType,
    ec2_instance_families,
    ec2_instance_type_names,
    gpu_instance_types,
    instance_types,
)
from facts.instance_types import (
    InstanceType as InstanceTypeFacts,
)
from facts.quantity import parse_quantity

CapacityType = Literal["spot", "on-demand", "reserved"]
AvailabilityZone = Annotated[
    str,
    described(r"[a-z]{2}(-gov)?-[a-z]+-[0-9][a-z]", "an availability zone name such as us-west-2b"),
]
SubnetId = Annotated[str, described(r"subnet-[0-9a-f]{8,17}", "a subnet id such as subnet-0123456789abcdef0")]
Architecture = Literal["amd64", "arm64"]

DEFAULT_AMI = "al2023@v20260714"
"""Newest EKS AMI release in the amazon-eks-ami changelog (ships AL2023 NVIDIA AMIs for 1.30-1.36)."""

_AMI_ALIAS = {
    # aws/karpenter-provider-aws v1.14.1 pkg/providers/amifamily: al2023 puts the version verbatim into the
    # SSM name amazon-eks-node-al2023-<arch>-nvidia-<k8s>-<version> (EKS AMI releases are vYYYYMMDD);
    # bottlerocket trims a leading v and looks up
    # /aws/service/bottlerocket/aws-k8s-<k8s>-nvidia/<arch>/<semver>.
    "al2023": re.compile(r"latest|v(?P<date>[0-9]{8})"),
    "bottlerocket": re.compile(r"latest|v?[0-9]+\.[0-9]+\.[0-9]+"),
}
_AMI_FORMS = (
    "al2023@v<YYYYMMDD> (an EKS AMI release, e.g. al2023@v20260714), bottlerocket@<version> (e.g. "
    "bottlerocket@1.40.0) or <family>@latest"
)

CPU_POOL_CATEGORIES = ("c", "m", "r")
"""Instance categories a CPU burst pool may use when it names no families or types."""
CPU_POOL_MIN_GENERATION = 6
"""... of generation 6 or newer (Karpenter requirement `instance-generation Gt 5`)."""

PLAUSIBLE_INSTANCES = 100
"""More instances than this at a pool's caps gets a warning: above what one team's pool usually needs, and
a typo (an extra zero) there bills unnoticed until the next invoice."""
PLAUSIBLE_GPUS = 256
"""More GPUs than this at a pool's caps gets a warning (32 eight-GPU nodes)."""


@dataclass(frozen=True)
class GpuUnits:
    """What one node of each candidate instance type takes under the pool's `limits.nvidia.com/gpu`, in the
    units Karpenter counts that cap in (`pools.sharing.gpu_limit_units`): its GPUs, or its
    time-slices or MIG devices when the pool's NodeOverlays tell Karpenter so."""

    per_instance: Mapping[str, int]
    """Instance type name -> units one node of it takes."""
    unit: str = "GPUs"
    """`GPUs`, `time-slices` or `MIG devices`."""


class GpuCount(ConfigModel):
    """How many GPUs an instance may have."""

    min: WholeNumber = Field(default=1, ge=1)
    """At least this many GPUs per instance."""
    max: WholeNumber | None = Field(default=None, ge=1)
    """At most this many GPUs per instance (no upper bound when unset)."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


class RootVolume(ConfigModel):
    """The root EBS volume. CUDA and framework images are many GB: size and speed it for image pulls."""

    size_gib: WholeNumber = Field(default=200, ge=20, le=16384)
    """Size in GiB."""
    type: Literal["gp3", "io2", "io1"] = "gp3"
    """EBS volume type."""
    iops: WholeNumber | None = Field(default=6000, ge=3000, le=256000)
    """Provisioned IOPS (gp3: 3000-16000, default 6000; io1/io2: required)."""
    throughput: WholeNumber | None = Field(default=500, ge=125, le=1000)
    """Throughput in MiB/s (gp3 only: 125-1000, default 500)."""

    @model_validator(mode="after")
    def _fits_type(self) -> Self:
        if self.type != "gp3" and "throughput" in self.model_fields_set:
            raise ValueError(f"throughput applies to gp3 volumes only, not {self.type}")
        if self.type == "gp3":
            if self.iops is not None and self.iops > 16000:
                raise ValueError(f"gp3 supports at most 16000 IOPS, got {self.iops}")
            if self.iops is not None and self.throughput is not None and self.throughput * 4 > self.iops:
                raise ValueError(
                    f"gp3 throughput may be at most IOPS/4: {self.throughput} MiB/s needs "
                    f"{self.throughput * 4} IOPS"
                )
        elif "iops" not in self.model_fields_set:
            raise ValueError(f"{self.type} volumes need iops")
        return self


class CapacityReservation(ConfigModel):
    """Selects On-Demand Capacity Reservations or Capacity Blocks for `reserved` capacity."""

    id: Annotated[str, described(r"cr-[0-9a-z]+", "a reservation id such as cr-0123456789abcdef0")] | None = (
        None
    )
    """A reservation id (cr-...)."""
    owner_id: Annotated[str, described(r"[0-9]{12}", "an AWS account id (12 digits)")] | None = Field(
        default=None, alias="ownerID"
    )
    """The account that owns the reservations (with `tags`)."""
    tags: dict[str, str] | None = None
    """Select reservations by tags."""

    @model_validator(mode="after")
    def _one_selector(self) -> Self:
        if (self.id is None) == (self.tags is None):
            raise ValueError("set exactly one of id or tags")
        if self.owner_id is not None and self.id is not None:
            raise ValueError("ownerID goes with tags, not with id")
        return self


class Budget(ConfigModel):
    """A disruption budget: how many nodes Karpenter may disrupt at once, optionally on a schedule."""

    nodes: Annotated[
        str,
        BeforeValidator(number_as_text),
        described(r"(100|[0-9]{1,2})%|[0-9]+", "a count such as 0 or 2, or a percentage from 0% to 100%"),
    ] = "10%"
    """A count (`0`, `2`) or a percentage (`10%`) of the pool's nodes."""
    schedule: CronSchedule | None = None
    """Cron schedule (UTC) when the budget starts, e.g. `0 8 * * mon-fri` or `@daily`: five fields (minute
    hour day-of-month month day-of-week) with ranges, steps and names; needs `duration`."""
    duration: BudgetDuration | None = None
    """How long the budget is active after each scheduled start, in hours and minutes (`10h`, `1h30m`);
    needs `schedule`."""
    reasons: tuple[Literal["Underutilized", "Empty", "Drifted"], ...] | None = None
    """Disruption reasons the budget applies to (all when unset)."""

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Self:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("schedule and duration must be set together")
        return self


class Disruption(ConfigModel):
    """When Karpenter may remove or replace nodes of the pool."""

    legacy_keys: ClassVar[dict[str, str]] = {
        "expireAfter": "moved out of disruption in Karpenter v1: set the pool's expireAfter instead",
    }

    consolidation_policy: Literal["WhenEmptyOrUnderutilized", "WhenEmpty"] = "WhenEmptyOrUnderutilized"
    """`WhenEmptyOrUnderutilized` packs and removes nodes; `WhenEmpty` only removes empty ones (training)."""
    consolidate_after: DurationOrNever
    """How long a node must be consolidatable before Karpenter acts (`5m`), or `Never`. Required."""
    budgets: tuple[Budget, ...] = ()
    """Disruption budgets (Karpenter's default is 10% of nodes at a time)."""

    @model_validator(mode="before")
    @classmethod
    def _consolidate_after_required(cls, data: Any) -> Any:
        if isinstance(data, dict) and "consolidateAfter" not in data and "consolidate_after" not in data:
            raise ValueError(
                "consolidateAfter is required in a disruption block (Karpenter v1): e.g. 5m, 1h or Never"
            )
        return data

    @field_validator("consolidation_policy", mode="before")
    @classmethod
    def _renamed_policy(cls, value: Any) -> Any:
        if value == "WhenUnderutilized":
            raise ValueError("WhenUnderutilized was renamed WhenEmptyOrUnderutilized in Karpenter v1")
        return value


class Kubelet(ConfigModel):
    """Kubelet settings Karpenter writes into the node's bootstrap configuration."""

    max_pods: WholeNumber | None = Field(default=None, ge=0)
    """Maximum pods per node."""
    system_reserved: dict[str, Quantity] | None = None
    """Resources reserved for OS daemons (`cpu`, `memory`, `ephemeral-storage`, `pid`)."""
    kube_reserved: dict[str, Quantity] | None = None
    """Resources reserved for Kubernetes daemons."""
    eviction_hard: dict[str, str] | None = None
    """Hard eviction thresholds, e.g. `memory.available: 5%`."""
    image_gc_high_threshold_percent: WholeNumber | None = Field(
        default=None, ge=0, le=100, alias="imageGCHighThresholdPercent"
    )
    """Disk usage that triggers image garbage collection (large images fill disks fast)."""
    image_gc_low_threshold_percent: WholeNumber | None = Field(
        default=None, ge=0, le=100, alias="imageGCLowThresholdPercent"
    )
    """Disk usage image garbage collection frees down to."""

    @model_validator(mode="after")
    def _gc_thresholds(self) -> Self:
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and low >= high:
            raise ValueError("imageGCLowThresholdPercent must be below imageGCHighThresholdPercent")
        return self


class Limits(ConfigModel):
    """Caps on what the pool may launch in total: Karpenter stops launching at the cap."""

    cpu: PositiveQuantity | None = None
    """Total vCPUs."""
    memory: PositiveQuantity | None = None
    """Total memory."""
    nvidia_gpu: PositiveQuantity | None = Field(default=None, alias="nvidia.com/gpu")
    """The cap on GPU spend, required for GPU pools. Counted in what the pool's pods request: whole GPUs,
    or slices on a pool that shares GPUs (time-slices; MIG devices), so `16` on a 4-way time-sliced pool is
    4 GPUs. A `mig.strategy: mixed` pool with several MIG resources counts physical GPUs."""


class TimeSlicing(ConfigModel):
    """Share each GPU between pods (no memory isolation)."""

    replicas: WholeNumber = Field(ge=TIME_SLICING_REPLICAS.start, le=TIME_SLICING_REPLICAS.stop - 1)
    """Pods per physical GPU."""


class Mig(ConfigModel):
    """Partition MIG-capable GPUs (A100, H100, H200, B200, ...)."""

    profile: Annotated[
        str, described(r"[a-z0-9][a-z0-9.-]*", "a mig-parted config name such as all-1g.10gb or all-balanced")
    ]
    """A mig-parted config name such as `all-1g.10gb`, `all-balanced`, or one of `gpuOperator.mig.config`."""


class NodePoolConfig(ConfigModel):
    """One Karpenter pool."""

    legacy_keys: ClassVar[dict[str, str]] = {
        "nodeClassRef": "is derived by gpu-eks (in Karpenter v1 it is {group, kind, name}); remove it",
        "providerRef": "is the v1alpha5 form of nodeClassRef, which gpu-eks derives; remove it",
        "ttlSecondsAfterEmpty": "is v1alpha5: use disruption {consolidationPolicy: WhenEmpty, "
        "consolidateAfter}",
        "ttlSecondsUntilExpired": "is v1alpha5: use expireAfter (e.g. 336h)",
        "consolidation": "is v1alpha5: use disruption {consolidationPolicy, consolidateAfter}",
    }

    name: KubernetesName
    """The pool's name (unique in the stack); its NodePool and its EC2NodeClass are both named after it."""
    kind: Literal["gpu", "cpu"] = "gpu"
    """`gpu`: NVIDIA GPU instances only; `cpu`: a pool for non-GPU burst work."""
    instance_families: tuple[str, ...] = ()
    """Allowed instance families, e.g. `[g5, g6]` (`karpenter.k8s.aws/instance-family`)."""
    instance_types: tuple[InstanceType, ...] = ()
    """Allowed instance types, e.g. `[g6.xlarge]` (`node.kubernetes.io/instance-type`)."""
    gpu_names: tuple[str, ...] = ()
    """Allowed GPU models, e.g. `[l4, a10g]` (`karpenter.k8s.aws/instance-gpu-name`)."""
    gpu_count: GpuCount | None = None
    """GPUs per instance (`karpenter.k8s.aws/instance-gpu-count`); any count when unset."""
    capacity_types: tuple[CapacityType, ...] = Field(default=("on-demand",), min_length=1)
    """`spot`, `on-demand`, `reserved` (ODCRs / Capacity Blocks, selected by `capacityReservations`).
    Karpenter prefers reserved, then spot, then on-demand among those allowed."""
    capacity_reservations: tuple[CapacityReservation, ...] = ()
    """Which capacity reservations `reserved` may use."""
    architecture: Architecture = "amd64"
    """CPU architecture; NVIDIA GPUs on arm64 exist only in g5g."""
    ami: str = DEFAULT_AMI
    """`al2023@<release>` (EKS AL2023 NVIDIA AMI: driver and toolkit preinstalled) or
    `bottlerocket@<version>` (Bottlerocket NVIDIA: driver, toolkit and device plugin built in).
    `@latest` is allowed but never the default: AMI updates then roll nodes without review."""
    root_volume: RootVolume = RootVolume()
    """The root EBS volume (always encrypted)."""
    taints: tuple[Taint, ...] | None = None
    """Taints on every node; GPU pools default to `nvidia.com/gpu=true:NoSchedule` so only pods that
    tolerate it (GPU workloads) land there. CPU pools default to none."""
    startup_taints: tuple[Taint, ...] = ()
    """Taints present at startup until something removes them. Only the one gpu-eks removes itself is
    accepted: `gpu-eks.io/mig-pending=true:NoSchedule`, which MIG pools get anyway; any other would keep every
    node uninitialized (Karpenter waits for startup taints to go) until the GPU node guard deletes it."""
    labels: dict[QualifiedName, LabelValue] = Field(default_factory=dict)
    """Extra labels on every node of the pool (not in `nvidia.com/`, which the GPU Operator and gpu-eks
    manage)."""
    limits: Limits = Limits()
    """Total resource caps of the pool; GPU pools must cap `nvidia.com/gpu`, CPU pools `cpu`."""
    disruption: Disruption = Disruption(consolidate_after="5m")
    """Consolidation and budgets (default: WhenEmptyOrUnderutilized after 5m)."""
    expire_after: DurationOrNever = "336h"
    """Replace nodes older than this (default 14 days: picks up AMI and security fixes), or `Never`."""
    termination_grace_period: GoDuration | None = None
    """Longest a draining node waits for pods before it is terminated anyway (e.g. `24h` for training). Its
    replacement runs meanwhile (draining nodes do not count against the limits); unset, a drain that a
    PodDisruptionBudget or a do-not-disrupt pod blocks never ends, which `pulumi preview` warns about where
    the pool expires its nodes."""
    weight: WholeNumber | None = Field(default=None, ge=1, le=100)
    """Priority among pools that fit a pod (higher first)."""
    kubelet: Kubelet | None = None
    """Kubelet settings."""
    efa: Flag = False
    """Restrict to EFA-capable instance types; pods request `vpc.amazonaws.com/efa` and Karpenter attaches
    the interfaces (the stack then installs the EFA device plugin, which advertises that resource). EFA
    traffic stays within one subnet, so an EFA pool names its `zone` (a VPC the stack creates has one
    private subnet per zone) or its `subnetId` (an existing VPC)."""
    zone: AvailabilityZone | None = None
    """Launch only in this availability zone of the stack's region (e.g. `us-west-2b`; requirement
    `topology.kubernetes.io/zone`), one of the zones the VPC the stack creates spans. For capacity
    reservations and Capacity Blocks, the zone they are in (zone names map to different physical zones in
    different accounts: `aws ec2 describe-availability-zones` shows the zone id)."""
    subnet_id: SubnetId | None = Field(default=None, alias="subnetId")
    """Launch only into this subnet (EC2NodeClass `subnetSelectorTerms`), one of
    `network.existing.privateSubnetIds`: how an EFA pool in an existing VPC keeps to one subnet."""
    placement_group: Flag = False
    """Launch the pool's nodes into a cluster placement group the stack creates for it (named
    `<cluster>-<pool>`, EC2NodeClass `placementGroupSelector`): one network spine for a multi-node job's
    NCCL traffic. EFA pools with `zone` or `subnetId` only (a cluster placement group lies in one zone)."""
    time_slicing: TimeSlicing | None = None
    """Share GPUs between pods (GPU Operator device-plugin config); NodeOverlays tell Karpenter the slices."""
    mig: Mig | None = None
    """MIG partitioning (GPU Operator MIG manager). The pool's nodes start with the startup taint
    `gpu-eks.io/mig-pending`, which the GPU node guard removes once the GPUs are partitioned."""
    initialization_timeout: DurationOrNever | None = None
    """This pool's `gpuNodeGuard.initializationTimeout` (e.g. longer for large MIG nodes that reboot once)."""

    @field_validator("initialization_timeout")
    @classmethod
    def _timeout(cls, value: str | None) -> str | None:
        return None if value is None else check_initialization_timeout(value)

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        managed = sorted(k for k in value if k.startswith("nvidia.com/"))
        if managed:
            raise ValueError(
                f"{', '.join(managed)}: nvidia.com/ labels are set by gpu-eks and the GPU Operator (use "
                "timeSlicing or mig for the device plugin and MIG manager); a label such as "
                "nvidia.com/mig.config.state would defeat the MIG gate"
            )
        return value

    @field_validator("ami")
    @classmethod
    def _ami(cls, value: str) -> str:
        family, _, version = value.partition("@")
        pattern = _AMI_ALIAS.get(family)
        match = pattern.fullmatch(version) if pattern else None
        if match is None:
            raise ValueError(f"must be an AMI alias {_AMI_FORMS}")
        if match.groupdict().get("date"):
            try:
                datetime.datetime.strptime(match["date"], "%Y%m%d")
            except ValueError:
                raise ValueError(
                    f"must be an AMI alias {_AMI_FORMS}: {match['date']} is not a date"
                ) from None
        return value

    @field_validator("instance_families")
    @classmethod
    def _families(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [f for f in value if not re.fullmatch(r"[a-z][a-z0-9-]*", f)]
        if bad:
            raise ValueError(
                f"{', '.join(bad)}: an instance family is the part before the dot, e.g. g6 or p5"
            )
        return value

    @property
    def ami_family(self) -> Literal["al2023", "bottlerocket"]:
        return "bottlerocket" if self.ami.startswith("bottlerocket@") else "al2023"

    @property
    def effective_taints(self) -> tuple[Taint, ...]:
        """The pool's taints, with the GPU default applied."""
        if self.taints is not None:
            return self.taints
        return (GPU_TAINT,) if self.kind == "gpu" else ()

    @property
    def effective_startup_taints(self) -> tuple[Taint, ...]:
        """The pool's startup taints: the MIG gate on MIG pools (config may only repeat it)."""
        return (MIG_PENDING_TAINT,) if self.mig is not None else ()

    def startup_taint_problems(self) -> list[tuple[int, str]]:
        """(index, why) for each configured startup taint that nothing would remove from this pool's nodes."""
        problems = []
        for index, taint in enumerate(self.startup_taints):
            if taint == MIG_PENDING_TAINT and self.mig is not None:
                continue
            why = (
                "the GPU node guard removes gpu-eks.io/mig-pending from MIG pools only, and this pool has "
                "no mig"
                if taint.key == MIG_PENDING_TAINT.key
                else "nothing in the stack removes this taint"
            )
            problems.append(
                (
                    index,
                    f"{why}, so Karpenter would never initialize the nodes (it waits for startup taints to "
                    "go); the only startup taint accepted is gpu-eks.io/mig-pending=true:NoSchedule on a MIG "
                    "pool, which gets it without being asked",
                )
            )
        return problems

    def gpu_profile(self) -> GpuPoolProfile:
        """What the GPU Operator must know about this (GPU) pool."""
        return GpuPoolProfile(
            name=self.name,
            ami_family=self.ami_family,
            taints=self.effective_taints,
            startup_taints=self.effective_startup_taints,
            instance_types=self.instance_types,
            instance_families=self.instance_families,
            gpu_names=self.gpu_names,
            time_slicing_replicas=self.time_slicing.replicas if self.time_slicing else None,
            mig_profile=self.mig.profile if self.mig else None,
        )

    def candidates(self) -> tuple[GpuInstanceType, ...]:
        """The NVIDIA GPU instance types this pool may launch (for a GPU pool)."""
        count = self.gpu_count or GpuCount()
        return tuple(
            it
            for it in gpu_instance_types().values()
            if it.arch == self.architecture
            and (not self.instance_families or it.family in self.instance_families)
            and (not self.instance_types or it.name in self.instance_types)
            and (not self.gpu_names or it.gpu_name in self.gpu_names)
            and count.min <= it.gpu_count <= (count.max or it.gpu_count)
            and (not self.efa or it.efa_interfaces > 0)
        )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = self._taint_problems() + self._capacity_problems()
        problems += self._gpu_problems() if self.kind == "gpu" else self._cpu_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _taint_problems(self) -> list[str]:
        taints = list(self.effective_taints)
        problems = []
        for group, items in (("taints", taints), ("startupTaints", list(self.startup_taints))):
            keys = [(t.key, t.effect) for t in items]
            if len(set(keys)) != len(keys):
                problems.append(f"{group} lists the same key and effect twice")
        repeated = sorted({t.key for t in taints} & {t.key for t in self.effective_startup_taints})
        if repeated:
            problems.append(
                f"taint {', '.join(repeated)} is in both taints and startupTaints; a startup taint is "
                "removed once the node is ready, a taint stays: choose one"
            )
        return problems

    def _capacity_problems(self) -> list[str]:
        if len(set(self.capacity_types)) != len(self.capacity_types):
            return ["capacityTypes lists a type twice"]
        if "reserved" in self.capacity_types and not self.capacity_reservations:
            return ["capacityTypes has reserved but no capacityReservations select which reservations to use"]
        if self.capacity_reservations and "reserved" not in self.capacity_types:
            return ["capacityReservations are set but capacityTypes does not include reserved"]
        return []

    def _gpu_problems(self) -> list[str]:
        problems = []
        if self.limits.nvidia_gpu is None:
            problems.append("a GPU pool needs limits.nvidia.com/gpu: without it GPU spend has no cap")
        table = gpu_instance_types()
        known_families = {it.family for it in table.values()}
        unknown = [f for f in self.instance_families if f not in known_families]
        unknown += [t for t in self.instance_types if t not in table]
        unknown += [g for g in self.gpu_names if g not in {it.gpu_name for it in table.values()}]
        if unknown:
            details = [_unknown_detail(name) for name in unknown]
            return [
                *problems,
                f"{', '.join(unknown)}: not NVIDIA GPU instance families, types or GPU names "
                f"({'; '.join(d for d in details if d)}{'; ' if any(details) else ''}"
                f"families: {', '.join(sorted(known_families))})",
            ]
        if self.architecture == "arm64":
            x86_only = sorted(
                {
                    f
                    for f in self.instance_families
                    if table and not any(it.family == f and it.arch == "arm64" for it in table.values())
                }
            )
            if x86_only:
                problems.append(
                    f"architecture arm64 contradicts instance families {', '.join(x86_only)} (amd64 only); "
                    "the only arm64 instances with NVIDIA GPUs are g5g"
                )
                return problems
        if not self.candidates():
            problems.append(
                "these requirements match no NVIDIA GPU instance type (architecture, families, types, "
                "gpuNames, gpuCount" + (", efa" if self.efa else "") + " together)"
            )
        if self.time_slicing is not None and self.mig is not None:
            problems.append("timeSlicing and mig together are not supported on one pool; choose one")
        return problems

    def placement_problems(
        self, key: str, region: str, existing_subnets: tuple[str, ...] | None
    ) -> list[ConfigProblem]:
        """Where the pool's nodes may go, keyed down to the field (`key` is the pool's): an EFA pool keeps to
        one subnet (a zone of a VPC the stack creates, or a subnet of an existing one), and only EFA pools
        get a placement group. `existing_subnets`: the existing VPC's private subnets, None when the stack
        creates the VPC."""
        problems = []
        if self.zone is not None:
            if not re.fullmatch(rf"{re.escape(region)}[a-z]", self.zone):
                problems.append(
                    ConfigProblem(
                        f"{key}.zone",
                        f"is not an availability zone of the stack's region {region} (those are named "
                        f"{region}a, {region}b, ...; Local and Wavelength zones lack GPU instances)",
                        self.zone,
                        True,
                    )
                )
            elif existing_subnets is not None:
                problems.append(
                    ConfigProblem(
                        f"{key}.zone",
                        "the stack uses an existing VPC, whose subnets in that zone it does not know; set "
                        "subnetId to one of network.existing.privateSubnetIds instead",
                        self.zone,
                        True,
                    )
                )
        if self.subnet_id is not None:
            if self.zone is not None:
                why = "zone is set too: a subnet lies in one zone; set one of them"
            elif existing_subnets is None:
                why = "the stack creates the VPC, whose subnet ids do not exist yet; set zone instead"
            elif self.subnet_id not in existing_subnets:
                why = f"is not one of network.existing.privateSubnetIds ({', '.join(existing_subnets)})"
            else:
                why = ""
            if why:
                problems.append(ConfigProblem(f"{key}.subnetId", why, self.subnet_id, True))
        if self.placement_group and not self.efa:
            problems.append(
                ConfigProblem(
                    f"{key}.placementGroup",
                    "needs efa: true (a cluster placement group pays off only for the network between EFA "
                    "nodes; elsewhere it only narrows where capacity can be found)",
                    True,
                    True,
                )
            )
        if self.efa and self.zone is None and self.subnet_id is None:
            where = "subnetId (one of network.existing.privateSubnetIds)" if existing_subnets else "zone"
            problems.append(
                ConfigProblem(
                    f"{key}.{'subnetId' if existing_subnets else 'zone'}",
                    f"an EFA pool needs {where}: EFA traffic stays within one subnet, so a multi-node job "
                    "spread over zones would fall back to TCP or fail",
                )
            )
        return problems

    def _cpu_problems(self) -> list[str]:
        gpu_only = [
            key
            for key, value in (
                ("gpuNames", self.gpu_names),
                ("gpuCount", self.gpu_count),
                ("timeSlicing", self.time_slicing),
                ("mig", self.mig),
                ("limits.nvidia.com/gpu", self.limits.nvidia_gpu),
                ("efa", self.efa),
                ("placementGroup", self.placement_group),
                ("initializationTimeout", self.initialization_timeout),
            )
            if value
        ]
        problems = (
            [f"{', '.join(gpu_only)}: GPU-pool settings, not allowed on a CPU pool (kind: cpu)"]
            if gpu_only
            else []
        )
        if self.limits.cpu is None:
            problems.append("a CPU pool needs limits.cpu: without it the pool's size has no cap")
        return problems

    def cpu_candidates(self) -> tuple[InstanceTypeFacts, ...]:
        """The instance types of the Karpenter reference this (CPU) pool may launch."""
        return tuple(
            it
            for it in instance_types().values()
            if it.arch == self.architecture
            and not it.gpu_manufacturer
            and (not self.instance_families or it.family in self.instance_families)
            and (not self.instance_types or it.name in self.instance_types)
            and (
                self.instance_families
                or self.instance_types
                or (it.category in CPU_POOL_CATEGORIES and it.generation >= CPU_POOL_MIN_GENERATION)
            )
        )

    def launchable(self) -> tuple[InstanceTypeFacts, ...]:
        """What the pool may launch, with sizes (those of its candidates the Karpenter reference lists)."""
        if self.kind == "cpu":
            return self.cpu_candidates()
        table = instance_types()
        return tuple(table[it.name] for it in self.candidates() if it.name in table)

    def problems(self, key: str, gpu_units: GpuUnits | None = None) -> list[ConfigProblem]:
        """Mistakes of a pool that validated as a model, each keyed down to its field (`key` is the pool's).

        Names that do not exist in EC2 (CPU pools; GPU pools refuse them in the model), GPU instances in a
        CPU pool, requirements that leave nothing to launch, and limits below the smallest instance (the GPU
        limit in `gpu_units`; not checked without them, where they cannot be derived).
        """
        if self.kind == "cpu":
            problems = self._cpu_name_problems(key)
            if problems:
                return problems
            if not self.cpu_candidates() and self._names_known():
                return [
                    ConfigProblem(
                        key,
                        f"these requirements match no {self.architecture} instance type without GPUs "
                        "(architecture, instanceFamilies and instanceTypes together)",
                    )
                ]
        return self._limit_problems(key, gpu_units)

    def _names_known(self) -> bool:
        """Whether every family and type the pool names is in the Karpenter reference (sizes known)."""
        table = instance_types()
        return all(t in table for t in self.instance_types) and all(
            any(it.family == f for it in table.values()) for f in self.instance_families
        )

    def _cpu_name_problems(self, key: str) -> list[ConfigProblem]:
        problems = []
        gpu_families = {it.family for it in gpu_instance_types().values()}
        named: list[tuple[str, Sequence[str], Iterable[str]]] = [
            ("instanceFamilies", self.instance_families, ec2_instance_families()),
            ("instanceTypes", self.instance_types, ec2_instance_type_names()),
        ]
        for field, names, known in named:
            for index, name in enumerate(names):
                family = name.split(".", 1)[0]
                if name not in known:
                    close = difflib.get_close_matches(name, sorted(known), n=1)
                    kind = "instance family" if field == "instanceFamilies" else "instance type"
                    hint = f"; did you mean {close[0]}?" if close else ""
                    problems.append(
                        ConfigProblem(f"{key}.{field}[{index}]", f"is no EC2 {kind}{hint}", name, True)
                    )
                elif family in gpu_families:
                    problems.append(
                        ConfigProblem(
                            f"{key}.{field}[{index}]",
                            "has NVIDIA GPUs: a CPU pool would launch GPU instances for CPU work; use a GPU "
                            "pool (kind: gpu) or a family without GPUs",
                            name,
                            True,
                        )
                    )
        return problems

    def _limit_problems(self, key: str, gpu_units: GpuUnits | None) -> list[ConfigProblem]:
        """Karpenter launches only an instance whose capacity fits under what is left of every limit
        (kubernetes-sigs/karpenter v1.14.1 `filterByRemainingResources`): a limit below the smallest
        candidate's capacity means the pool never launches anything."""
        launchable = self.launchable()
        if not launchable:
            return []
        problems = []
        for field, value, need, unit in self._limit_needs(launchable, gpu_units):
            if value is not None and parse_quantity(value) < need[1]:
                problems.append(
                    ConfigProblem(
                        f"{key}.limits.{field}",
                        f"is below what the smallest instance this pool may launch brings ({need[0]}: "
                        f"{_amount(need[1], unit)}), so the pool could never launch a node; raise it to at "
                        f"least {_amount(need[1], unit, ceil=True)}",
                        value,
                        True,
                    )
                )
        return problems

    def _limit_needs(
        self, launchable: Sequence[InstanceTypeFacts], gpu_units: GpuUnits | None
    ) -> list[tuple[str, str | None, tuple[str, Decimal], str]]:
        """(limit field, its value, (smallest candidate, its amount), unit) for cpu, memory and, with
        `gpu_units`, GPUs."""
        cpu = min(((it.name, Decimal(it.vcpus)) for it in launchable), key=lambda x: x[1])
        # Karpenter compares the memory capacity it estimates before launch (the instance's memory less the
        # VM overhead), not allocatable, which is lower: a limit between the two still launches nothing.
        memory = min(((it.name, it.memory_capacity) for it in launchable), key=lambda x: x[1])
        needs = [("cpu", self.limits.cpu, cpu, "vCPUs"), ("memory", self.limits.memory, memory, "bytes")]
        if self.kind == "gpu" and gpu_units is not None and gpu_units.per_instance:
            name, units = min(gpu_units.per_instance.items(), key=lambda x: x[1])
            needs.append(("nvidia.com/gpu", self.limits.nvidia_gpu, (name, Decimal(units)), gpu_units.unit))
        return needs

    def _gpus_at_cap(self, gpu_units: GpuUnits | None) -> int:
        """The most physical GPUs the pool may hold under `limits.nvidia.com/gpu` (counted in `gpu_units`):
        the cap over the fewest units per GPU among its candidates (e.g. 16 time-slices, 4 per GPU: 4)."""
        limit = self.limits.nvidia_gpu
        if self.kind != "gpu" or limit is None or gpu_units is None:
            return 0
        gpus = {it.name: it.gpu_count for it in self.candidates()}
        per_gpu = max(
            (Decimal(gpus[name]) / units for name, units in gpu_units.per_instance.items() if units),
            default=Decimal(1),
        )
        return int(parse_quantity(limit) * per_gpu)

    def worst_case(self, gpu_units: GpuUnits | None = None) -> str | None:
        """A sentence on the pool's worst case at its caps, when that is implausibly large; else None."""
        launchable = self.launchable()
        if not launchable:
            return None
        caps = []
        for field, value, need, _ in self._limit_needs(launchable, gpu_units):
            if value is not None:
                caps.append((int(parse_quantity(value) / need[1]), field, need[0]))
        if not caps:
            return None
        instances, field, smallest = min(caps)
        gpus = self._gpus_at_cap(gpu_units)
        if instances <= PLAUSIBLE_INSTANCES and gpus <= PLAUSIBLE_GPUS:
            return None
        slices = (
            f" ({self.limits.nvidia_gpu} {gpu_units.unit})"
            if gpu_units is not None and gpu_units.unit != "GPUs"
            else ""
        )
        gpu_text = f" and {gpus} GPUs{slices}" if self.kind == "gpu" else ""
        return (
            f"pool {self.name}: at its limits it may run up to {instances} instances{gpu_text} at once "
            f"(limits.{field} over its smallest instance, {smallest}); check these caps are meant "
            f"(more than {PLAUSIBLE_INSTANCES} instances or {PLAUSIBLE_GPUS} GPUs is unusual)"
        )


def _amount(value: Decimal, unit: str, *, ceil: bool = False) -> str:
    """`value` for a message: `14.2Gi of memory`, `4 vCPUs`; rounded up to a whole number with `ceil`."""
    if unit == "bytes":
        value /= Decimal(1024**3)
    if ceil:
        return f"{math.ceil(value)}" + ("Gi" if unit == "bytes" else "")
    if unit == "bytes":
        return f"{value:.1f}Gi of memory"
    return f"{value.normalize():f} {unit}"


def _unknown_detail(name: str) -> str:
    """Why a GPU pool's family or type is unknown: no such EC2 name (with the nearest), or no NVIDIA GPU."""
    if "." in name:
        known: frozenset[str] = ec2_instance_type_names()
        kind = "instance type"
    else:
        known = ec2_instance_families() | {it.gpu_name for it in gpu_instance_types().values()}
        kind = "instance family or GPU name"
    if name in known:
        return f"{name} has no NVIDIA GPU"
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"{name}: no such {kind}" + (f", did you mean {close[0]}?" if close else "")
