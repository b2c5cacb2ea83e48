"""The registered policies, driven the way the engine drives them.

Each resource goes through pulumi_policy's own `ResourceValidationArgs` with its props wrapped by
`unknown_checking_proxy` (Mapping/Sequence proxies, as in `Analyze`), and every policy of the pack sees
every resource, as in a real preview.
"""

import json
import runpy
from pathlib import Path
from typing import Any

import pulumi_policy
import pytest
from gpu_eks_policy import ENFORCEMENT_LEVEL, POLICY_PACK_NAME, build_policies, rules
from gpu_eks_policy.pack import EC2NODECLASS_TYPE, NODEPOOL_TYPE, STACK_ENV_VAR
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from components import yaml_text

POLICY_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = POLICY_DIR.parent
ALL_POLICIES = {policy.name: policy for policy in build_policies()}
POLICIES = {name: p for name, p in ALL_POLICIES.items() if isinstance(p, ResourceValidationPolicy)}
"""The per-resource policies (the stack policy karpenter-worst-case-spend: test_policy_spend.py)."""


def run(
    resource_type: str,
    props: dict[str, Any],
    config: dict[str, Any] | None = None,
    stack_tags: dict[str, str] | None = None,
) -> dict[str, list[str]]:
    """Violation messages per policy name, for one resource seen by the whole pack."""
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    found: dict[str, list[str]] = {}
    for name, policy in POLICIES.items():
        args = ResourceValidationArgs(
            resource_type,
            unknown_checking_proxy(props),
            f"urn:pulumi:test::gpu-eks::{resource_type}::r",
            "r",
            opts,
            None,
            (config or {}).get(name),
            stack_tags,
        )
        messages: list[str] = []

        def report(message: str, urn: str | None = None, messages: list[str] = messages) -> None:
            messages.append(message)

        assert policy.validate(args, report) is None
        if messages:
            found[name] = messages
    return found


def nodepool(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"}, "spec": spec}


def nodeclass(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "gpu"},
        "spec": spec,
    }


GPU_REQUIREMENTS = [
    {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
]
GOOD_GPU_POOL = nodepool(
    {
        "template": {
            "spec": {
                "requirements": GPU_REQUIREMENTS,
                "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
            }
        },
        "limits": {"cpu": "1000", "nvidia.com/gpu": 16},
    }
)
GOOD_NODECLASS = nodeclass(
    {
        "amiSelectorTerms": [{"alias": "al2023@v20260714"}],
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
        "blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "200Gi", "encrypted": True}}
        ],
    }
)


def test_pack_registers_every_guardrail() -> None:
    assert set(POLICIES) == {
        "karpenter-nodepool-limits",
        "karpenter-gpu-nodepool-taint-and-limit",
        "karpenter-nodeclass-imdsv2",
        "karpenter-nodeclass-encrypted-ebs",
        "karpenter-no-latest-ami-in-production",
        "helm-release-pinned-version",
        "iam-no-wildcard-actions",
    }
    assert set(ALL_POLICIES) - set(POLICIES) == {"karpenter-worst-case-spend"}
    assert all(p.has_validation() for p in POLICIES.values())
    assert all(p.enforcement_level is EnforcementLevel.MANDATORY for p in ALL_POLICIES.values())


