"""`python -m synth plan`: arguments, the three outputs, and the exit codes."""

import json
from pathlib import Path

import pytest
import yaml

from synth.__main__ import main
from synth.runner import ROOT


def test_committed_snapshot_matches_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "dev", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_from_config_plans_against_another_stack_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--from-config FILE`: the program with FILE's config is the previous state (here: an older AMI)."""
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-eks:nodePools"][0]["ami"] = "al2023@v20260601"
    older = tmp_path / "Pulumi.dev-older.yaml"
    older.write_text(yaml.safe_dump(document))
    assert main(["plan", "dev", "--from-config", str(older), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {
            "op": "update",
            "type": "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
            "name": "node-pools-class-gpu-inference",
        }
    ]
    assert main(["plan", "dev", "--from-config", str(older), "--markdown"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("### `dev`: 0 to create, 1 to update, 0 to replace, 0 to delete")
    assert (
        "| update | `kubernetes:karpenter.k8s.aws/v1:EC2NodeClass` | `node-pools-class-gpu-inference` |"
        in markdown
    )


def test_a_plan_that_cannot_deploy_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Prod's protected cluster renamed in the previous state: replacing it back is refused by `pulumi up`."""
    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())
    document["config"]["gpu-eks:cluster"]["name"] = "ml-prod-old"
    older = tmp_path / "Pulumi.prod-old.yaml"
    older.write_text(yaml.safe_dump(document))
    assert main(["plan", "prod", "--from-config", str(older)]) == 1
    out = capsys.readouterr().out
    assert "!! replace eks:index:Cluster cluster: the resource is protected" in out


def test_from_a_git_ref(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "prod", "--from", "HEAD", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "nope"], "no Pulumi.nope.yaml"),
        (["plan", "dev", "--from", "no-such-ref-anywhere"], "not a commit"),
        (["plan", "dev", "--from-config", "/no/such/file.yaml"], "No such file"),
    ],
)
def test_bad_arguments_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse exits 2 itself; an unreadable previous state returns 2."""
    try:
        code = main(argv)
    except SystemExit as exited:
        code = int(exited.code or 0)
    assert code == 2
    assert message in capsys.readouterr().err
