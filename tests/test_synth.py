"""Offline synth: deterministic snapshots, secrets masked, real dependencies, a check that catches drift."""

import json
import shutil
from pathlib import Path

import pytest

import synth.__main__ as synth_main
from synth import snapshot
from synth.__main__ import diagnostics, diff, main
from synth.runner import ROOT, ProgramRun, run_stack, stack_config
from synth.stack_files import cross_stack_problems


def test_rendering_is_deterministic() -> None:
    assert snapshot.render(run_stack("dev")) == snapshot.render(run_stack("dev"))


def test_secrets_are_masked(dev: ProgramRun) -> None:
    files = snapshot.render(dev)
    assert "kubeconfig: '[secret]'" in files["outputs.yaml"]
    assert "get-token" not in files["outputs.yaml"]


def test_dependencies_are_the_engines(dev: ProgramRun) -> None:
    files = snapshot.render(dev)
    resources = snapshot.from_yaml(files["resources.yaml"])
    coredns = next(r for r in resources if r["name"] == "cluster-coredns")
    # explicit depends_on (the node group) and the one carried by the clusterName Output (the cluster)
    assert "aws:eks/nodeGroup:NodeGroup::cluster-system" in coredns["dependsOn"]
    assert "eks:index:Cluster::cluster" in coredns["dependsOn"]


def test_iam_documents_are_pretty_json(dev: ProgramRun) -> None:
    document = snapshot.render(dev)["iam/Role-cluster-system-nodes.json"]
    assert document.startswith('{\n  "Statement": [')


def test_check_fails_with_a_diff_when_a_snapshot_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dev"
    assert main(["dev", "--out", str(out)]) == 0
    assert main(["dev", "--out", str(out), "--check"]) == 0
    resources = out / "resources.yaml"
    resources.write_text(resources.read_text().replace("10.20.0.0/16", "10.99.0.0/16"))
    capsys.readouterr()
    assert main(["dev", "--out", str(out), "--check"]) == 1
    printed = capsys.readouterr().out
    assert "-    cidrBlock: 10.99.0.0/16" in printed
    assert "+    cidrBlock: 10.20.0.0/16" in printed
    assert "stale snapshots: dev" in printed


def test_diff_reports_added_and_removed_files() -> None:
    text = diff({"a.yaml": "x\n"}, {"b.yaml": "y\n"}, "snapshots/dev")
    assert "--- snapshots/dev/a.yaml (committed)" in text
    assert "+++ snapshots/dev/b.yaml (program)" in text


def test_committed_snapshots_are_current() -> None:
    assert main(["--check"]) == 0, "run: .venv/bin/python -m synth"


# --- a refused configuration, as `pulumi preview` shows it -----------------------------------------


def _stack_root(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / f"Pulumi.{name}.yaml").write_text(text)
    return tmp_path


def _synth(monkeypatch: pytest.MonkeyPatch, root: Path, name: str) -> int:
    monkeypatch.setattr(synth_main, "stacks", lambda: [name])
    monkeypatch.setattr(synth_main, "run_stack", lambda stack: run_stack(stack, root))
    return main([name, "--out", str(root / "out")])


def test_a_refused_config_prints_as_pulumi_preview_does_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _stack_root(
        tmp_path,
        "bad",
        "config:\n  aws:region: us-west-2\n  gpu-eks:cluster: {name: ml-bad}\n"
        "  gpu_eks:network: {cidr: 10.9.0.0/16}\n",
    )
    assert _synth(monkeypatch, root, "bad") == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "Diagnostics:",
        "  pulumi:pulumi:Stack (gpu-eks-bad):",
        "    error: Invalid stack configuration (1 problem):",
        """      - gpu_eks:network = '{"cidr": "10.9.0.0/16"}': is never read: gpu-eks reads """
        "gpu-eks:<section>, "
        "the AWS provider's aws:<setting> and the engine's pulumi:<setting>; did you mean gpu-eks:network?",
        "",
        "configuration refused: bad",
    ]
    assert "Traceback" not in err
    assert not (root / "out").exists()


def test_a_region_that_is_no_region_name_is_refused_by_the_program_not_by_the_mocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The mocks answer in the region's partition; they read it only when asked, as the provider does.
    root = _stack_root(tmp_path, "bad", "config:\n  aws:region: mars-1\n  gpu-eks:cluster: {name: ml-bad}\n")
    assert _synth(monkeypatch, root, "bad") == 2
    err = capsys.readouterr().err
    assert "      - aws:region = 'mars-1': must be an AWS region such as us-west-2" in err.splitlines()[3]
    assert "Traceback" not in err


def test_a_run_of_every_stack_refuses_stacks_that_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What no single stack shows (here prod given dev's preview role) fails `python -m synth --check`,
    which CI runs; a run of a single stack leaves it to that run."""
    for path in [ROOT / "Pulumi.yaml", *ROOT.glob("Pulumi.*.yaml")]:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "policy").mkdir()
    shutil.copy(ROOT / "policy" / "policy-config.json", tmp_path / "policy" / "policy-config.json")
    prod = tmp_path / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text().replace("role/gpu-eks-prod-preview", "role/gpu-eks-preview"))
    monkeypatch.setattr(synth_main, "cross_stack_problems", lambda: cross_stack_problems(tmp_path))
    monkeypatch.setattr(synth_main, "stacks", lambda: ["dev"])  # "every stack", cheaply
    assert main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith(
        "error: Pulumi.prod.yaml: gpu-eks:cluster.automation.previewRoleArn "
        "arn:aws:iam::111122223333:role/gpu-eks-preview is also Pulumi.dev.yaml's"
    )
    assert err[-1] == "configuration refused: the stack files together"
    monkeypatch.setattr(synth_main, "stacks", lambda: ["dev", "prod"])
    assert main(["dev", "--out", str(tmp_path / "out")]) == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "config:\n  aws:region: us-west-2\n  gpu-eks:cluster: {name: ml-bad\n",
            "error: Pulumi.bad.yaml, line 4, column 1: not valid YAML: expected ',' or '}', but got "
            "'<stream end>' (while parsing a flow mapping at line 3)",
        ),
        (
            "aws:region: us-west-2\ngpu-eks:cluster: {name: ml-bad}\n",
            "error: Pulumi.bad.yaml: has no top-level `config:` mapping, so the stack would get no "
            "configuration",
        ),
        (
            "config:\n  aws:region: us-west-2\n  gpu-eks.cluster: {name: ml-bad}\n",
            "error: Pulumi.bad.yaml: 'gpu-eks.cluster' is not a configuration key: Pulumi expects "
            "<namespace>:<name> (did you mean gpu-eks:cluster?)",
        ),
    ],
)
def test_a_stack_file_pulumi_cannot_load_is_named_with_its_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    expected: str,
) -> None:
    root = _stack_root(tmp_path, "bad", text)
    assert _synth(monkeypatch, root, "bad") == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(expected), first


def test_project_config_from_pulumi_yaml_reaches_the_program() -> None:
    assert json.loads(stack_config("dev")["pulumi:tags"]) == {"pulumi:template": "gpu-eks"}


def test_warnings_print_as_pulumi_preview_does() -> None:
    assert diagnostics("dev", [], ["pool x: check the caps"]) == (
        "Diagnostics:\n  pulumi:pulumi:Stack (gpu-eks-dev):\n    warning: pool x: check the caps\n"
    )
