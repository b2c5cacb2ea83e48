"""`karpenter.k8s.aws/v1` EC2NodeClass as of Karpenter 1.14.1: every spec field of the CRD, its CEL rules.

Source of truth: `tests/fixtures/karpenter-1.14.1/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`. `status`
(resolved AMIs, subnets, security groups, capacity reservations, instance profile, conditions) is written
by the controller only and is deliberately not modelled. Fields the API server defaults (`metadataOptions`
and its four fields) are optional here and stay out of the dump unless set; the server default is in the
docstring (see `components.karpenter_api.common` for why).

Every CEL rule of the CRD is re-implemented next to the field it sits on in the CRD, with a message that
says what to change. Where a CRD rule is looser or odder than its message suggests, the model follows the
rule, not the message, so that it accepts exactly what the API server accepts:

- the `'id' is mutually exclusive` rules of subnet, security-group and capacity-reservation selector
  terms are written `!self.all(x, ...)`: they refuse a list only when *every* term mixes `id` with other
  fields, and they refuse an empty list (for `capacityReservationSelectorTerms` that rule is the only
  thing refusing `[]`; leave the field out instead of writing an empty list).
"""

import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from components.karpenter_api.common import INT32, INT64, KarpenterModel, ObjectMeta, Quantity
from components.karpenter_api.nodepool import NodeClassReference

__all__ = [
    "AMIFamily",
    "AMISelectorTerm",
    "BlockDevice",
    "BlockDeviceMapping",
    "CPUOptions",
    "CapacityReservationSelectorTerm",
    "ConnectionTracking",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "KubeletConfiguration",
    "MetadataOptions",
    "NetworkInterface",
    "PlacementGroupSelector",
    "SecurityGroupSelectorTerm",
    "SubnetSelectorTerm",
    "VolumeType",
]

AMIFamily = Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]
VolumeType = Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]
EnabledDisabled = Literal["enabled", "disabled"]

_ALIAS_FAMILIES: Final = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
_WINDOWS_FAMILIES: Final = ("windows2019", "windows2022", "windows2025")
_EVICTION_SIGNALS: Final = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
_RESERVED_RESOURCES: Final = ("cpu", "memory", "ephemeral-storage", "pid")
_EVICTION_THRESHOLD: Final = (
    r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)"
    r"|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$"
)
_VOLUME_SIZE: Final = (
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}"
    r"|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)


# ----------------------------------------------------------------------------------------------------
# Reusable checked types
# ----------------------------------------------------------------------------------------------------
def _check_selector_tags(tags: dict[str, str]) -> dict[str, str]:
    for key, value in tags.items():
        if key == "" or value == "":
            raise ValueError(
                f"selector tag {key!r}: {value!r} has an empty key or value; the value '*' matches any value"
            )
    return tags


SelectorTags = Annotated[dict[str, str], Field(max_length=20), AfterValidator(_check_selector_tags)]
"""Tags to select AWS resources by (at most 20; `'*'` as a value matches any value)."""


def _not_empty(field: str) -> AfterValidator:
    def check(value: str) -> str:
        if value == "":
            raise ValueError(f"{field} cannot be empty")
        return value

    return AfterValidator(check)


def _check_alias(alias: str) -> str:
    if not re.fullmatch(r"[a-zA-Z0-9]+@.+", alias):
        raise ValueError(f"alias {alias!r} is not of the form 'family@version', such as 'al2023@v20260714'")
    parts = alias.split("@")
    if parts[0] not in _ALIAS_FAMILIES:
        raise ValueError(
            f"alias family {parts[0]!r} is not supported; use one of {', '.join(_ALIAS_FAMILIES)}"
        )
    if parts[0] in _WINDOWS_FAMILIES and parts[1] != "latest":
        raise ValueError(
            f"alias {alias!r}: windows families cannot pin a version, only '{parts[0]}@latest' is accepted"
        )
    return alias


def _eviction_keys(field: str) -> AfterValidator:
    def check(thresholds: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(thresholds) - set(_EVICTION_SIGNALS))
        if unknown:
            raise ValueError(
                f"{field} has unknown eviction signal(s) {unknown}; valid: {list(_EVICTION_SIGNALS)}"
            )
        return thresholds

    return AfterValidator(check)


