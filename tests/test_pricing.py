"""The vendored on-demand price table (`facts.pricing`): its source, its extraction, its coverage."""

from decimal import Decimal
from pathlib import Path

import pytest

from config.stack import parse_stack_config
from facts.instance_types import gpu_instance_types
from facts.pricing import PRICES_TSV, on_demand_price, on_demand_prices, price_table_source
from scripts.pricing_table import prices
from synth.runner import stack_config, stacks

README = Path(__file__).resolve().parent.parent / "facts" / "data" / "README.md"

# The shape of Karpenter's generated file (hack/code/prices_gen writePricing): a header comment, one map per
# region, a comment line per family, up to four "type": price pairs a line.
GO_SOURCE = """package pricing

// generated at 2026-07-06T14:20:29Z for us-east-1

var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{
\t// us-east-1
\t"us-east-1": {
\t\t// g6 family
\t\t"g6.12xlarge": 4.601600, "g6.xlarge": 0.804800,
\t\t// p6-b200 family
\t\t"p6-b200.48xlarge": 113.930000,
\t},
}
"""


def test_the_extractor_reads_every_price_of_the_one_region_as_written() -> None:
    generated_at, generated_for, region, table = prices(GO_SOURCE)
    assert (generated_at, generated_for, region) == ("2026-07-06T14:20:29Z", "us-east-1", "us-east-1")
    assert table == {"g6.12xlarge": "4.601600", "g6.xlarge": "0.804800", "p6-b200.48xlarge": "113.930000"}
    with pytest.raises(ValueError, match="one region map"):
        prices(GO_SOURCE.replace('"us-east-1": {', '"us-east-1": {\n\t},\n\t"us-east-2": {'))


def test_the_table_names_its_source_commit_and_generation_time() -> None:
    source = price_table_source()
    assert source.commit.startswith("aws/karpenter-provider-aws@c88abbbad455186e69e30296c595e474123e9bc1")
    assert source.changed_in.startswith("d8db158f5d435b5718d68aa13768204d69e18f19")
    assert source.generated_at == "2026-07-06T14:20:29Z"
    assert "us-east-1 on-demand list prices" in source.label


def test_the_table_is_whole_sorted_and_exact() -> None:
    rows = [line.split("\t") for line in PRICES_TSV.read_text().splitlines()[2:]]
    names = [row[0] for row in rows]
    assert names == sorted(set(names))
    assert len(rows) == len(on_demand_prices()) > 1300
    # Six decimals as the Go file writes them, read as exact decimals (no float rounding on the way).
    assert all(len(row[1].split(".")[1]) == 6 and Decimal(row[1]) > 0 for row in rows)
    assert on_demand_price("no-such.type") is None


@pytest.mark.parametrize("stack", stacks())
def test_every_instance_type_a_committed_pool_allows_has_a_price(stack: str) -> None:
    config = parse_stack_config(stack_config(stack))
    unpriced = {
        pool.name: sorted(
            {it.name for it in pool.launchable()}
            | {it.name for it in (pool.candidates() if pool.kind == "gpu" else ())}
        )
        for pool in config.node_pools
    }
    assert all(unpriced.values())
    assert {pool: [t for t in types if on_demand_price(t) is None] for pool, types in unpriced.items()} == {
        pool: [] for pool in unpriced
    }


def test_gpu_types_without_a_us_east_1_price_are_few_and_known() -> None:
    # The instance-type reference lists types that us-east-1 does not sell (or did not when the table was
    # generated); a pool that allows them has no list price to bound its spend with (pools.cost says so).
    missing = sorted(name for name in gpu_instance_types() if on_demand_price(name) is None)
    assert missing == [
        "g7.12xlarge",
        "g7.24xlarge",
        "g7.2xlarge",
        "g7.48xlarge",
        "g7.4xlarge",
        "g7.8xlarge",
        "p5e.48xlarge",
    ]


def test_the_data_readme_says_whose_prices_these_are() -> None:
    text = " ".join(README.read_text().split())
    assert "on-demand-prices-us-east-1.tsv" in text
    assert "us-east-1 on-demand list prices" in text
    assert "falls back" in text
