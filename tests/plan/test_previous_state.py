"""What `synth plan` compares with by default: the snapshot committed at HEAD, so that the README's order
(edit the stack file, `python -m synth <stack>`, `synth plan <stack>`) still shows the edit; outside a git
repository (or before its first commit) the working tree's snapshot, and the first line says which."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components import yaml_text
from synth import snapshot
from synth.__main__ import plan_main
from synth.plan import previous_state
from synth.runner import ROOT, run_stack

EDIT = "node-pools-gpu-inference"


def git(where: Path, *args: str) -> str:
    return subprocess.run(
        [
            "git",
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        cwd=where,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """dev's stack file and committed snapshot, in a scratch directory no repository encloses."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "infra"
    (root / "snapshots" / "dev").mkdir(parents=True)
    for name in (
        "Pulumi.yaml",
        "Pulumi.dev.yaml",
        "snapshots/dev/resources.yaml",
        "snapshots/dev/outputs.yaml",
    ):
        shutil.copy(ROOT / name, root / name)
    return root


def edit_and_synth(root: Path) -> None:
    """Raise dev's CPU limit in the stack file, then write its snapshot as `python -m synth dev` does."""
    document = yaml_text.load((root / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-eks:nodePools"][0]["limits"]["cpu"] = "512"
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    snapshot.write(snapshot.render(run_stack("dev", root)), root / "snapshots" / "dev")


def test_an_edit_written_to_the_working_tree_snapshot_still_shows(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repository is the project's parent (a monorepo): paths are read relative to the project."""
    repo = project.parent
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "dev")
    head = git(repo, "rev-parse", "HEAD").strip()
    edit_and_synth(project)

    assert plan_main(["dev"], project) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "Plan for dev: the working tree's Pulumi.dev.yaml, compared with snapshots/dev/resources.yaml "
        f"committed at HEAD ({head[:12]})"
    )
    assert out[1].startswith("dev: 0 create, 1 update, 0 replace, 0 delete")
    assert f"  ~ update  kubernetes:karpenter.sh/v1:NodePool {EDIT}" in out
    assert '      spec.limits.cpu: "256" -> "512"' in out
    # The working tree's snapshot already has the edit: comparing with it would hide it.
    assert plan_main(["dev", "--from", "HEAD"], project) == 0
    assert capsys.readouterr().out.splitlines()[2:] == out[2:]


def test_a_stack_not_committed_yet_is_all_creates(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    git(project, "init", "-q")
    git(project, "add", "Pulumi.yaml")
    git(project, "commit", "-q", "-m", "project only")
    state = previous_state("dev", root=project)
    assert state.resources == {}
    assert state.label.endswith(": no snapshot of dev there, so everything is created")


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        (lambda root: None, "not a git repository"),
        (lambda root: git(root, "init", "-q"), "the repository has no commit yet"),
    ],
)
def test_without_a_commit_the_working_tree_snapshot_is_compared_and_the_first_line_says_so(
    project: Path, capsys: pytest.CaptureFixture[str], setup: object, why: str
) -> None:
    setup(project)  # type: ignore[operator]
    assert plan_main(["dev"], project) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "Plan for dev: the working tree's Pulumi.dev.yaml, compared with snapshots/dev/resources.yaml in the "
        f"working tree ({why}: no HEAD to compare with)"
    )
    assert "  no changes" in out


def test_without_git_the_working_tree_snapshot_is_compared_and_from_is_refused(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(project))  # no git there
    assert previous_state("dev", root=project).label.endswith(
        "in the working tree (git is not installed: no HEAD to compare with)"
    )
    assert plan_main(["dev", "--from", "main"], project) == 2
    assert "python -m synth plan: --from main: git is not installed" in capsys.readouterr().err
