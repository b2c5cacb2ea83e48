"""Reusable, validated domain types for config sections, so every section accepts the same forms."""

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints


def _check_cidr(value: str) -> str:
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 network in CIDR form such as 10.20.0.0/16 ({exc})") from exc
    if not 16 <= network.prefixlen <= 24:
        raise ValueError("VPC CIDR prefix must be between /16 and /24 (AWS allows no larger or smaller VPC)")
    return str(network)


VpcCidr = Annotated[str, AfterValidator(_check_cidr)]
"""An IPv4 VPC CIDR between /16 and /24."""

AwsRegion = Annotated[str, StringConstraints(pattern=r"^(us|eu|ap|sa|ca|me|af|il|mx|cn|us-gov)-[a-z]+-\d$")]
"""An AWS region name such as `us-west-2`."""

IamRoleArn = Annotated[
    str, StringConstraints(pattern=r"^arn:aws(-cn|-us-gov)?:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
]
"""The ARN of an IAM role, in any partition."""

KubernetesVersion = Annotated[str, StringConstraints(pattern=r"^1\.\d{2}$")]
"""A Kubernetes minor version such as `1.35` (quote it in YAML, or 1.30 becomes 1.3)."""

SemVer = Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")]
"""A release version `X.Y.Z` without a `v` prefix."""

KubernetesName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]
"""A DNS-1123 label: namespaces, release and pool names."""

_QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[str, StringConstraints(pattern=_QUANTITY)]
"""A Kubernetes resource quantity such as `256`, `1Ti` or `500m`."""

GoDuration = Annotated[str, StringConstraints(pattern=r"^([0-9]+(s|m|h))+$")]
"""A duration the Karpenter API accepts, such as `30s`, `5m`, `336h` or `1h30m`."""

PositiveInt = Annotated[int, Field(ge=1)]

_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")
_SECONDS = {"s": 1, "m": 60, "h": 3600}


def duration_seconds(value: str) -> int:
    """Seconds in a `GoDuration` string (`1h30m` -> 5400)."""
    return sum(int(n) * _SECONDS[unit] for n, unit in _DURATION_PART.findall(value))
