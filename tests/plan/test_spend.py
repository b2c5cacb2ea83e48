"""`synth plan`'s worst-case spend: each pool whose worst case changes, old -> new, and the stack's total,
priced from the NodePools and NodeOverlays each state records; a rise over 25 % is an Attention line."""

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import yaml_text
from config.stack import parse_stack_config
from pools.cost import pool_cost
from synth.__main__ import main
from synth.plan import spend_changes, state_of_snapshot, working_tree_state
from synth.runner import ROOT, config_map
from synth.snapshot import from_yaml, to_yaml


def stack_file(stack: str, tmp_path: Path, change: Any) -> Path:
    """A copy of `Pulumi.<stack>.yaml` with `change(config)` applied."""
    document = yaml_text.load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    change(document["config"])
    path = tmp_path / f"Pulumi.{stack}-changed.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def worst_case(config: dict[str, Any], pool: str) -> str:
    """The pool's worst case as `synth cost` computes it from the configuration (not the objects)."""
    stack = parse_stack_config(config_map(config))
    spend = pool_cost(next(p for p in stack.node_pools if p.name == pool), stack.gpu_operator).spend
    assert spend.worst_case is not None
    return f"${spend.worst_case.usd_per_hour:,.2f}/h"


def halve_dev_gpu_limit(config: dict[str, Any]) -> None:
    config["gpu-eks:nodePools"][0]["limits"]["nvidia.com/gpu"] = "8"


def test_doubling_a_gpu_limit_shows_the_pools_old_and_new_worst_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The working tree's dev stack against one whose GPU limit is half of it: a PR doubling the limit."""
    older = stack_file("dev", tmp_path, halve_dev_gpu_limit)
    old = worst_case(yaml_text.load(older.read_text())["config"], "gpu-inference")
    new = worst_case(yaml_text.load((ROOT / "Pulumi.dev.yaml").read_text())["config"], "gpu-inference")
    assert (old, new) == ("$8.19/h", "$16.38/h")  # 2 then 4 x g5.16xlarge: 8 then 16 time-slices

    assert main(["plan", "dev", "--from-config", str(older)]) == 0
    text = capsys.readouterr().out
    assert f"  gpu-inference: {old} -> {new} (+100%)" in text
    assert f"  total: {old} -> {new} (+100%)" in text
    assert f"\n   ! worst-case spend of pool gpu-inference rises {old} -> {new} (+100%)" in text
    assert "us-east-1 on-demand list prices" in text

    assert main(["plan", "dev", "--from-config", str(older), "--markdown"]) == 0
    markdown = capsys.readouterr().out
    assert f"| `gpu-inference` | {old} | {new} |" in markdown
    assert f"> - worst-case spend of pool gpu-inference rises {old} -> {new} (+100%)" in markdown


def test_a_rise_of_25_percent_or_less_is_shown_without_attention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prod's inference pool with 60 instead of 64 GPUs: the vCPU limit still binds, so the rise is small.
    older = stack_file(
        "prod", tmp_path, lambda c: c["gpu-eks:nodePools"][0]["limits"].update({"nvidia.com/gpu": "60"})
    )
    old = worst_case(yaml_text.load(older.read_text())["config"], "gpu-inference")
    assert main(["plan", "prod", "--from-config", str(older)]) == 0
    text = capsys.readouterr().out
    assert f"  gpu-inference: {old} -> $103.94/h (+3%)" in text
    assert "gpu-training" not in text.split("Worst-case spend")[1]
    assert "rises" not in text


def test_an_unchanged_stack_shows_its_total() -> None:
    state = working_tree_state("prod")
    changes = spend_changes(state, state)
    assert not any(p.changed for p in changes.pools)
    assert changes.text()[-1] == "  total: $544.26/h (unchanged)"
    assert changes.findings() == []


def test_the_old_worst_case_comes_from_the_objects_the_old_snapshot_records() -> None:
    """An old ref's snapshot has no cost record: its NodePools are priced (here prod's training pool at half
    its limits: 4 x p5.48xlarge). A pool without limits is unbounded, which is an Attention line too."""
    entries = from_yaml((ROOT / "snapshots" / "prod" / "resources.yaml").read_text())
    for entry in entries:
        if entry["type"] == "kubernetes:karpenter.sh/v1:NodePool" and entry["name"].endswith("gpu-training"):
            entry["inputs"]["spec"]["limits"]["nvidia.com/gpu"] = "32"
            entry["inputs"]["spec"]["limits"]["cpu"] = "768"
    before = state_of_snapshot(to_yaml(entries), "old")
    after = working_tree_state("prod")
    changes = {p.pool: p for p in spend_changes(before, after).pools}
    assert (changes["gpu-training"].old, changes["gpu-training"].new) == (
        Decimal("220.16"),
        Decimal("440.32"),
    )
    assert not changes["gpu-inference"].changed
    for entry in entries:
        if entry["type"] == "kubernetes:karpenter.sh/v1:NodePool" and entry["name"].endswith("gpu-training"):
            entry["inputs"]["spec"]["limits"] = {}
    unbounded = state_of_snapshot(to_yaml(entries), "new")
    findings = spend_changes(working_tree_state("prod"), unbounded).findings()
    assert [f.message for f in findings] == [
        "worst-case spend of pool gpu-training rises $440.32/h -> unbounded (at on-demand list price)",
        "worst-case spend of the stack's total rises $544.26/h -> unbounded (at on-demand list price)",
    ]
