"""Team namespaces and namespace-scoped access: what the pure builders make of the config, and what the real
program declares for it under the mocks."""

from typing import Any

import kubernetes_validate
import pytest

from components.teams import team_grants, team_namespace, team_quota, team_roles
from config.teams import TeamConfig
from contract import StackOutputs
from synth.runner import ProgramRun, run_program
from tests.helpers import config

RESEARCH = "arn:aws:iam::444455556666:role/ml-research"
SERVING = "arn:aws:iam::444455556666:role/ml-serving"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_POLICY = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
NAMESPACE = "kubernetes:core/v1:Namespace"
QUOTA = "kubernetes:core/v1:ResourceQuota"
POLICY = "arn:aws:eks::aws:cluster-access-policy/"


def teams(*entries: dict[str, Any]) -> list[TeamConfig]:
    return [TeamConfig.model_validate(e) for e in entries]


TEAMS = (
    {"name": "vision", "roleArns": [RESEARCH], "gpuQuota": 8},
    {"name": "serving", "roleArns": [SERVING, RESEARCH], "access": "view", "podSecurity": "restricted"},
    {"name": "audio", "roleArns": [RESEARCH]},
)


def test_a_role_in_several_teams_gets_one_entry_and_one_grant_per_access_level() -> None:
    parsed = teams(*TEAMS)
    assert team_roles(parsed) == [RESEARCH, SERVING]
    assert [(g.principal_arn, g.access, g.namespaces) for g in team_grants(parsed)] == [
        (RESEARCH, "edit", ("audio", "vision")),  # sorted: adding a team never reorders the scope
        (RESEARCH, "view", ("serving",)),
        (SERVING, "view", ("serving",)),
    ]
    # Named by the role and the level, never by a position in the list.
    assert [g.name for g in team_grants(parsed)] == [
        "teams-444455556666-ml-research-edit",
        "teams-444455556666-ml-research-view",
        "teams-444455556666-ml-serving-view",
    ]


def test_the_namespace_and_quota_pass_the_kubernetes_schema() -> None:
    vision, serving, _ = teams(*TEAMS)
    for manifest in (team_namespace(vision), team_namespace(serving), team_quota(vision)):
        assert manifest is not None
        kubernetes_validate.validate(manifest, "1.35", strict=True)
    assert team_namespace(serving)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert team_namespace(vision)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    # Extended resources take only the `requests.` prefix in a quota.
    assert team_quota(vision) == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "gpu",
            "namespace": "vision",
            "labels": {"app.kubernetes.io/managed-by": "gpu-eks"},
        },
        "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
    }
    assert team_quota(serving) is None


def test_a_quota_of_zero_is_declared_and_blocks_every_gpu_pod() -> None:
    (frozen,) = teams({"name": "frozen", "roleArns": [RESEARCH], "gpuQuota": 0})
    quota = team_quota(frozen)
    assert quota is not None
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "0"}


@pytest.fixture(scope="module")
def declared() -> ProgramRun:
    return run_program(config(teams=list(TEAMS)))


def _by_name(run: ProgramRun, type_token: str) -> dict[str, Any]:
    return {r.name: r for r in run.resources if r.type == type_token and "gpu-eks:teams:Teams" in r.urn}


def test_each_role_gets_one_access_entry_and_namespace_scoped_associations(declared: ProgramRun) -> None:
    entries = _by_name(declared, ACCESS_ENTRY)
    assert {n: e.inputs["principalArn"] for n, e in entries.items()} == {
        "teams-444455556666-ml-research": RESEARCH,
        "teams-444455556666-ml-serving": SERVING,
    }
    associations = _by_name(declared, ACCESS_POLICY)
    assert {n: (a.inputs["policyArn"], a.inputs["accessScope"]) for n, a in associations.items()} == {
        "teams-444455556666-ml-research-edit": (
            f"{POLICY}AmazonEKSEditPolicy",
            {"type": "namespace", "namespaces": ["audio", "vision"]},
        ),
        "teams-444455556666-ml-research-view": (
            f"{POLICY}AmazonEKSViewPolicy",
            {"type": "namespace", "namespaces": ["serving"]},
        ),
        "teams-444455556666-ml-serving-view": (
            f"{POLICY}AmazonEKSViewPolicy",
            {"type": "namespace", "namespaces": ["serving"]},
        ),
    }
    for association in associations.values():
        # A new scope replaces it with the same principal and policy: the old one must go first.
        assert association.delete_before_replace
    # No team role is cluster-admin.
    admin = [a for a in declared.of_type(ACCESS_POLICY) if "ClusterAdmin" in a.inputs["policyArn"]]
    assert not {a.inputs["principalArn"] for a in admin} & {RESEARCH, SERVING}