def test_main_builds_the_policy_pack_with_all_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run policy/__main__.py as the Pulumi CLI does (runpy on the directory), with a PolicyPack stand-in.

    The real PolicyPack starts a gRPC server and never returns; the stand-in repeats its argument checks.
    """
    built: dict[str, Any] = {}

    class RecordingPolicyPack:
        def __init__(self, name: str, policies: list[pulumi_policy.Policy], **kwargs: Any) -> None:
            assert isinstance(policies, list)
            assert all(isinstance(p, pulumi_policy.Policy) for p in policies)
            built.update(name=name, policies=policies, **kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", RecordingPolicyPack)
    runpy.run_path(str(POLICY_DIR), run_name="__main__")

    assert built["name"] == POLICY_PACK_NAME
    assert built["enforcement_level"] is ENFORCEMENT_LEVEL
    names = [p.name for p in built["policies"]]
    assert sorted(names) == sorted(ALL_POLICIES)
    assert len(set(names)) == len(names)


def test_policy_project_files() -> None:
    project = yaml_text.load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert (POLICY_DIR / project["runtime"]["options"]["virtualenv"]).resolve() == REPO_ROOT / ".venv"

    def pins(path: Path) -> dict[str, str]:
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        return dict(line.split("==", 1) for line in lines if "==" in line)

    pack_pins = pins(POLICY_DIR / "requirements.txt")
    project_pins = pins(REPO_ROOT / "requirements.txt") | pins(REPO_ROOT / "requirements-dev.txt")
    assert set(pack_pins) == {"pulumi", "pulumi-policy"}
    assert {name: project_pins.get(name) for name in pack_pins} == pack_pins


def test_policy_config_file_matches_the_schemas() -> None:
    config = json.loads((POLICY_DIR / "policy-config.json").read_text())
    for name, properties in config.items():
        schema = ALL_POLICIES[name].config_schema
        assert schema is not None, name
        assert set(properties) <= set(schema.properties), name
        for key, value in properties.items():
            if schema.properties[key]["type"] == "object":  # stack name -> positive number
                assert all(isinstance(v, int | float) and v > 0 for v in value.values()), (name, key)
                continue
            assert schema.properties[key]["type"] == "array", (name, key)
            assert isinstance(value, list), (name, key)
            assert all(isinstance(item, str) for item in value), (name, key)


def test_policy_config_file_pins_the_default_charts() -> None:
    """The committed config lists the same charts as the pack's default, so CI and a bare run agree."""
    config = json.loads((POLICY_DIR / "policy-config.json").read_text())
    assert config["helm-release-pinned-version"]["charts"] == list(rules.DEFAULT_PINNED_CHARTS)


def test_compliant_resources_pass() -> None:
    assert run(NODEPOOL_TYPE, GOOD_GPU_POOL) == {}
    assert run(EC2NODECLASS_TYPE, GOOD_NODECLASS) == {}


def test_nodepool_without_limits() -> None:
    pool = nodepool({"template": {"spec": {"requirements": []}}})
    assert set(run(NODEPOOL_TYPE, pool)) == {"karpenter-nodepool-limits"}


def test_gpu_nodepool_without_taint_and_gpu_limit() -> None:
    pool = nodepool({"template": {"spec": {"requirements": GPU_REQUIREMENTS}}, "limits": {"cpu": "100"}})
    found = run(NODEPOOL_TYPE, pool)
    assert set(found) == {"karpenter-gpu-nodepool-taint-and-limit"}
    assert len(found["karpenter-gpu-nodepool-taint-and-limit"]) == 2


def test_nodeclass_with_imdsv1() -> None:
    spec = GOOD_NODECLASS["spec"] | {"metadataOptions": {"httpTokens": "optional"}}
    assert set(run(EC2NODECLASS_TYPE, nodeclass(spec))) == {"karpenter-nodeclass-imdsv2"}


def test_nodeclass_with_unencrypted_volume() -> None:
    spec = GOOD_NODECLASS["spec"] | {
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "1Ti"}}]
    }
    assert set(run(EC2NODECLASS_TYPE, nodeclass(spec))) == {"karpenter-nodeclass-encrypted-ebs"}


