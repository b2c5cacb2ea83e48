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
from synth.cost import costs, pool_lines
from synth.runner import ROOT, stack_config, stacks


def milp_worst_case(stack: str, pool_name: str, sets: int = 1) -> float:
    """The pool's worst case by HiGHS, from the candidates and limits alone (no gap allowed): of `sets`
    sets of nodes billed at once, each bound by the limits on its own."""
    config = parse_stack_config(stack_config(stack))
    pool = next(p for p in config.node_pools if p.name == pool_name)
    nodes = [
        n
        for n in node_capacities(pool, config.gpu_operator, overlays=config.karpenter.gpu_sharing_overlays)
        if n.instance_type in on_demand_prices()
    ]
    limits = pool_limits(pool)
    one = np.array([[float(n.counts[r]) for n in nodes] for r in limits])
    result = milp(
        -np.array([float(on_demand_prices()[n.instance_type]) for n in nodes] * sets),
        constraints=LinearConstraint(
            np.kron(np.eye(sets), one), -np.inf, [float(v) for v in limits.values()] * sets
        ),
        integrality=np.ones(sets * len(nodes)),
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
    replaced = "  while replaced $880.64/h for at most 24h (terminationGracePeriod): expiry (expireAfter"
    assert replaced in text
    assert "While every pool that expires its nodes replaces them at once: $1,088.51/h" in text
    # docs/costs.md quotes these two figures.
    costs_doc = (ROOT / "docs" / "costs.md").read_text()
    assert "(prod's training pool $880.64/h, the stack $1,088.51/h)" in costs_doc
    assert "Spot nodes count at the on-demand price" in text


@pytest.mark.parametrize("stack", stacks())
def test_while_replaced_is_a_drained_set_and_a_full_set_of_replacements_as_an_independent_program_finds(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Karpenter 1.14.1 admits a node against the limits counting only nodes not being deleted: so while a
    set the limits admitted drains, another set they admit may launch. One program over both sets, each
    bound by the limits alone, gives the most that bills at once."""
    assert main(["cost", stack, "--json"]) == 0
    report = {p["pool"]: p for p in json.loads(capsys.readouterr().out)}
    for pool in parse_stack_config(stack_config(stack)).node_pools:
        replaced = milp_worst_case(stack, pool.name, sets=2)
        entry = report[pool.name]
        assert entry["whileReplacedUsdPerHour"] == pytest.approx(replaced, rel=1e-9)
        assert entry["terminationGracePeriod"] == pool.termination_grace_period


def test_a_pool_without_expiry_has_no_while_replaced_figure_and_no_grace_period_says_so() -> None:
    from tests.helpers import config as config_map_of

    pool = {"name": "serve", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "8"}}
    never, unbounded = (
        costs(parse_stack_config(config_map_of(nodePools=[{**pool, **extra}])))
        for extra in ({"expireAfter": "Never"}, {})
    )
    # Without expiry, only what the disruption budgets allow drains at once: no whole-pool figure.
    assert never.pools[0].while_replaced_usd_per_hour is None
    assert never.while_replaced_usd_per_hour == never.worst_case_usd_per_hour
    (line,) = [x for x in pool_lines(unbounded.pools[0]) if "while replaced" in x]
    assert "with no end in time (no terminationGracePeriod" in line


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