def test_namespaces_outlive_their_team_and_quotas_live_in_them(declared: ProgramRun) -> None:
    namespaces = _by_name(declared, NAMESPACE)
    assert sorted(namespaces) == ["teams-audio", "teams-serving", "teams-vision"]
    assert all(n.retain_on_delete for n in namespaces.values())
    assert all(n.provider == "cluster-k8s" for n in namespaces.values())
    (quota,) = _by_name(declared, QUOTA).values()
    assert quota.inputs["metadata"]["namespace"] == "vision"
    # Created after its namespace: the namespace's name flows into it.
    assert namespaces["teams-vision"].urn in quota.dependencies
    assert not quota.retain_on_delete  # a quota removed from the config must not keep capping the team


def test_a_team_entry_and_an_admin_entry_alias_each_other(declared: ProgramRun) -> None:
    """A role moving between adminRoleArns and a team keeps its one access entry (see tests/plan)."""
    entry = _by_name(declared, ACCESS_ENTRY)["teams-444455556666-ml-research"]
    assert [a.split("::")[-2:] for a in entry.aliases] == [
        ["gpu-eks:cluster:Cluster$aws:eks/accessEntry:AccessEntry", "cluster-admin-444455556666-ml-research"]
    ]
    admin = run_program(config(cluster={"name": "ml-test", "adminRoleArns": [RESEARCH]}))
    admin_entry = admin.one(ACCESS_ENTRY, "cluster-admin-444455556666-ml-research")
    assert [a.split("::")[-2:] for a in admin_entry.aliases] == [
        ["gpu-eks:cluster:Cluster$aws:eks/accessEntry:AccessEntry", "cluster-admin-0"],
        ["gpu-eks:teams:Teams$aws:eks/accessEntry:AccessEntry", "teams-444455556666-ml-research"],
    ]


def test_the_teams_output_follows_the_contract(declared: ProgramRun) -> None:
    outputs = StackOutputs.model_validate(declared.outputs)
    assert [t.model_dump(by_alias=True) for t in outputs.teams] == [
        {
            "name": "vision",
            "namespace": "vision",
            "roleArns": [RESEARCH],
            "access": "edit",
            "gpuQuota": 8,
            "podSecurity": "baseline",
        },
        {
            "name": "serving",
            "namespace": "serving",
            "roleArns": [SERVING, RESEARCH],
            "access": "view",
            "gpuQuota": None,
            "podSecurity": "restricted",
        },
        {
            "name": "audio",
            "namespace": "audio",
            "roleArns": [RESEARCH],
            "access": "edit",
            "gpuQuota": None,
            "podSecurity": "baseline",
        },
    ]


def test_without_teams_nothing_is_declared_and_the_output_is_empty() -> None:
    run = run_program(config())
    assert not [r for r in run.resources if "teams" in r.urn]
    assert run.outputs["teams"] == []


def test_the_dev_teams_quota_counts_slices_as_its_stack_file_says(dev: ProgramRun) -> None:
    """Pulumi.dev.yaml: "8 slices = 2 physical GPUs" on the inference pool, time-sliced 4 ways."""
    (team,) = dev.outputs["teams"]
    (pool,) = [p for p in dev.outputs["gpuPools"] if p["kind"] == "gpu"]
    assert (team["gpuQuota"], pool["gpuResource"], pool["slicesPerGpu"]) == (8, "nvidia.com/gpu", 4)
    assert team["gpuQuota"] // pool["slicesPerGpu"] == 2


def test_the_prod_teams_quotas_are_what_its_stack_file_says_of_its_pools(prod: ProgramRun) -> None:
    """Pulumi.prod.yaml: inference's quota is "whole GPUs: half the inference pool's cap", training's "the
    training pool's cap"; read here from the NodePools the program declares."""
    limits = {
        r.inputs["metadata"]["name"]: int(r.inputs["spec"]["limits"]["nvidia.com/gpu"])
        for r in prod.resources
        if r.type == "kubernetes:karpenter.sh/v1:NodePool"
    }
    slices = {p["name"]: p["slicesPerGpu"] for p in prod.outputs["gpuPools"] if p["kind"] == "gpu"}
    quotas = {t["name"]: t["gpuQuota"] for t in prod.outputs["teams"]}
    assert slices["gpu-inference"] == slices["gpu-training"] == 1  # whole GPUs
    assert quotas["inference"] * 2 == limits["gpu-inference"]
    assert quotas["training"] == limits["gpu-training"]
