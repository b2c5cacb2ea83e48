"""Reusable, validated domain types for config sections, so every section accepts the same forms.

Each type carries a human description: a value that does not fit is refused with "must be <description>",
which the loader turns into a message naming the config key.
"""

import difflib
import ipaddress
import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, Strict

from facts.cron import check_schedule
from facts.partitions import PARTITIONS
from facts.quantity import QUANTITY_PATTERN, parse_quantity
from facts.regions import region_partition, regions

_Item = TypeVar("_Item", bound=Hashable)


def repeated(values: Sequence[_Item]) -> list[_Item]:
    """The items `values` holds more than once, sorted by their text (for a message naming them)."""
    return sorted({v for v in values if values.count(v) > 1}, key=str)


def _matching(pattern: str, description: str) -> Callable[[str], str]:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {description}")
        return value

    return check


def described(pattern: str, description: str) -> AfterValidator:
    """A validator refusing what does not match `pattern` with "must be <description>" (no regex shown)."""
    return AfterValidator(_matching(pattern, description))


def _check_vpc_cidr(value: str) -> str:
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 network in CIDR form such as 10.20.0.0/16 ({exc})") from exc
    if not 16 <= network.prefixlen <= 20:
        raise ValueError("must be a VPC CIDR from /16 to /20 (room for private subnets of at least /22)")
    return str(network)


def _check_cidr_block(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"must be a CIDR block such as 203.0.113.0/24 ({exc})") from exc


_NOT_PUBLIC = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this" network
        "10.0.0.0/8",  # RFC 1918
        "100.64.0.0/10",  # carrier-grade NAT (RFC 6598)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local
        "172.16.0.0/12",  # RFC 1918
        "192.0.0.0/24",
        "192.168.0.0/16",  # RFC 1918
        "198.18.0.0/15",  # benchmarking
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",
        "::1/128",
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
    )
)
"""Ranges from which no request reaches a public endpoint (IANA special-purpose registries, RFC 6890)."""


DOCUMENTATION_RANGES = tuple(
    ipaddress.ip_network(n)
    for n in (
        "192.0.2.0/24",  # TEST-NET-1 (RFC 5737)
        "198.51.100.0/24",  # TEST-NET-2 (RFC 5737)
        "203.0.113.0/24",  # TEST-NET-3 (RFC 5737)
        "2001:db8::/32",  # IPv6 documentation prefix (RFC 3849)
    )
)
"""Ranges reserved for examples in documentation: no real host sends from them, so an allow list entry
inside one is a placeholder nobody replaced."""


