"""Offline synth: deterministic snapshots, secrets masked, real dependencies, a check that catches drift."""

from pathlib import Path

import pytest

from synth import snapshot
from synth.__main__ import diff, main
from synth.runner import ProgramRun, run_stack


def test_rendering_is_deterministic() -> None:
    assert snapshot.render(run_stack("dev")) == snapshot.render(run_stack("dev"))


def test_secrets_are_masked(dev: ProgramRun) -> None:
    files = snapshot.render(dev)
    assert "kubeconfig: '[secret]'" in files["outputs.yaml"]
    assert "get-token" not in files["outputs.yaml"]


def test_dependencies_are_the_engines(dev: ProgramRun) -> None:
    files = snapshot.render(dev)
    resources = snapshot.yaml.safe_load(files["resources.yaml"])
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
