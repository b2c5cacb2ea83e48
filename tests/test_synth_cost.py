"""`python -m synth cost`: the report, its JSON, and its figures recomputed by scipy's milp."""

import json
from decimal import Decimal

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint, milp  # type: ignore[import-untyped]

from config.stack import parse_stack_config
from facts.pricing import HOURS_PER_MONTH, on_demand_prices
from pools.capacity import node_capacities, pool_limits
from synth.__main__ import main
from synth.runner import stack_config, stacks


def milp_worst_case(stack: str, pool_name: str) -> float:
    """The pool's worst case by HiGHS, from the candidates and limits alone (no gap allowed)."""
    config = parse_stack_config(stack_config(stack))
    pool = next(p for p in config.node_pools if p.name == pool_name)
    nodes = [
        n
        for n in node_capacities(pool, config.gpu_operator, overlays=config.karpenter.gpu_sharing_overlays)
        if n.instance_type in on_demand_prices()
    ]
    limits = pool_limits(pool)
    matrix = np.array([[float(n.counts[r]) for n in nodes] for r in limits])
    result = milp(
        -np.array([float(on_demand_prices()[n.instance_type]) for n in nodes]),
        constraints=LinearConstraint(matrix, -np.inf, [float(v) for v in limits.values()]),
        integrality=np.ones(len(nodes)),
        bounds=Bounds(0, np.inf),
        options={"mip_rel_gap": 0},
    )
    assert result.success
    return -float(result.fun)


@pytest.mark.parametrize("stack", stacks())
def test_json_worst_cases_are_within_one_percent_of_an_independent_exact_computation(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cost", stack, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [p["pool"] for p in report] == [p.name for p in parse_stack_config(stack_config(stack)).node_pools]
    for pool in report:
        expected = milp_worst_case(stack, pool["pool"])
        assert pool["worstCaseUsdPerHour"] == pytest.approx(expected, rel=0.01)
        assert pool["bounded"]
        assert pool["exact"]
        # The node mix costs what is reported, at the table's prices, and a month is 730 hours of it.
        mix = sum(on_demand_prices()[t] * n for t, n in pool["worstCaseNodes"].items())
        assert Decimal(str(pool["worstCaseUsdPerHour"])) == mix
        assert pool["worstCaseUsdPerMonth"] == pytest.approx(float(mix * HOURS_PER_MONTH))
        assert pool["cheapestFillUsdPerHour"] <= pool["worstCaseUsdPerHour"]
        assert set(pool) >= {"pool", "worstCaseUsdPerHour", "worstCaseNodes", "cheapestFillUsdPerHour"}


def test_the_text_report_shows_each_pool_the_total_and_whose_prices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["cost", "prod"]) == 0
    text = capsys.readouterr().out
    assert "us-east-1 on-demand list prices (USD) from Karpenter 1.14.1's compiled price table" in text
    assert "In us-west-2 they are the table Karpenter falls back to" in text
    assert "worst case     $440.32/h, $321,433.60 a month: 8 x p5.48xlarge (64 GPUs, 1,536 vCPUs" in text
    assert "cheapest fill  $51.51/h" in text
    assert "Total: $544.26/h, $397,306.88 a month" in text
    assert "Spot nodes count at the on-demand price" in text


def test_the_cost_command_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "python -m synth cost STACK [--json]" in capsys.readouterr().out


def test_an_unknown_stack_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["cost", "staging"])
    assert exit_info.value.code == 2
    assert "no Pulumi.staging.yaml; stacks: dev, prod" in capsys.readouterr().err