def _range_holding(
    cidr: str, ranges: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The first of `ranges` that holds the (valid) CIDR block `cidr`, if any."""
    network = ipaddress.ip_network(cidr)
    return next(
        (n for n in ranges if n.version == network.version and network.subnet_of(n)),  # type: ignore[arg-type]
        None,
    )


def documentation_range(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The documentation range that holds `cidr` (a valid CIDR block), if any."""
    return _range_holding(cidr, DOCUMENTATION_RANGES)


def _check_public_cidr(value: str) -> str:
    inside = _range_holding(_check_cidr_block(value), _NOT_PUBLIC)
    if inside is not None:
        raise ValueError(
            f"must be a public range: {value} is private or reserved address space ({inside}), from which no "
            "request reaches the public endpoint; use privateAccess to reach the API from inside the VPC"
        )
    return value


VpcCidr = Annotated[str, AfterValidator(_check_vpc_cidr)]
"""An IPv4 VPC CIDR from /16 to /20."""


def _check_ipv4_cidr_block(value: str) -> str:
    if ipaddress.ip_network(_check_cidr_block(value)).version != 4:
        raise ValueError(
            "must be an IPv4 CIDR block such as 10.20.0.0/16: the cluster is IPv4, so its private endpoint "
            "has IPv4 addresses only, which no IPv6 source reaches"
        )
    return value


PrivateAccessCidr = Annotated[str, AfterValidator(_check_ipv4_cidr_block)]
"""An IPv4 CIDR block (allow list of the private endpoint of an IPv4 cluster)."""

PublicCidr = Annotated[str, AfterValidator(_check_public_cidr)]
"""A CIDR block of public addresses (allow list of a public endpoint)."""


def _check_region(value: str) -> str:
    known = regions()
    if value not in known:
        close = difflib.get_close_matches(value, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"must be an AWS region such as us-west-2 (not one the AWS provider knows){hint}")
    partition = region_partition(value)
    if partition not in PARTITIONS:
        raise ValueError(
            f"is a region of the {partition} partition; gpu-eks supports {', '.join(PARTITIONS)} "
            "(EKS, Karpenter and the NVIDIA AMIs are built and tested there)"
        )
    return value


AwsRegion = Annotated[str, AfterValidator(_check_region)]
"""A region of a supported partition, as the AWS provider knows them (`pulumi_aws.Region`)."""

AwsProfile = Annotated[
    str,
    described(
        r"[^\[\]\x00-\x1f]+",
        "the name of an AWS CLI profile (a [profile <name>] of ~/.aws/config), such as ml-platform; leave "
        "aws:profile out to use the default credentials",
    ),
]
"""An AWS CLI profile name: what goes between `[profile ` and `]` (botocore's config parser)."""

IamRoleArn = Annotated[
    str,
    AfterValidator(
        _matching(
            r"arn:aws(-cn|-us-gov)?:iam::\d{12}:role/[\w+=,.@/-]{1,512}",
            "an IAM role ARN such as arn:aws:iam::111122223333:role/platform-admin",
        )
    ),
]

SecurityGroupId = Annotated[
    str,
    AfterValidator(_matching(r"sg-[0-9a-f]{8,17}", "a security group id such as sg-0123456789abcdef0")),
]

SemVer = Annotated[
    str, AfterValidator(_matching(r"\d+\.\d+\.\d+", "a version X.Y.Z without a 'v' prefix, such as 1.14.1"))
]

KubernetesName = Annotated[
    str,
    Field(max_length=63),
    AfterValidator(
        _matching(
            r"[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            "a DNS-1123 label: lower-case letters, digits and '-', letter or digit at both ends",
        )
    ),
]


def number_as_text(value: Any) -> Any:
    """An unquoted YAML number (`nvidia.com/gpu: 16`) as the string Kubernetes reads it as (int-or-string)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(number_as_text),
    AfterValidator(_matching(QUANTITY_PATTERN, "a Kubernetes quantity such as 256, 1Ti or 500m")),
]
"""A Kubernetes quantity; an unquoted number is accepted, as Kubernetes accepts int-or-string."""


def _positive(value: str) -> str:
    if parse_quantity(value) <= 0:
        raise ValueError("must be above zero: a pool capped at zero or below can never launch a node")
    return value


PositiveQuantity = Annotated[Quantity, AfterValidator(_positive)]
"""A quantity above zero (a pool's limits)."""

_MAX_DURATION_NS = 2**63 - 1
"""Go's `time.Duration` is an int64 of nanoseconds: `time.ParseDuration` refuses anything longer."""
_UNIT_NS = {"s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION = r"([0-9]+(s|m|h))+"
_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")
_DURATION_HINTS = {
    "d": "days are not a unit: write hours (14d is 336h)",
    "w": "weeks are not a unit: write hours",
}


def _duration_check(pattern: str, description: str) -> Callable[[str], str]:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if value == "Never" and "Never" in pattern:
            return value
        if not compiled.fullmatch(value):
            unit = re.fullmatch(r"[0-9.]+\s*([a-zA-Z]+)", value)
            hint = _DURATION_HINTS.get(unit[1].lower()[:1], "") if unit else ""
            if "." in value:
                hint = "write whole numbers (1h30m, not 1.5h)"
            raise ValueError(f"must be {description}" + (f"; {hint}" if hint else ""))
        total = sum(int(n) * _UNIT_NS[u] for n, u in _DURATION_PART.findall(value))
        if total > _MAX_DURATION_NS:
            raise ValueError(
                f"must be {description}; {value} is longer than Go durations go (about 2562047h)"
            )
        return value

    return check


GoDuration = Annotated[
    str,
    AfterValidator(_duration_check(_DURATION, "a duration such as 30s, 5m, 336h or 1h30m (units s, m, h)")),
]
"""A duration as Karpenter's CRDs accept it (`^([0-9]+(s|m|h))+$`) and Go's `time.ParseDuration` reads it."""

DurationOrNever = Annotated[
    str,
    AfterValidator(
        _duration_check(rf"{_DURATION}|Never", "a duration such as 30s, 5m or 336h (units s, m, h), or Never")
    ),
]
"""A `GoDuration`, or `Never` where Karpenter accepts it (consolidateAfter, expireAfter)."""


def duration_seconds(value: str) -> int:
    """Seconds in a `GoDuration` string (`1h30m` -> 5400)."""
    return sum(int(n) * _UNIT_NS[unit] for n, unit in _DURATION_PART.findall(value)) // 10**9


def go_duration(seconds: int) -> str:
    """`duration_seconds` the other way: `86400` -> `24h`, `87000` -> `24h10m`, as Karpenter and Prometheus
    spell durations."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)
    return text or "0s"


def _nonzero(value: str) -> str:
    if all(int(n) == 0 for n, _ in _DURATION_PART.findall(value)):
        raise ValueError("must be longer than zero: a budget active for no time never applies")
    return value


BudgetDuration = Annotated[
    str,
    AfterValidator(
        _duration_check(
            r"(([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?",
            "whole hours and minutes such as 10h, 90m or 1h30m (Karpenter's budget schema takes no seconds)",
        )
    ),
    AfterValidator(_nonzero),
]
"""How long a budget stays active: the NodePool CRD's `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`."""


def _check_schedule(value: str) -> str:
    try:
        return check_schedule(value)
    except ValueError as exc:
        raise ValueError(
            f"must be a cron schedule Karpenter can read, such as '0 8 * * mon-fri' or @daily: {exc}"
        ) from exc


CronSchedule = Annotated[str, AfterValidator(_check_schedule)]
"""A disruption-budget schedule as Karpenter 1.14.1 parses it (`facts.cron`)."""

PinnedImage = Annotated[
    str,
    described(
        r"[a-z0-9][a-z0-9._/:-]*(:[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}",
        "an image pinned by digest, such as registry/repo:tag@sha256:<64 hex digits>, so every pod runs the "
        "same image (find the digest with `docker buildx imagetools inspect <image>` or "
        "`crane digest <image>`)",
    ),
]
"""A container image reference with its `@sha256:` digest (the smoke test's, the GPU node guard's)."""

InstanceType = Annotated[
    str,
    AfterValidator(
        _matching(r"[a-z][a-z0-9-]*\.[a-z0-9-]+", "an EC2 instance type such as m7i.large or g6e.xlarge")
    ),
]

Flag = Annotated[bool, Strict()]
"""`true` or `false`, unquoted, as YAML writes a boolean: pydantic's lax mode would also take 1 and 0 and
strings such as "yes", "off" or "false", so a quoted or mistyped value would pass as a setting."""

WholeNumber = Annotated[int, Strict()]
"""An integer as the stack file writes it: lax mode would also take `true` (as 1), a quoted "3" and 3.0, none
of which Kubernetes or AWS would accept in an integer field."""

PositiveInt = Annotated[int, Strict(), Field(ge=1)]

_TAG_CHARS = re.compile(r"[\w\s.:/=+\-@]*")
"""AWS tag keys and values: letters, digits, spaces and `_ . : / = + - @` (AWS Tagging Best Practices,
"Tag naming limits and requirements"; IAM, EKS, SQS and EC2 apply the same set)."""
MAX_TAGS = 41
"""AWS allows 50 tags per resource. The most crowded are the GPU nodes' instances and volumes: gpu-eks tags
them `gpu-eks/stack`, `gpu-eks/cluster` and `gpu-eks/pool` (their EC2NodeClass), and Karpenter adds six of
its own (`Name`, `karpenter.sh/nodepool`, `karpenter.sh/nodeclaim`, `karpenter.k8s.aws/ec2nodeclass`,
`kubernetes.io/cluster/<name>`, `eks:eks-cluster-name`; aws/karpenter-provider-aws@c88abbbad455
`pkg/utils/utils.go` `GetTags` and `pkg/controllers/nodeclaim/tagging/controller.go`), which leaves 41 for
the configuration."""
GPU_EKS_TAG_PREFIX = "gpu-eks/"
"""The tags gpu-eks sets itself (`gpu-eks/stack`, `gpu-eks/cluster`, `gpu-eks/pool`); `cluster.tags` may not
use it."""
_RESERVED_TAGS = (
    (GPU_EKS_TAG_PREFIX, "is set by gpu-eks itself"),
    ("karpenter.sh/discovery", "marks the subnets and security group Karpenter launches nodes into"),
    ("kubernetes.io/cluster", "is managed by EKS and Karpenter"),
    ("karpenter.sh/", "is Karpenter's own (its EC2NodeClass refuses karpenter.sh/nodepool and nodeclaim)"),
    ("karpenter.k8s.aws/", "is Karpenter's own"),
    ("eks:", "is reserved for EKS (Karpenter's EC2NodeClass refuses eks:eks-cluster-name)"),
)


def _check_tags(tags: dict[str, str]) -> dict[str, str]:
    if len(tags) > MAX_TAGS:
        raise ValueError(
            f"has {len(tags)} tags; AWS allows 50 per resource, and gpu-eks and Karpenter add up to 9 to a "
            f"GPU node: at most {MAX_TAGS}"
        )
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            raise ValueError(f"tag key {key!r}: the aws: prefix is reserved for AWS, which refuses it")
        reserved = next((why for prefix, why in _RESERVED_TAGS if key.startswith(prefix)), None)
        if reserved:
            raise ValueError(f"tag key {key!r} {reserved}; choose another key")
        if not 1 <= len(key) <= 128:
            raise ValueError(f"tag key {key!r} must have 1 to 128 characters, it has {len(key)}")
        if len(value) > 256:
            raise ValueError(f"tag {key!r}: values have at most 256 characters, this one {len(value)}")
        for text, what in ((key, "key"), (value, "value")):
            if not _TAG_CHARS.fullmatch(text):
                bad = sorted({ch for ch in text if not _TAG_CHARS.fullmatch(ch)})
                raise ValueError(
                    f"tag {what} {text!r} contains {' '.join(repr(c) for c in bad)}; AWS allows letters, "
                    "digits, spaces and _ . : / = + - @"
                )
    return tags


AwsTags = Annotated[dict[str, str], AfterValidator(_check_tags)]
"""Tags AWS accepts on every resource (keys, values, characters, count)."""
