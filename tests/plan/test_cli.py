"""`python -m synth plan`: arguments, the three outputs, and the exit codes."""

import json
from pathlib import Path

import pytest
import yaml

from components import yaml_text
from synth.__main__ import main, plan_main
from synth.runner import ROOT


def test_committed_snapshot_matches_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "dev", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_from_config_plans_against_another_stack_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--from-config FILE`: the program with FILE's config is the previous state (here: an older AMI)."""
    document = yaml_text.load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-eks:nodePools"][0]["ami"] = "al2023@v20260601"
    older = tmp_path / "Pulumi.dev-older.yaml"
    older.write_text(yaml.safe_dump(document))
    assert main(["plan", "dev", "--from-config", str(older), "--json"]) == 0
    job, node_class = json.loads(capsys.readouterr().out)
    # The smoke test is named after the nodes it runs on: it runs again on the new AMI.
    assert (job["op"], job["type"], job["name"]) == ("replace", "kubernetes:batch/v1:Job", "smoke-test")
    assert job["reason"] == "because metadata.name changed (forces a new object)"
    assert job["paths"] == ["metadata.name"]
    assert node_class == {
        "op": "update",
        "type": "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
        "name": "node-pools-class-gpu-inference",
        "changes": ["spec.amiSelectorTerms[0].alias: al2023@v20260601 -> al2023@v20260714"],
        "paths": ["spec.amiSelectorTerms[0].alias"],
    }
    assert main(["plan", "dev", "--from-config", str(older), "--verbose"]) == 0
    assert (
        "  ~ update  kubernetes:karpenter.k8s.aws/v1:EC2NodeClass node-pools-class-gpu-inference\n"
        "      spec.amiSelectorTerms[0].alias: al2023@v20260601 -> al2023@v20260714\n"
        "      paths: spec.amiSelectorTerms[0].alias\n" in capsys.readouterr().out
    )
    assert main(["plan", "dev", "--from-config", str(older), "--markdown"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("### `dev`: 0 create, 1 update, 1 replace, 0 delete (99 unchanged) · pools ")
    assert (
        "| update | `kubernetes:karpenter.k8s.aws/v1:EC2NodeClass` | `node-pools-class-gpu-inference` | "
        "`spec.amiSelectorTerms[0].alias: al2023@v20260601 -> al2023@v20260714` |" in markdown
    )


def test_a_plan_that_cannot_deploy_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Prod's protected cluster renamed in the previous state: replacing it back is refused by `pulumi up`."""
    document = yaml_text.load((ROOT / "Pulumi.prod.yaml").read_text())
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


# --- refusals: either state's configuration, read as the offline synth reads it ----------------------


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exited:
        return int(exited.code or 0)


def test_a_previous_stack_file_is_read_as_pulumi_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same stack file elsewhere is no change: project config (`Pulumi.yaml`) applies to it as well."""
    copy = tmp_path / "Pulumi.dev.yaml"
    copy.write_text((ROOT / "Pulumi.dev.yaml").read_text())
    assert main(["plan", "dev", "--from-config", str(copy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "config:\n  aws:region: us-west-2\n  gpu-eks:cluster: {name: ml-old\n",
            "error: Pulumi.dev-old.yaml, line 4, column 1: not valid YAML: expected ',' or '}'",
        ),
        (
            "aws:region: us-west-2\ngpu-eks:cluster: {name: ml-old}\n",
            "error: Pulumi.dev-old.yaml: has no top-level `config:` mapping",
        ),
        (
            "config:\n  aws:region: us-west-2\n  gpu-eks.cluster: {name: ml-old}\n",
            "error: Pulumi.dev-old.yaml: 'gpu-eks.cluster' is not a configuration key: Pulumi expects "
            "<namespace>:<name> (did you mean gpu-eks:cluster?)",
        ),
    ],
)
def test_a_previous_stack_file_pulumi_cannot_load_exits_2_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    older = tmp_path / "Pulumi.dev-old.yaml"
    older.write_text(text)
    assert _exit_code(["plan", "dev", "--from-config", str(older)]) == 2
    captured = capsys.readouterr()
    # Named by its path: it is not the working tree's stack file.
    expected = expected.replace("Pulumi.dev-old.yaml", str(older))
    assert captured.err.splitlines()[0].startswith(expected), captured.err
    assert captured.out == ""
    assert "Traceback" not in captured.err


def test_a_refused_previous_configuration_prints_as_pulumi_preview_does_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = yaml_text.load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-eks:nodePools"][0]["limits"]["nvidia.com/gpu"] = 0
    older = tmp_path / "Pulumi.dev-old.yaml"
    older.write_text(yaml.safe_dump(document))
    assert _exit_code(["plan", "dev", "--from-config", str(older), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[:3] == [
        "Diagnostics:",
        "  pulumi:pulumi:Stack (gpu-eks-dev):",
        "    error: Invalid stack configuration (1 problem):",
    ]
    assert lines[3].startswith("      - gpu-eks:nodePools[0].limits.nvidia.com/gpu = 0: must be above zero")
    assert "Traceback" not in captured.err


def test_a_refused_working_tree_configuration_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.dev.yaml").write_text(
        (ROOT / "Pulumi.dev.yaml").read_text() + "  gpu_eks:network: {cidr: 10.9.0.0/16}\n"
    )
    assert plan_main(["dev"], tmp_path) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("Diagnostics:\n  pulumi:pulumi:Stack (gpu-eks-dev):\n    error: ")
    assert "gpu_eks:network = " in captured.err
    assert "did you mean gpu-eks:network?" in captured.err


# --- the two changes of issue 24, as a user runs them -------------------------------------------------


def _previous_with(tmp_path: Path, section: str, **values: str) -> Path:
    """Pulumi.dev.yaml with `values` set in `section`, as the previous state's stack file."""
    document = yaml_text.load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"][f"gpu-eks:{section}"].update(values)
    older = tmp_path / "Pulumi.dev-before.yaml"
    older.write_text(yaml.safe_dump(document))
    return older


def test_a_vpc_cidr_change_is_marked_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    older = _previous_with(tmp_path, "network", cidr="10.21.0.0/16")
    assert main(["plan", "dev", "--from-config", str(older)]) == 1
    out = capsys.readouterr().out
    assert (
        "  !! update eks:index:Cluster cluster changes vpcId, which moves the cluster's subnets to another "
        "VPC" in out
    )
    assert "gpu-eks:network.cidr" in out
    assert main(["plan", "dev", "--from-config", str(older), "--markdown"]) == 1
    assert (
        "> - **cannot deploy as planned:** update eks:index:Cluster cluster changes vpcId"
        in capsys.readouterr().out
    )


def test_a_gpu_operator_namespace_change_deploys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    older = _previous_with(tmp_path, "gpuOperator", namespace="nvidia")
    assert main(["plan", "dev", "--from-config", str(older)]) == 0
    out = capsys.readouterr().out
    assert (
        "  +-replace (delete first) kubernetes:helm.sh/v3:Release gpu-operator  because namespace changed "
        "(forces a new object)\n      namespace: nvidia -> gpu-operator\n" in out
    )
    assert "!!" not in out
