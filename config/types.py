"""Reusable, validated domain types for config sections, so every section accepts the same forms.

Each type carries a human description: a value that does not fit is refused with "must be <description>",
which the loader turns into a message naming the config key.
"""

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, Field


def _matching(pattern: str, description: str) -> Callable[[str], str]:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {description}")
        return value

    return check


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


VpcCidr = Annotated[str, AfterValidator(_check_vpc_cidr)]
"""An IPv4 VPC CIDR from /16 to /20."""

CidrBlock = Annotated[str, AfterValidator(_check_cidr_block)]
"""Any IPv4 or IPv6 CIDR block (for allow lists)."""

AwsRegion = Annotated[
    str,
    AfterValidator(
        _matching(r"(us|eu|ap|sa|ca|me|af|il|mx|cn|us-gov)-[a-z]+-\d", "an AWS region such as us-west-2")
    ),
]

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

_QUANTITY = (
    r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?"
)
Quantity = Annotated[
    str, AfterValidator(_matching(_QUANTITY, "a Kubernetes quantity such as 256, 1Ti or 500m"))
]

_DURATION = r"([0-9]+(s|m|h))+"
GoDuration = Annotated[str, AfterValidator(_matching(_DURATION, "a duration such as 30s, 5m, 336h or 1h30m"))]

DurationOrNever = Annotated[
    str, AfterValidator(_matching(rf"{_DURATION}|Never", "a duration such as 30s, 5m or 336h, or Never"))
]
"""A `GoDuration`, or `Never` where Karpenter accepts it (consolidateAfter, expireAfter)."""

_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")
_SECONDS = {"s": 1, "m": 60, "h": 3600}


def duration_seconds(value: str) -> int:
    """Seconds in a `GoDuration` string (`1h30m` -> 5400)."""
    return sum(int(n) * _SECONDS[unit] for n, unit in _DURATION_PART.findall(value))


InstanceType = Annotated[
    str,
    AfterValidator(
        _matching(r"[a-z][a-z0-9-]*\.[a-z0-9-]+", "an EC2 instance type such as m7i.large or g6e.xlarge")
    ),
]

PositiveInt = Annotated[int, Field(ge=1)]