def _reserved(field: str) -> AfterValidator:
    def check(reserved: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(reserved) - set(_RESERVED_RESOURCES))
        if unknown:
            raise ValueError(
                f"{field} has unknown resource(s) {unknown}; valid resources are {list(_RESERVED_RESOURCES)}"
            )
        negative = sorted(key for key, value in reserved.items() if value.startswith("-"))
        if negative:
            raise ValueError(f"{field} cannot reserve a negative quantity (resources {negative})")
        return reserved

    return AfterValidator(check)


_SPEC_TAG_RESTRICTIONS: Final = (
    ("eks:eks-cluster-name", "EKS sets it on the cluster's own resources"),
    ("karpenter.sh/nodepool", "Karpenter sets it to the NodePool's name"),
    ("karpenter.sh/nodeclaim", "Karpenter sets it to the NodeClaim's name"),
    ("karpenter.k8s.aws/ec2nodeclass", "Karpenter sets it to the EC2NodeClass's name"),
)


def _check_spec_tags(tags: dict[str, str]) -> dict[str, str]:
    for key in tags:
        if key == "":
            raise ValueError("tags cannot have an empty key")
        for restricted, why in _SPEC_TAG_RESTRICTIONS:
            if key == restricted:
                raise ValueError(f"tag {key!r} is restricted: {why}")
        if key.startswith("kubernetes.io/cluster"):
            raise ValueError(
                f"tag {key!r} is restricted: 'kubernetes.io/cluster/...' tags are managed by Karpenter"
            )
    return tags


# ----------------------------------------------------------------------------------------------------
# Selector terms
# ----------------------------------------------------------------------------------------------------
class AMISelectorTerm(KarpenterModel):
    """One way to select AMIs; fields of a term are ANDed, terms are ORed. `alias` and `id` stand alone."""

    alias: Annotated[str, Field(max_length=30), AfterValidator(_check_alias)] | None = None
    """EKS-optimized AMI family and version, `family@version` (`al2023@v20260714`, `bottlerocket@v1.45.0`);
    windows families only accept `@latest`."""
    id: Annotated[str, Field(pattern=r"ami-[0-9a-z]+")] | None = None
    """AMI id."""
    name: str | None = None
    """AMI name (the name field, not the Name tag)."""
    owner: str | None = None
    """AMI owner: an account id, `self`, `amazon` or `aws-marketplace`."""
    ssm_parameter: str | None = Field(default=None, alias="ssmParameter")
    """Name or ARN of an SSM parameter holding the AMI id."""
    tags: SelectorTags | None = None
    """AMI tags."""


class CapacityReservationSelectorTerm(KarpenterModel):
    """One way to select capacity reservations; terms are ORed."""

    id: Annotated[str, Field(pattern=r"^cr-[0-9a-z]+$")] | None = None
    """Capacity reservation id."""
    instance_match_criteria: Literal["open", "targeted"] | None = Field(
        default=None, alias="instanceMatchCriteria"
    )
    """Which launches the reservation accepts."""
    owner_id: Annotated[str, Field(pattern=r"^[0-9]{12}$")] | None = Field(default=None, alias="ownerID")
    """Account id owning the reservation."""
    tags: SelectorTags | None = None
    """Reservation tags."""


class SecurityGroupSelectorTerm(KarpenterModel):
    """One way to select security groups; fields within a term are ANDed, terms are ORed."""

    id: Annotated[str, Field(pattern=r"sg-[0-9a-z]+")] | None = None
    """Security group id."""
    name: str | None = None
    """Security group name (the name field, not the Name tag)."""
    tags: SelectorTags | None = None
    """Security group tags, e.g. `{"karpenter.sh/discovery": "<cluster>"}`."""


class SubnetSelectorTerm(KarpenterModel):
    """One way to select subnets; fields within a term are ANDed, terms are ORed."""

    id: Annotated[str, Field(pattern=r"subnet-[0-9a-z]+")] | None = None
    """Subnet id."""
    tags: SelectorTags | None = None
    """Subnet tags, e.g. `{"karpenter.sh/discovery": "<cluster>"}`."""


