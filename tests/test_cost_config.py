"""`gpu-eks:cost`: the cap on the pools' worst case, checked before any resource, and its bad inputs."""

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import yaml_text
from config.errors import ConfigError
from config.stack import parse_stack_config
from pools.cost import stack_cost
from synth.__main__ import main
from synth.runner import ROOT, stack_config
from tests.test_refusals import refusal


def prod_with(cost: dict[str, Any]) -> dict[str, str]:
    raw = stack_config("prod")
    raw["gpu-eks:cost"] = json.dumps(cost)
    return raw


def test_a_cap_below_prods_worst_case_is_refused_before_any_resource_naming_key_cap_figure_and_pools() -> (
    None
):
    line = refusal(prod_with({"maxWorstCaseUsdPerHour": 500}))
    assert line.startswith(
        "gpu-eks:cost.maxWorstCaseUsdPerHour = 500: caps the node pools at $500/h, but at their limits they "
        "may run $544.26/h at once ($397,307 a 730-hour month, at us-east-1 on-demand list price): "
        "gpu-training up to $440.32/h (8 x p5.48xlarge); gpu-inference up to $103.94/h (64 x g5.4xlarge)."
    )
    assert "raise the cap to at least 544.26" in line


def test_the_committed_cap_is_just_above_prods_worst_case() -> None:
    config = parse_stack_config(stack_config("prod"))
    cap = config.cost.max_worst_case_usd_per_hour
    worst = stack_cost(config.node_pools, config.gpu_operator).worst_case_usd_per_hour
    assert cap is not None
    assert worst <= cap <= worst * Decimal("1.02")
    # At the figure itself the cap holds; a cent below it, it refuses.
    parse_stack_config(prod_with({"maxWorstCaseUsdPerHour": float(worst)}))
    with pytest.raises(ConfigError, match=r"maxWorstCaseUsdPerHour"):
        parse_stack_config(prod_with({"maxWorstCaseUsdPerHour": float(worst) - 0.01}))


def test_a_refused_cap_exits_2_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = yaml_text.load((ROOT / "Pulumi.prod.yaml").read_text())
    document["config"]["gpu-eks:cost"] = {"maxWorstCaseUsdPerHour": 300}
    low = tmp_path / "Pulumi.prod-low.yaml"
    low.write_text(yaml.safe_dump(document))
    assert main(["plan", "prod", "--from-config", str(low)]) == 2
    assert "error: Invalid stack configuration" in capsys.readouterr().err


def test_a_cap_on_a_pool_without_prices_is_refused() -> None:
    pools = [{"name": "g7", "instanceFamilies": ["g7", "g6e"], "limits": {"nvidia.com/gpu": "8"}}]
    raw = stack_config("dev")
    raw["gpu-eks:nodePools"] = json.dumps(pools)
    raw["gpu-eks:smokeTest"] = json.dumps({"enabled": False})
    raw["gpu-eks:cost"] = json.dumps({"maxWorstCaseUsdPerHour": 1000})
    line = refusal(raw)
    assert "g7 may launch g7.12xlarge, g7.24xlarge" in line
    assert "which the price table has no price for" in line


@pytest.mark.parametrize(
    ("cost", "expected"),
    [
        (
            {"maxWorstCaseUsdPerHour": -5},
            "maxWorstCaseUsdPerHour = -5: must be a positive amount in US dollars",
        ),
        ({"maxWorstCaseUsdPerHour": 0}, "maxWorstCaseUsdPerHour = 0: must be a positive amount"),
        (
            {"maxWorstCaseUsdPerHour": "600"},
            "= '600': must be a positive amount in US dollars written as a number",
        ),
        (
            {"maxWorstCaseUsdPerHour": True},
            "= true: must be a positive amount in US dollars written as a number",
        ),
        ({"monthlyBudgetUsd": 1000}, "monthlyBudgetUsd = 1000: is set but nobody would hear of it"),
        (
            {"budgetNotificationEmails": ["a@example.com"]},
            "budgetNotificationEmails = ['a@example.com']: is set without monthlyBudgetUsd",
        ),
        (
            {"monthlyBudgetUsd": 10, "budgetNotificationEmails": ["not-an-address"]},
            "budgetNotificationEmails[0] = 'not-an-address': must be an e-mail address",
        ),
        (
            {"monthlyBudgetUsd": 10, "budgetNotificationTopicArn": "arn:aws:sqs:us-west-2:111122223333:q"},
            "must be an SNS topic ARN such as arn:aws:sns:us-west-2:111122223333:gpu-eks-budget",
        ),
        (
            {"monthlyBudgetUsd": 10, "budgetNotificationEmails": [f"p{i}@example.com" for i in range(11)]},
            "budgetNotificationEmails",
        ),
        ({"maxWorstCaseUsdPerHr": 600}, "gpu-eks:cost.maxWorstCaseUsdPerHr"),
    ],
)
def test_bad_cost_settings_are_refused_with_key_value_and_what_is_accepted(
    cost: dict[str, Any], expected: str
) -> None:
    assert expected in refusal(prod_with(cost))


