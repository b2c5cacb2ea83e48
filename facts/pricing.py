"""EC2 on-demand list prices: the table Karpenter 1.14.1 is compiled with (pure; standard library only).

`facts/data/on-demand-prices-us-east-1.tsv` holds the map of aws/karpenter-provider-aws@c88abbbad455
`pkg/providers/pricing/zz_generated.pricing_aws.go` (extracted by `scripts/pricing_table.py`): on-demand USD
per hour of Linux instances with shared tenancy in us-east-1, as AWS's Price List API gave them when the file
was generated.

Which region's prices these are, and when Karpenter itself uses them (`pkg/providers/pricing/pricing.go` at
the same commit): the compiled tables are `InitialOnDemandPricesAWS` (us-east-1 only), `...USGov`
(us-gov-east-1, us-gov-west-1) and `...CN` (cn-north-1). `DefaultProvider.Reset` starts every controller
from its own region's table and, for any region not in them, "fall[s] back to the always available
us-east-1"; `UpdateOnDemandPricing` then replaces them with the region's live Price List prices, except in an
isolated VPC (`isolatedVPC`) and in GovCloud (no Price List API there), where the compiled table stays. So in
every commercial (`aws`) region other than us-east-1 these are Karpenter's fallback prices, not the region's
own; in aws-us-gov and aws-cn Karpenter uses its own tables (in CNY for China), which gpu-eks does not
vendor. Figures from this table are us-east-1 list prices wherever they are shown, and only estimate spend
in another region or partition.

The standard library only: the policy pack (its own virtualenv: pulumi, pulumi-policy) reads it too.
"""

import csv
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

PRICES_TSV = Path(__file__).parent / "data" / "on-demand-prices-us-east-1.tsv"

HOURS_PER_MONTH = 730
"""Hours in the month AWS's own price pages and the Pricing Calculator bill by (365 days x 24 h / 12)."""

PRICE_REGION = "us-east-1"
"""The one region of the vendored table."""


@dataclass(frozen=True)
class PriceTableSource:
    """Where the table comes from, read from its header line (shown beside every figure)."""

    commit: str
    """`aws/karpenter-provider-aws@<sha> (release v1.14.1)`."""
    changed_in: str
    """The commit that last changed the Go file, with its date and title."""
    generated_at: str
    """The Go file's own `// generated at <time>` stamp."""

    @property
    def label(self) -> str:
        """One line for a report: which prices, from where, of when."""
        return (
            f"{PRICE_REGION} on-demand list prices (USD) from Karpenter 1.14.1's compiled price table, "
            f"generated {self.generated_at[:10]}"
        )


_HEADER = re.compile(
    r"^# Source: (?P<commit>.+?), pkg/providers/pricing/zz_generated\.pricing_aws\.go, last changed in "
    r"(?P<changed_in>.+?); generated at (?P<generated_at>\S+) for us-east-1\."
)


@functools.cache
def price_table_source() -> PriceTableSource:
    """The vendored table's source, commit and generation time (from its header line)."""
    match = _HEADER.match(PRICES_TSV.read_text().splitlines()[0])
    if match is None:
        raise ValueError(f"{PRICES_TSV.name}: the header line does not name its source")
    return PriceTableSource(match["commit"], match["changed_in"], match["generated_at"])


@functools.cache
def on_demand_prices() -> Mapping[str, Decimal]:
    """Instance type -> on-demand USD per hour in us-east-1 (exact, as the table writes it)."""
    lines = [line for line in PRICES_TSV.read_text().splitlines() if not line.startswith("#")]
    return {row["instance"]: Decimal(row["usd-per-hour"]) for row in csv.DictReader(lines, delimiter="\t")}


def on_demand_price(instance_type: str) -> Decimal | None:
    """The on-demand USD per hour of an instance type, or None where the table has no price for it."""
    return on_demand_prices().get(instance_type)