class PlacementGroupSelector(KarpenterModel):
    """The placement group to launch into, by name or by id (exactly one)."""

    id: Annotated[str, Field(pattern=r"^pg-[0-9a-z]+$")] | None = None
    """Placement group id."""
    name: Annotated[str, Field(min_length=1)] | None = None
    """Placement group name."""

    @model_validator(mode="after")
    def _name_or_id(self) -> "PlacementGroupSelector":
        if self.name is None and self.id is None:
            raise ValueError("placementGroupSelector needs 'name' or 'id' (got neither)")
        if self.name is not None and self.id is not None:
            raise ValueError(
                "placementGroupSelector takes 'name' or 'id', not both: they are mutually exclusive"
            )
        return self


# ----------------------------------------------------------------------------------------------------
# Storage, network, instance options
# ----------------------------------------------------------------------------------------------------
class BlockDevice(KarpenterModel):
    """EBS parameters of a block device mapping."""

    delete_on_termination: bool | None = Field(default=None, alias="deleteOnTermination")
    """Delete the volume when the instance terminates."""
    encrypted: bool | None = None
    """Encrypt the volume."""
    iops: Annotated[int, INT64] | None = None
    """Provisioned IOPS (gp3 3000-16000, io1/io2 100-64000)."""
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    """KMS key (id, alias or ARN) for encryption."""
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    """Snapshot to create the volume from."""
    throughput: Annotated[int, INT64] | None = None
    """gp3 throughput in MiB/s (125-1000)."""
    volume_initialization_rate: Annotated[int, Field(ge=100, le=300), INT32] | None = Field(
        default=None, alias="volumeInitializationRate"
    )
    """Snapshot download rate in MiB/s (100-300); only with `snapshotID`."""
    volume_size: Annotated[str, Field(pattern=_VOLUME_SIZE)] | None = Field(default=None, alias="volumeSize")
    """Size with unit `Gi`, `G`, `Ti` or `T`, e.g. `200Gi`."""
    volume_type: VolumeType | None = Field(default=None, alias="volumeType")
    """EBS volume type."""

    @model_validator(mode="after")
    def _source_and_rate(self) -> "BlockDevice":
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("an EBS block device needs 'snapshotID' or 'volumeSize' (got neither)")
        if self.volume_initialization_rate is not None and not self.snapshot_id:
            raise ValueError(
                "'volumeInitializationRate' only applies to a volume created from 'snapshotID'; set it"
            )
        return self


class BlockDeviceMapping(KarpenterModel):
    """A block device attached to the instance."""

    device_name: str | None = Field(default=None, alias="deviceName")
    """Device name, e.g. `/dev/xvda`."""
    ebs: BlockDevice | None = None
    """EBS volume parameters."""
    root_volume: bool | None = Field(default=None, alias="rootVolume")
    """This volume holds the kubelet root dir (at most one mapping may say so)."""


class ConnectionTracking(KarpenterModel):
    """Idle connection-tracking timeouts (s) of the ENIs Karpenter provisions; at least one must be set."""

    tcp_established_timeout: Annotated[int, Field(ge=60, le=432000), INT32] | None = Field(
        default=None, alias="tcpEstablishedTimeout"
    )
    """Idle established TCP connections, 60-432000 s."""
    udp_stream_timeout: Annotated[int, Field(ge=60, le=180), INT32] | None = Field(
        default=None, alias="udpStreamTimeout"
    )
    """Idle UDP streams, 60-180 s."""
    udp_timeout: Annotated[int, Field(ge=30, le=60), INT32] | None = Field(default=None, alias="udpTimeout")
    """Idle one-direction UDP flows, 30-60 s."""

    @model_validator(mode="after")
    def _at_least_one(self) -> "ConnectionTracking":
        if (
            self.tcp_established_timeout is None
            and self.udp_stream_timeout is None
            and self.udp_timeout is None
        ):
            raise ValueError(
                "connectionTracking needs one of tcpEstablishedTimeout, udpStreamTimeout or udpTimeout"
            )
        return self


class CPUOptions(KarpenterModel):
    """CPU options of the instance."""

    nested_virtualization: EnabledDisabled | None = Field(default=None, alias="nestedVirtualization")
    """Enable nested virtualization (limits the instance types to those supporting it)."""