@pytest.mark.parametrize(
    ("stack", "tags", "config", "violates"),
    [
        ("prod", None, None, True),
        ("acme/gpu-eks/prod", None, None, True),
        ("dev", None, None, False),
        ("dev", {"environment": "production"}, None, True),
        ("live", None, {"productionStacks": ["live"]}, True),
        ("prod", None, {"productionStacks": ["live"]}, False),
        (None, None, None, True),
    ],
)
def test_latest_ami_alias_only_in_production(
    monkeypatch: pytest.MonkeyPatch,
    stack: str | None,
    tags: dict[str, str] | None,
    config: dict[str, Any] | None,
    violates: bool,
) -> None:
    if stack is None:
        monkeypatch.delenv(STACK_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(STACK_ENV_VAR, stack)
    spec = GOOD_NODECLASS["spec"] | {"amiSelectorTerms": [{"alias": "al2023@latest"}]}
    pack_config = {"karpenter-no-latest-ami-in-production": config} if config else None
    found = run(EC2NODECLASS_TYPE, nodeclass(spec), pack_config, tags)
    assert set(found) == ({"karpenter-no-latest-ami-in-production"} if violates else set())


@pytest.mark.parametrize("resource_type", ["kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"])
def test_helm_chart_versions(resource_type: str) -> None:
    pinned = {
        "chart": "gpu-operator",
        "version": "v26.7.0",
        "repositoryOpts": {"repo": "https://helm.ngc.nvidia.com/nvidia"},
    }
    assert run(resource_type, pinned) == {}
    unpinned = {"chart": "oci://public.ecr.aws/karpenter/karpenter", "version": "^1.14"}
    assert set(run(resource_type, unpinned)) == {"helm-release-pinned-version"}
    assert set(run(resource_type, {"chart": "karpenter-crd"})) == {"helm-release-pinned-version"}
    assert run(resource_type, {"chart": "cert-manager"}) == {}


def test_helm_charts_are_configurable() -> None:
    config = {"helm-release-pinned-version": {"charts": ["cert-manager"]}}
    assert set(run("kubernetes:helm.sh/v3:Release", {"chart": "cert-manager"}, config)) == {
        "helm-release-pinned-version"
    }
    assert run("kubernetes:helm.sh/v3:Release", {"chart": "karpenter"}, config) == {}


STAR = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)
EC2_STAR = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}]}
SCOPED = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"}]}
)


@pytest.mark.parametrize(
    ("resource_type", "props"),
    [
        ("aws:iam/policy:Policy", {"policy": STAR}),
        ("aws:iam/policy:Policy", {"policy": EC2_STAR}),
        ("aws:iam/rolePolicy:RolePolicy", {"role": "r", "policy": STAR}),
        (
            "aws:iam/role:Role",
            {"assumeRolePolicy": SCOPED, "inlinePolicies": [{"name": "x", "policy": STAR}]},
        ),
    ],
)
def test_iam_wildcards_fail(resource_type: str, props: dict[str, Any]) -> None:
    assert set(run(resource_type, props)) == {"iam-no-wildcard-actions"}


@pytest.mark.parametrize(
    ("resource_type", "props"),
    [
        ("aws:iam/policy:Policy", {"policy": SCOPED}),
        ("aws:iam/rolePolicy:RolePolicy", {"role": "r", "policy": SCOPED}),
        (
            "aws:iam/role:Role",
            {"assumeRolePolicy": SCOPED, "inlinePolicies": [{"name": "x", "policy": SCOPED}]},
        ),
        ("aws:iam/role:Role", {"assumeRolePolicy": SCOPED}),
    ],
)
def test_iam_scoped_actions_pass(resource_type: str, props: dict[str, Any]) -> None:
    assert run(resource_type, props) == {}


def test_iam_allowed_service_wildcard_config() -> None:
    config = {"iam-no-wildcard-actions": {"allowedServiceWildcards": ["ec2:*"]}}
    assert run("aws:iam/policy:Policy", {"policy": EC2_STAR}, config) == {}


def test_misconfigured_list_is_an_error_not_a_silent_pass() -> None:
    config = {"iam-no-wildcard-actions": {"allowedServiceWildcards": "ec2:*"}}
    with pytest.raises(ValueError, match="must be a list of strings"):
        run("aws:iam/policy:Policy", {"policy": EC2_STAR}, config)


def test_values_unknown_during_preview_are_not_silently_passed() -> None:
    """An unknown policy document raises UnknownValueError; the SDK reports it as 'can't run in preview'."""
    with pytest.raises(UnknownValueError):
        run("aws:iam/policy:Policy", {"policy": UNKNOWN_STRING_VALUE})


def test_unrelated_resources_are_ignored() -> None:
    assert run("aws:s3/bucket:Bucket", {"policy": STAR, "spec": {}}) == {}