def test_a_gpu_pool_that_can_never_shed_an_empty_node_is_warned_about_with_its_cost() -> None:
    from config.stack import config_warnings
    from facts.pricing import on_demand_prices
    from tests.helpers import config as config_map_of

    stuck = {
        "name": "train",
        "instanceFamilies": ["p5"],
        "gpuCount": {"min": 8},
        "limits": {"nvidia.com/gpu": "16"},
        "expireAfter": "Never",
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "Never",
            "budgets": [{"nodes": "0"}],
        },
    }
    stack = parse_stack_config(config_map_of(nodePools=[stuck]))
    (warning,) = [w for w in config_warnings(stack) if "can never shed" in w]
    price = on_demand_prices()["p5.48xlarge"]
    assert warning.startswith("gpu-eks:nodePools[0] (train) can never shed an empty node")
    assert f"one idle p5.48xlarge costs ${price:,.2f}/h (${price * 730:,.0f} a 730-hour month" in warning
    # A schedule on the budget, an expiry, or consolidation each let the node go: no warning.
    for change in (
        {"expireAfter": "720h"},
        {"disruption": {**stuck["disruption"], "consolidateAfter": "1h"}},
        {"disruption": {**stuck["disruption"], "budgets": [{"nodes": "0", "reasons": ["Underutilized"]}]}},
    ):
        relaxed = parse_stack_config(config_map_of(nodePools=[{**stuck, **change}]))
        assert not [w for w in config_warnings(relaxed) if "can never shed" in w], change


def test_dev_keeps_audit_and_authenticator_logs_a_week_and_prod_keeps_every_log_a_year() -> None:
    dev, prod = (parse_stack_config(stack_config(s)).cluster for s in ("dev", "prod"))
    assert (dev.log_types, dev.log_retention_days) == (("audit", "authenticator"), 7)
    assert (set(prod.log_types), prod.log_retention_days) == (
        {"api", "audit", "authenticator", "controllerManager", "scheduler"},
        365,
    )


def test_a_pool_that_expires_nodes_without_a_termination_grace_period_is_warned_about() -> None:
    from config.stack import config_warnings
    from tests.helpers import config as config_map_of

    pool = {"name": "serve", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "8"}}
    (warning,) = [
        w
        for w in config_warnings(parse_stack_config(config_map_of(nodePools=[pool])))
        if "terminationGracePeriod" in w
    ]
    assert warning.startswith(
        "gpu-eks:nodePools[0].terminationGracePeriod is unset while expireAfter is 336h (serve): an expired "
        "node whose drain a PodDisruptionBudget or a karpenter.sh/do-not-disrupt pod blocks is never "
        "terminated, and bills beside its replacement"
    )
    for change in ({"terminationGracePeriod": "1h"}, {"expireAfter": "Never"}):
        bounded = parse_stack_config(config_map_of(nodePools=[{**pool, **change}]))
        assert not [w for w in config_warnings(bounded) if "terminationGracePeriod" in w], change
    # The committed stacks bound every drain.
    for stack in ("dev", "prod"):
        warnings = config_warnings(parse_stack_config(stack_config(stack)))
        assert not [w for w in warnings if "terminationGracePeriod" in w]