class KubeletConfiguration(KarpenterModel):
    """Kubelet settings of the nodes (a subset of the upstream KubeletConfiguration)."""

    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    """Cluster DNS server IPs."""
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")
    """Enforce CPU CFS quota for containers with CPU limits."""
    eviction_hard: (
        Annotated[
            dict[str, Annotated[str, Field(pattern=_EVICTION_THRESHOLD)]], _eviction_keys("evictionHard")
        ]
        | None
    ) = Field(default=None, alias="evictionHard")
    """Hard eviction thresholds per signal (`{"memory.available": "5%"}`)."""
    eviction_max_pod_grace_period: Annotated[int, INT32] | None = Field(
        default=None, alias="evictionMaxPodGracePeriod"
    )
    """Longest grace period (s) for pods evicted by soft thresholds."""
    eviction_soft: (
        Annotated[
            dict[str, Annotated[str, Field(pattern=_EVICTION_THRESHOLD)]], _eviction_keys("evictionSoft")
        ]
        | None
    ) = Field(default=None, alias="evictionSoft")
    """Soft eviction thresholds per signal; each needs an `evictionSoftGracePeriod` entry."""
    eviction_soft_grace_period: (
        Annotated[dict[str, str], _eviction_keys("evictionSoftGracePeriod")] | None
    ) = Field(default=None, alias="evictionSoftGracePeriod")
    """Grace period per soft eviction signal (`{"memory.available": "1m"}`)."""
    image_gc_high_threshold_percent: Annotated[int, Field(ge=0, le=100), INT32] | None = Field(
        default=None, alias="imageGCHighThresholdPercent"
    )
    """Disk usage (%) above which image GC always runs; must exceed the low threshold."""
    image_gc_low_threshold_percent: Annotated[int, Field(ge=0, le=100), INT32] | None = Field(
        default=None, alias="imageGCLowThresholdPercent"
    )
    """Disk usage (%) image GC frees down to."""
    kube_reserved: Annotated[dict[str, Quantity], _reserved("kubeReserved")] | None = Field(
        default=None, alias="kubeReserved"
    )
    """Resources reserved for Kubernetes daemons (`cpu`, `memory`, `ephemeral-storage`, `pid`)."""
    max_pods: Annotated[int, Field(ge=0), INT32] | None = Field(default=None, alias="maxPods")
    """Override of the node's pod capacity."""
    pods_per_core: Annotated[int, Field(ge=0), INT32] | None = Field(default=None, alias="podsPerCore")
    """Pods per CPU core (never more than maxPods)."""
    system_reserved: Annotated[dict[str, Quantity], _reserved("systemReserved")] | None = Field(
        default=None, alias="systemReserved"
    )
    """Resources reserved for OS daemons (`cpu`, `memory`, `ephemeral-storage`, `pid`)."""

    @model_validator(mode="after")
    def _cross_field(self) -> "KubeletConfiguration":
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and not high > low:
            raise ValueError(
                f"imageGCHighThresholdPercent ({high}) must exceed imageGCLowThresholdPercent ({low})"
            )
        soft, grace = self.eviction_soft or {}, self.eviction_soft_grace_period or {}
        if missing := sorted(set(soft) - set(grace)):
            raise ValueError(
                f"evictionSoft signal(s) {missing} need a matching evictionSoftGracePeriod entry"
            )
        if self.eviction_soft_grace_period is not None and (orphans := sorted(set(grace) - set(soft))):
            raise ValueError(
                f"evictionSoftGracePeriod signal(s) {orphans} have no matching evictionSoft threshold"
            )
        return self


class MetadataOptions(KarpenterModel):
    """Instance Metadata Service settings of the launch template."""

    http_endpoint: (
        Annotated[EnabledDisabled, Field(json_schema_extra={"serverDefault": "enabled"})] | None
    ) = Field(default=None, alias="httpEndpoint")
    """IMDS endpoint on or off. Server default: `enabled`."""
    http_protocol_ipv6: (
        Annotated[EnabledDisabled, Field(json_schema_extra={"serverDefault": "disabled"})] | None
    ) = Field(default=None, alias="httpProtocolIPv6")
    """IMDS IPv6 endpoint. Server default: `disabled`."""
    http_put_response_hop_limit: (
        Annotated[int, Field(ge=1, le=64, json_schema_extra={"serverDefault": 1}), INT64] | None
    ) = Field(default=None, alias="httpPutResponseHopLimit")
    """IMDS PUT response hop limit, 1-64; 1 keeps IMDS out of reach of pods. Server default: `1`."""
    http_tokens: (
        Annotated[Literal["required", "optional"], Field(json_schema_extra={"serverDefault": "required"})]
        | None
    ) = Field(default=None, alias="httpTokens")
    """`required` is IMDSv2 only. Server default: `required`."""


