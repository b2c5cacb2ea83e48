"""AWS partitions and the checks that keep every ARN and name in one partition, region and account.

The functions in this package run inside `Output.apply` with resolved values; a wrong input raises
`ValueError` with a message naming the argument, which Pulumi reports against the resource being built.
"""

import re
from typing import Final, Literal, get_args

Partition = Literal["aws", "aws-cn", "aws-us-gov"]
"""The AWS partitions this program supports (`aws.get_partition().partition`)."""

PARTITIONS: Final[tuple[Partition, ...]] = get_args(Partition)

DNS_SUFFIXES: Final[dict[Partition, str]] = {
    "aws": "amazonaws.com",
    "aws-cn": "amazonaws.com.cn",
    "aws-us-gov": "amazonaws.com",
}
"""`${AWS::URLSuffix}` of each partition (`aws.get_partition().dns_suffix`)."""

_REGION = re.compile(r"^(us|eu|ap|sa|ca|me|af|il|mx|cn|us-gov)-[a-z]+-\d$")
_ACCOUNT_ID = re.compile(r"^\d{12}$")
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
_ARN = re.compile(
    r"^arn:(?P<partition>[a-z-]+):(?P<service>[a-z0-9-]+):(?P<region>[a-z0-9-]*):(?P<account>\d{12})?:"
)


def dns_suffix(partition: Partition) -> str:
    """The DNS suffix of service principals and endpoints in `partition` (`amazonaws.com[.cn]`)."""
    return DNS_SUFFIXES[check_partition(partition)]


def check_partition(partition: str) -> Partition:
    """`partition` if it is one of `PARTITIONS`, else `ValueError`."""
    for known in PARTITIONS:
        if partition == known:
            return known
    raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}, got {partition!r}")


def partition_of_region(region: str) -> Partition:
    """The partition a region belongs to (`cn-*` -> `aws-cn`, `us-gov-*` -> `aws-us-gov`, else `aws`)."""
    if not _REGION.match(region):
        raise ValueError(f"region must be an AWS region name such as us-west-2, got {region!r}")
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def check_region(region: str, partition: Partition) -> str:
    """`region` if it is a region of `partition`, else `ValueError`."""
    if partition_of_region(region) != partition:
        raise ValueError(
            f"region {region!r} is in partition {partition_of_region(region)!r}, not in {partition!r}"
        )
    return region


def check_account_id(account_id: str) -> str:
    """`account_id` if it is 12 digits, else `ValueError`."""
    if not _ACCOUNT_ID.match(account_id):
        raise ValueError(f"account_id must be 12 digits, got {account_id!r}")
    return account_id


def check_cluster_name(cluster_name: str) -> str:
    """`cluster_name` if EKS accepts it (1-100 letters, digits, `-`, `_`, starting alphanumeric)."""
    if not _CLUSTER_NAME.match(cluster_name):
        raise ValueError(
            "cluster_name must be 1-100 letters, digits, '-' or '_', starting with a letter or digit, "
            f"got {cluster_name!r}"
        )
    return cluster_name


def partition_of_arn(arn: str, *, argument: str) -> Partition:
    """The partition of `arn`, or `ValueError` naming `argument` if it is no ARN of a supported partition."""
    match = _ARN.match(arn)
    if match is None:
        raise ValueError(f"{argument} must be an ARN, got {arn!r}")
    try:
        return check_partition(match["partition"])
    except ValueError as exc:
        raise ValueError(f"{argument}: {exc}") from exc


def check_arn(
    arn: str,
    *,
    service: str,
    partition: Partition,
    argument: str,
    region: str | None = None,
    account_id: str | None = None,
) -> str:
    """`arn` if it is an ARN of `service` in `partition` (and `region`, `account_id` when given).

    Raises `ValueError` naming `argument` otherwise: a role or queue from another account, region or
    partition would give a policy that silently grants nothing.
    """
    match = _ARN.match(arn)
    if match is None:
        raise ValueError(f"{argument} must be an ARN, got {arn!r}")
    if match["service"] != service:
        raise ValueError(f"{argument} must be an ARN of service {service!r}, got {arn!r}")
    if match["partition"] != partition:
        raise ValueError(f"{argument} is in partition {match['partition']!r}, not in {partition!r}: {arn!r}")
    if region is not None and match["region"] != region:
        raise ValueError(f"{argument} is in region {match['region']!r}, not in {region!r}: {arn!r}")
    if account_id is not None and match["account"] != account_id:
        raise ValueError(f"{argument} is in account {match['account']!r}, not in {account_id!r}: {arn!r}")
    return arn
