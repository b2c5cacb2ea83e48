"""AWS regions, from the pulumi-aws SDK's own list (pure; no Pulumi calls).

Source: `pulumi_aws.Region` (pulumi-aws 7.51.1, pinned in requirements.txt), the provider schema's enum of
"any valid Amazon region that may be targeted with deployments". A region newer than the pinned SDK is
refused until the SDK is bumped, which is also when the program's other AWS facts are reviewed.
"""

import functools

import pulumi_aws

_PREFIXES: tuple[tuple[str, str], ...] = (
    ("us-gov-", "aws-us-gov"),
    ("cn-", "aws-cn"),
    ("us-isob-", "aws-iso-b"),
    ("us-isof-", "aws-iso-f"),
    ("us-iso-", "aws-iso"),
    ("eu-isoe-", "aws-iso-e"),
    ("eusc-", "aws-eusc"),
)
"""Region-name prefixes of the partitions other than `aws` (botocore's partitions.json `regionRegex`)."""


def region_partition(region: str) -> str:
    """The partition a region name belongs to, supported by this program or not (`aws-iso`, ...)."""
    return next((partition for prefix, partition in _PREFIXES if region.startswith(prefix)), "aws")


@functools.cache
def regions() -> dict[str, str]:
    """Every region pulumi-aws knows -> its partition."""
    return {r.value: region_partition(r.value) for r in pulumi_aws.Region}