class NetworkInterface(KarpenterModel):
    """A network interface (ENA or EFA-only) attached to the instance."""

    device_index: Annotated[int, Field(ge=0), INT32] = Field(alias="deviceIndex")
    """Device index of the attachment."""
    interface_type: Literal["interface", "efa-only"] = Field(alias="interfaceType")
    """`interface` (ENA, optionally with EFA) or `efa-only`."""
    network_card_index: Annotated[int, Field(ge=0), INT32] = Field(alias="networkCardIndex")
    """Network card the interface attaches to."""


# ----------------------------------------------------------------------------------------------------
# spec and object
# ----------------------------------------------------------------------------------------------------
class EC2NodeClassSpec(KarpenterModel):
    """Spec of an EC2NodeClass: how Karpenter launches instances in AWS."""

    ami_family: AMIFamily | None = Field(default=None, alias="amiFamily")
    """User data format and default block devices; optional with an alias term (inferred from it), then only
    its own family or `Custom` is allowed. Required without an alias."""
    ami_selector_terms: Annotated[list[AMISelectorTerm], Field(min_length=1, max_length=30)] = Field(
        alias="amiSelectorTerms"
    )
    """AMI selector terms (ORed); a term with `alias` must be the only term."""
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    """Assign public IPs to the instances."""
    block_device_mappings: Annotated[list[BlockDeviceMapping], Field(max_length=50)] | None = Field(
        default=None, alias="blockDeviceMappings"
    )
    """Block devices; at most one with `rootVolume: true`. Unset uses the AMI family's defaults."""
    capacity_reservation_selector_terms: (
        Annotated[list[CapacityReservationSelectorTerm], Field(max_length=30)] | None
    ) = Field(default=None, alias="capacityReservationSelectorTerms")
    """Capacity reservations that may be used (ORed). Do not write an empty list: the CRD rejects it."""
    connection_tracking: ConnectionTracking | None = Field(default=None, alias="connectionTracking")
    """Connection tracking timeouts of the ENIs."""
    context: str | None = None
    """Reserved EC2 Fleet `Context` field."""
    cpu_options: CPUOptions | None = Field(default=None, alias="cpuOptions")
    """CPU options."""
    detailed_monitoring: bool | None = Field(default=None, alias="detailedMonitoring")
    """Enable CloudWatch detailed monitoring."""
    instance_profile: Annotated[str, _not_empty("instanceProfile")] | None = Field(
        default=None, alias="instanceProfile"
    )
    """Existing instance profile for the nodes; exactly one of `role` and `instanceProfile`."""
    instance_store_policy: Literal["RAID0"] | None = Field(default=None, alias="instanceStorePolicy")
    """`RAID0` assembles the instance-store NVMe disks into one array for kubelet and containers."""
    ip_prefix_count: Annotated[int, Field(ge=0), INT32] | None = Field(default=None, alias="ipPrefixCount")
    """IPv4 prefixes to assign to the primary network interface."""
    kubelet: KubeletConfiguration | None = None
    """Kubelet settings."""
    metadata_options: (
        Annotated[
            MetadataOptions,
            Field(
                json_schema_extra={
                    "serverDefault": {
                        "httpEndpoint": "enabled",
                        "httpProtocolIPv6": "disabled",
                        "httpPutResponseHopLimit": 1,
                        "httpTokens": "required",
                    }
                }
            ),
        ]
        | None
    ) = Field(default=None, alias="metadataOptions")
    """IMDS settings. Server default: endpoint enabled, IPv6 off, hop limit 1, tokens required (IMDSv2)."""
    network_interfaces: Annotated[list[NetworkInterface], Field(max_length=150)] | None = Field(
        default=None, alias="networkInterfaces"
    )
    """Explicit network interfaces (EFA); must include the primary `interface` at card 0, device 0."""
    placement_group_selector: PlacementGroupSelector | None = Field(
        default=None, alias="placementGroupSelector"
    )
    """Placement group to launch into."""
    role: Annotated[str, _not_empty("role")] | None = None
    """Name of the node IAM role (Karpenter creates the instance profile); exactly one of `role` and
    `instanceProfile`."""
    security_group_selector_terms: Annotated[list[SecurityGroupSelectorTerm], Field(max_length=30)] = Field(
        alias="securityGroupSelectorTerms"
    )
    """Security group selector terms (ORed); at least one."""
    subnet_selector_terms: Annotated[list[SubnetSelectorTerm], Field(max_length=30)] = Field(
        alias="subnetSelectorTerms"
    )
    """Subnet selector terms (ORed); at least one."""
    tags: Annotated[dict[str, str], AfterValidator(_check_spec_tags)] | None = None
    """Tags for instances, volumes, launch templates; Karpenter's and EKS's own tags are restricted."""
    user_data: str | None = Field(default=None, alias="userData")
    """Extra user data in the AMI family's format; Karpenter merges its own into it."""

    @field_validator("ami_selector_terms")
    @classmethod
    def _ami_terms(cls, terms: list[AMISelectorTerm]) -> list[AMISelectorTerm]:
        for term in terms:
            if all(v is None for v in (term.tags, term.id, term.name, term.alias, term.ssm_parameter)):
                raise ValueError(
                    "an amiSelectorTerm needs one of 'tags', 'id', 'name', 'alias' or 'ssmParameter' "
                    "('owner' alone selects nothing)"
                )
            mixed = [
                key
                for key, value in (("tags", term.tags), ("name", term.name), ("owner", term.owner))
                if value is not None
            ]
            if term.id is not None and (term.alias is not None or mixed):
                raise ValueError(
                    f"amiSelectorTerm 'id' cannot be combined with {mixed or ['alias']} in the same term: "
                    "an id already selects exactly one AMI"
                )
            if term.alias is not None and mixed:
                raise ValueError(
                    f"amiSelectorTerm 'alias' cannot be combined with {mixed} in the same term: "
                    "an alias already selects the EKS-optimized AMIs"
                )
        if len(terms) != 1 and any(term.alias is not None for term in terms):
            raise ValueError(
                f"an amiSelectorTerm with 'alias' must be the only term (got {len(terms)} terms)"
            )
        return terms

    @field_validator("block_device_mappings")
    @classmethod
    def _one_root_volume(cls, mappings: list[BlockDeviceMapping] | None) -> list[BlockDeviceMapping] | None:
        if mappings and sum(1 for m in mappings if m.root_volume is True) > 1:
            raise ValueError("only one blockDeviceMapping may set rootVolume: true")
        return mappings

    @field_validator("capacity_reservation_selector_terms")
    @classmethod
    def _capacity_reservation_terms(
        cls, terms: list[CapacityReservationSelectorTerm] | None
    ) -> list[CapacityReservationSelectorTerm] | None:
        if terms is None:
            return terms
        for term in terms:
            if term.tags is None and term.id is None and term.instance_match_criteria is None:
                raise ValueError(
                    "a capacityReservationSelectorTerm needs one of 'tags', 'id' or 'instanceMatchCriteria'"
                )
        # CRD: !self.all(x, has(x.id) && (...)) - refuses only when every term mixes, and refuses [].
        if all(
            t.id is not None
            and (t.tags is not None or t.owner_id is not None or t.instance_match_criteria is not None)
            for t in terms
        ):
            if not terms:
                raise ValueError(
                    "capacityReservationSelectorTerms cannot be an empty list; leave the field out"
                )
            raise ValueError(
                "capacityReservationSelectorTerm 'id' cannot be combined with 'tags', 'ownerID' or "
                "'instanceMatchCriteria' in the same term"
            )
        return terms

    @field_validator("network_interfaces")
    @classmethod
    def _network_interfaces(cls, interfaces: list[NetworkInterface] | None) -> list[NetworkInterface] | None:
        if not interfaces:
            return interfaces
        if not any(
            i.device_index == 0 and i.network_card_index == 0 and i.interface_type == "interface"
            for i in interfaces
        ):
            raise ValueError(
                "networkInterfaces must include the primary interface: "
                "networkCardIndex 0, deviceIndex 0, interfaceType 'interface'"
            )
        for i in interfaces:
            same_slot = [
                j
                for j in interfaces
                if (j.network_card_index, j.device_index) == (i.network_card_index, i.device_index)
            ]
            if len(same_slot) != 1:
                raise ValueError(
                    f"networkInterfaces repeat networkCardIndex {i.network_card_index} / deviceIndex "
                    f"{i.device_index}: each pair may appear once"
                )
            efa_on_card = [
                j
                for j in interfaces
                if j.network_card_index == i.network_card_index and j.interface_type == "efa-only"
            ]
            if i.interface_type == "efa-only" and len(efa_on_card) != 1:
                raise ValueError(
                    f"network card {i.network_card_index} has {len(efa_on_card)} 'efa-only' interfaces; "
                    "at most one per card"
                )
        return interfaces

    @field_validator("security_group_selector_terms")
    @classmethod
    def _security_group_terms(cls, terms: list[SecurityGroupSelectorTerm]) -> list[SecurityGroupSelectorTerm]:
        if not terms:
            raise ValueError("securityGroupSelectorTerms needs at least one term")
        for term in terms:
            if term.tags is None and term.id is None and term.name is None:
                raise ValueError("a securityGroupSelectorTerm needs at least one of 'tags', 'id' or 'name'")
        # CRD: !self.all(x, ...) - refuses only when every term mixes the fields.
        if all(t.id is not None and (t.tags is not None or t.name is not None) for t in terms):
            raise ValueError(
                "securityGroupSelectorTerm 'id' cannot be combined with 'tags' or 'name' in the same term"
            )
        if all(t.name is not None and (t.tags is not None or t.id is not None) for t in terms):
            raise ValueError(
                "securityGroupSelectorTerm 'name' cannot be combined with 'tags' or 'id' in the same term"
            )
        return terms

    @field_validator("subnet_selector_terms")
    @classmethod
    def _subnet_terms(cls, terms: list[SubnetSelectorTerm]) -> list[SubnetSelectorTerm]:
        if not terms:
            raise ValueError("subnetSelectorTerms needs at least one term")
        for term in terms:
            if term.tags is None and term.id is None:
                raise ValueError("a subnetSelectorTerm needs 'tags' or 'id'")
        # CRD: !self.all(x, ...) - refuses only when every term mixes the fields.
        if all(t.id is not None and t.tags is not None for t in terms):
            raise ValueError("subnetSelectorTerm 'id' cannot be combined with 'tags' in the same term")
        return terms

    @model_validator(mode="after")
    def _identity_and_family(self) -> "EC2NodeClassSpec":
        if (self.role is None) == (self.instance_profile is None):
            raise ValueError(
                "set exactly one of 'role' and 'instanceProfile' "
                f"(got {'both' if self.role is not None else 'neither'})"
            )
        alias_families = [
            _alias_family(term.alias) for term in self.ami_selector_terms if term.alias is not None
        ]
        if self.ami_family is not None:
            for family in alias_families:
                expected = _ALIAS_FAMILIES.get(family)
                if expected is not None and self.ami_family not in (expected, "Custom"):
                    raise ValueError(
                        f"amiFamily {self.ami_family!r} contradicts the {family!r} alias: with it, amiFamily "
                        f"must be '{expected}' or 'Custom' (or left out)"
                    )
        elif not alias_families:
            raise ValueError("amiFamily is required when no amiSelectorTerm uses an 'alias'")
        return self


def _alias_family(alias: str) -> str:
    """The CRD's `alias.find('^[^@]+')`: the part before the first `@`."""
    match = re.search(r"^[^@]+", alias)
    return match.group(0) if match else ""


class EC2NodeClass(KarpenterModel):
    """A `karpenter.k8s.aws/v1` EC2NodeClass. `status` is controller-owned and deliberately not modelled."""

    api_version: Literal["karpenter.k8s.aws/v1"] = Field(default="karpenter.k8s.aws/v1", alias="apiVersion")
    """Always `karpenter.k8s.aws/v1`."""
    kind: Literal["EC2NodeClass"] = "EC2NodeClass"
    """Always `EC2NodeClass`."""
    metadata: ObjectMeta
    """Name, labels and annotations of the EC2NodeClass (cluster-scoped)."""
    spec: EC2NodeClassSpec
    """Spec."""

    def node_class_ref(self) -> NodeClassReference:
        """The `nodeClassRef` a NodePool uses to point at this node class."""
        return NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name=self.metadata.name)
