"""A new environment in one step, and the checks that keep stacks from colliding."""

import json
import shutil
from pathlib import Path

import pytest

from components import yaml_text
from config.production import ROOT, production_stacks
from config.stack import parse_stack_config
from scripts.new_stack import NewStackError, free_cidr, main, new_stack
from synth.runner import stack_config
from synth.stack_files import automation_roles, cross_stack_problems, stacks


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
    shutil.copy(repo / "Pulumi.dev.yaml", repo / "Pulumi.zz-copy.yaml")
    assert cross_stack_problems(repo) == [
        "Pulumi.zz-copy.yaml: cluster name ml-dev is also Pulumi.dev.yaml's",
        "Pulumi.zz-copy.yaml: VPC CIDR 10.20.0.0/16 overlaps Pulumi.dev.yaml's 10.20.0.0/16",
    ]


def _set_preview_role(repo: Path, stack: str, old: str, new: str) -> None:
    path = repo / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    assert f"previewRoleArn: {old}" in text
    path.write_text(text.replace(f"previewRoleArn: {old}", f"previewRoleArn: {new}"))


DEV_PREVIEW = "arn:aws:iam::111122223333:role/gpu-eks-preview"
PROD_PREVIEW = "arn:aws:iam::111122223333:role/gpu-eks-prod-preview"


def test_the_committed_stacks_keep_production_and_non_production_ci_roles_apart() -> None:
    assert set(production_stacks()) & set(stacks()) == {"prod"}
    assert automation_roles("dev") == {"gpu-eks:cluster.automation.previewRoleArn": DEV_PREVIEW}
    assert automation_roles("prod") == {"gpu-eks:cluster.automation.previewRoleArn": PROD_PREVIEW}


def test_a_production_stack_with_a_non_production_preview_role_is_refused(repo: Path) -> None:
    """The non-production preview role is trusted for every same-repository branch's pull request: as
    prod's too, any branch would be cluster admin in prod without the prod-preview approval."""
    _set_preview_role(repo, "prod", PROD_PREVIEW, DEV_PREVIEW)
    assert cross_stack_problems(repo) == [
        "Pulumi.prod.yaml: gpu-eks:cluster.automation.previewRoleArn "
        f"{DEV_PREVIEW} is also Pulumi.dev.yaml's gpu-eks:cluster.automation.previewRoleArn {DEV_PREVIEW}; "
        "a production stack (productionStacks of policy/policy-config.json) needs its own CI roles, trusted "
        "only for its GitHub environments (prod-preview, production)"
    ]
    # Two production stacks may share theirs, and so may two non-production ones.
    policy = repo / "policy" / "policy-config.json"
    config = json.loads(policy.read_text())
    config["karpenter-no-latest-ami-in-production"]["productionStacks"].append("dev")
    policy.write_text(json.dumps(config))
    assert cross_stack_problems(repo) == []


def test_a_non_production_deploy_role_given_to_a_production_stack_is_refused(repo: Path) -> None:
    deploy = "arn:aws:iam::111122223333:role/gpu-eks-deploy"
    path = repo / "Pulumi.prod.yaml"
    both = f"previewRoleArn: {PROD_PREVIEW}\n      deployRoleArn: {deploy}"
    path.write_text(path.read_text().replace(f"previewRoleArn: {PROD_PREVIEW}", both))
    _set_preview_role(repo, "dev", DEV_PREVIEW, deploy)  # one role both ways across the line
    [problem] = cross_stack_problems(repo)
    assert problem.startswith(
        f"Pulumi.prod.yaml: gpu-eks:cluster.automation.deployRoleArn {deploy} is also Pulumi.dev.yaml's "
        f"gpu-eks:cluster.automation.previewRoleArn {deploy};"
    )


def test_a_stack_copied_across_the_production_line_is_refused_with_the_shared_role(repo: Path) -> None:
    name = _unused(repo, "qa")
    with pytest.raises(NewStackError, match=f"Pulumi.prod.yaml: .*previewRoleArn {PROD_PREVIEW} is also "):
        new_stack(name, "prod", cluster=None, production=False, root=repo)
    assert not (repo / f"Pulumi.{name}.yaml").exists()


def _unused(repo: Path, base: str) -> str:
    """A stack name no stack file of the repository uses yet (the suite also runs with more stacks)."""
    return next(f"{base}{n or ''}" for n in range(100) if f"{base}{n or ''}" not in stacks(repo))


def test_new_stack_from_prod_gets_its_own_name_network_and_production_listing(repo: Path) -> None:
    name = _unused(repo, "staging")
    before = stacks(repo)
    (path, what), (policy, edit) = new_stack(name, "prod", cluster=None, production=None, root=repo)
    assert (what, policy, edit) == (
        "written",
        repo / "policy" / "policy-config.json",
        f"edited: {name} added to productionStacks",
    )
    assert stacks(repo) == sorted([*before, name])
    document = yaml_text.load(path.read_text())["config"]
    assert document["gpu-eks:cluster"]["name"] == f"ml-{name}"
    assert document["gpu-eks:network"]["cidr"].endswith("/16")  # the size of prod's
    assert cross_stack_problems(repo) == []  # its own name and a CIDR overlapping no other stack's
    assert name in production_stacks(repo)
    assert "# the prod runner's NAT egress (EIP); nothing else" in path.read_text()  # comments kept
    # Its own header in place of prod's (all of it), saying where it deploys from.
    assert path.read_text().splitlines()[:5] == [
        f"# {name}: copied from Pulumi.prod.yaml by `python -m scripts.new_stack` (own cluster name and VPC "
        "CIDR).",
        "# Who runs the first `pulumi up`: the deploy workflow, after the merge that adds this file and the "
        "`production` environment's approval, on the runner named by vars.PROD_RUNS_ON,",
        "# as the CI deploy role (it creates the stack if missing). EKS makes the cluster's creator its "
        "admin,",
        "# and every later `up` runs as that role: run from a laptop, it would leave the deploy role locked "
        "out.",
        "config:",
    ]
    parsed = parse_stack_config(stack_config(name, repo))
    prod = parse_stack_config(stack_config("prod", repo))
    assert parsed.node_pools == prod.node_pools
    assert json.loads((repo / "policy" / "policy-config.json").read_text())  # still valid JSON


def test_new_stack_writes_its_snapshot(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = _unused(repo, "sandbox")
    assert main([name, "--from", "dev", "--no-production", "--root", str(repo)]) == 0
    assert name not in production_stacks(repo)
    assert (repo / "snapshots" / name / "resources.yaml").is_file()
    assert f"ml-{name}" in (repo / "snapshots" / name / "outputs.yaml").read_text()
    assert (repo / f"Pulumi.{name}.yaml").read_text().splitlines()[1:3] == [
        "# Who runs the first `pulumi up`: the deploy workflow, after the merge that adds this file,",
        "# as the CI deploy role (it creates the stack if missing). EKS makes the cluster's creator its "
        "admin,",
    ]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Pulumi.{name}.yaml: written"
    assert f"snapshots/{name}/resources.yaml: written" in out
    assert len([line for line in out if line.startswith(f"snapshots/{name}/")]) == len(
        list((repo / "snapshots" / name).rglob("*.*"))
    )


@pytest.mark.parametrize(
    ("name", "source", "cluster", "message"),
    [
        ("dev", "prod", None, "Pulumi.dev.yaml exists already"),
        ("zz-new", "nope", None, "no Pulumi.nope.yaml to copy"),
        ("Qa", "dev", None, "stack name 'Qa'"),
        ("zz-new", "dev", "ml-prod", "cluster name ml-prod is used by another stack"),
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
