"""A new environment in one step, and the checks that keep stacks from colliding."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from config.stack import parse_stack_config
from scripts.new_stack import NewStackError, free_cidr, main, new_stack
from synth.runner import stack_config
from synth.stack_files import ROOT, cross_stack_problems, production_stacks, stacks


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The stack files and policy configuration of the repository, in a scratch directory."""
    for path in [ROOT / "Pulumi.yaml", *ROOT.glob("Pulumi.*.yaml")]:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "policy").mkdir()
    shutil.copy(ROOT / "policy" / "policy-config.json", tmp_path / "policy" / "policy-config.json")
    return tmp_path


def test_committed_stacks_do_not_collide() -> None:
    assert cross_stack_problems() == []


def test_a_copied_stack_file_collides_twice(repo: Path) -> None:
    shutil.copy(repo / "Pulumi.dev.yaml", repo / "Pulumi.qa.yaml")
    assert cross_stack_problems(repo) == [
        "Pulumi.qa.yaml: cluster name ml-dev is also Pulumi.dev.yaml's",
        "Pulumi.qa.yaml: VPC CIDR 10.20.0.0/16 overlaps Pulumi.dev.yaml's 10.20.0.0/16",
    ]


def test_new_stack_from_prod_gets_its_own_name_network_and_production_listing(repo: Path) -> None:
    path = new_stack("staging", "prod", cluster=None, production=None, root=repo)
    assert stacks(repo) == ["dev", "prod", "staging"]
    document = yaml.safe_load(path.read_text())["config"]
    assert document["gpu-eks:cluster"]["name"] == "ml-staging"
    assert document["gpu-eks:network"]["cidr"] == "10.0.0.0/16"  # free, same size as prod's /16
    assert cross_stack_problems(repo) == []
    assert "staging" in production_stacks(repo)
    assert "# Private endpoint only" in path.read_text()  # comments kept
    parsed = parse_stack_config(stack_config("staging", repo))
    prod = parse_stack_config(stack_config("prod", repo))
    assert parsed.node_pools == prod.node_pools
    assert json.loads((repo / "policy" / "policy-config.json").read_text())  # still valid JSON


def test_new_stack_writes_its_snapshot(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "--from", "dev", "--no-production", "--root", str(repo)]) == 0
    assert "sandbox" not in production_stacks(repo)
    assert (repo / "snapshots" / "sandbox" / "resources.yaml").is_file()
    assert "ml-sandbox" in (repo / "snapshots" / "sandbox" / "outputs.yaml").read_text()
    assert "Pulumi.sandbox.yaml: written" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "source", "cluster", "message"),
    [
        ("dev", "prod", None, "Pulumi.dev.yaml exists already"),
        ("qa", "nope", None, "no Pulumi.nope.yaml to copy"),
        ("Qa", "dev", None, "stack name 'Qa'"),
        ("qa", "dev", "ml-prod", "cluster name ml-prod is used by another stack"),
    ],
)
def test_new_stack_refuses_what_would_collide(
    repo: Path, name: str, source: str, cluster: str | None, message: str
) -> None:
    with pytest.raises(NewStackError, match=message):
        new_stack(name, source, cluster=cluster, production=None, root=repo)


def test_free_cidr_skips_every_taken_range() -> None:
    assert free_cidr(16, ["10.0.0.0/16", "10.1.0.0/17"]) == "10.2.0.0/16"
    assert free_cidr(20, ["10.0.0.0/16"]) == "10.1.0.0/20"
