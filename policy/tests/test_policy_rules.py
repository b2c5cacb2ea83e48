"""The pure rules, table-driven: each guardrail with compliant and violating inputs."""

import json
from typing import Any

import pytest
from gpu_eks_policy import rules


def nodepool(
    requirements: list[dict[str, Any]] | None = None,
    taints: list[dict[str, Any]] | None = None,
    limits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """NodePool props as the engine passes a `kubernetes.apiextensions.CustomResource`'s inputs."""
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
        "requirements": requirements or [],
    }
    if taints is not None:
        template_spec["taints"] = taints
    spec: dict[str, Any] = {"template": {"spec": template_spec}}
    if limits is not None:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": spec}


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"


# --- GPU pool detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "requirement",
    [
        req(GPU_COUNT, "Gt", "0"),
        req(GPU_COUNT, "Gte", "1"),
        req(GPU_COUNT, "In", "1", "8"),
        req(GPU_COUNT, "Lt", "2"),
        req("karpenter.k8s.aws/instance-gpu-memory", "Gt", "16000"),
        req("karpenter.k8s.aws/instance-gpu-name", "In", "a10g", "l4"),
        req("karpenter.k8s.aws/instance-gpu-name", "Exists"),
        req("karpenter.k8s.aws/instance-gpu-manufacturer", "In", "nvidia"),
        req("karpenter.k8s.aws/instance-family", "In", "g6e"),
        req("karpenter.k8s.aws/instance-family", "In", "c7i", "p5"),
        req("karpenter.k8s.aws/instance-family", "In", "p6-b200"),
        req("karpenter.k8s.aws/instance-family", "In", "gr6"),
        req("karpenter.k8s.aws/instance-category", "In", "c", "g"),
        req("node.kubernetes.io/instance-type", "In", "m7i.large", "g5.xlarge"),
    ],
    ids=lambda r: f"{r['key'].rsplit('/', 1)[-1]}-{r['operator']}-{'-'.join(r.get('values', []))}",
)
def test_requirement_selects_gpus(requirement: dict[str, Any]) -> None:
    assert rules.gpu_requirement(requirement)


@pytest.mark.parametrize(
    "requirement",
    [
        req(GPU_COUNT, "In", "0"),
        req(GPU_COUNT, "NotIn", "0"),
        req(GPU_COUNT, "DoesNotExist"),
        req(GPU_COUNT, "Exists"),  # some non-GPU types carry the label with the value 0
        req(GPU_COUNT, "Lt", "1"),
        req("karpenter.k8s.aws/instance-gpu-name", "NotIn", "t4"),
        req("karpenter.k8s.aws/instance-gpu-manufacturer", "In", "amd"),
        req("karpenter.k8s.aws/instance-family", "In", "g4ad"),  # AMD Radeon
        req("karpenter.k8s.aws/instance-family", "In", "c7g", "m7g", "r8g"),  # Graviton, not GPUs
        req("karpenter.k8s.aws/instance-family", "NotIn", "g5", "p5"),
        req("karpenter.k8s.aws/instance-category", "In", "c", "m", "r"),
        req("node.kubernetes.io/instance-type", "In", "m7g.large", "inf2.xlarge"),
        req("karpenter.sh/capacity-type", "In", "spot"),
        {"key": GPU_COUNT},
    ],
    ids=lambda r: f"{r['key'].rsplit('/', 1)[-1]}-{r.get('operator')}-{'-'.join(r.get('values', []))}",
)
def test_requirement_does_not_select_gpus(requirement: dict[str, Any]) -> None:
    assert not rules.gpu_requirement(requirement)


def test_gpu_nodepool_detection_reads_spec() -> None:
    assert rules.is_gpu_nodepool(nodepool([req(GPU_COUNT, "Gt", "0")])["spec"])
    assert not rules.is_gpu_nodepool(nodepool([req("karpenter.sh/capacity-type", "In", "spot")])["spec"])
    assert not rules.is_gpu_nodepool({})


# --- NodePool limits and GPU isolation ------------------------------------------------------------


def test_nodepool_with_limits_passes() -> None:
    assert rules.nodepool_limits_violations(nodepool(limits={"cpu": "1000"})) == []


@pytest.mark.parametrize("limits", [None, {}])
def test_nodepool_without_limits_fails(limits: dict[str, Any] | None) -> None:
    [violation] = rules.nodepool_limits_violations(nodepool(limits=limits))
    assert "spec.limits" in violation


def test_gpu_nodepool_with_taint_and_limit_passes() -> None:
    props = nodepool([req(GPU_COUNT, "Gt", "0")], [GPU_TAINT], {"cpu": "1000", "nvidia.com/gpu": 16})
    assert rules.gpu_nodepool_violations(props) == []


def test_gpu_nodepool_accepts_noexecute_taint_and_string_limit() -> None:
    taint = {"key": "nvidia.com/gpu", "effect": "NoExecute"}
    props = nodepool([req(GPU_COUNT, "Gt", "0")], [taint], {"nvidia.com/gpu": "8"})
    assert rules.gpu_nodepool_violations(props) == []


def test_gpu_nodepool_without_taint_or_limit_reports_both() -> None:
    props = nodepool([req("karpenter.k8s.aws/instance-family", "In", "g6e")], None, {"cpu": "100"})
    taint_violation, limit_violation = rules.gpu_nodepool_violations(props)
    assert "instance-family In [g6e]" in taint_violation
    assert "taints" in taint_violation
    assert "'nvidia.com/gpu' limit" in limit_violation


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"},
        {"key": "gpu", "effect": "NoSchedule"},
    ],
)
def test_gpu_nodepool_weak_or_wrong_taint_fails(taint: dict[str, Any]) -> None:
    props = nodepool([req(GPU_COUNT, "Gt", "0")], [taint], {"nvidia.com/gpu": 4})
    [violation] = rules.gpu_nodepool_violations(props)
    assert "taint" in violation


@pytest.mark.parametrize("limit", [0, "0", ""])
def test_gpu_nodepool_zero_or_empty_limit_fails(limit: Any) -> None:
    props = nodepool([req(GPU_COUNT, "Gt", "0")], [GPU_TAINT], {"nvidia.com/gpu": limit})
    [violation] = rules.gpu_nodepool_violations(props)
    assert "nvidia.com/gpu" in violation


def test_cpu_nodepool_needs_no_gpu_taint() -> None:
    props = nodepool([req("karpenter.k8s.aws/instance-category", "In", "c", "m")], None, {"cpu": "100"})
    assert rules.gpu_nodepool_violations(props) == []


# --- EC2NodeClass -----------------------------------------------------------------------------------


def nodeclass(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {}, "spec": spec}


def test_imdsv2_required_passes() -> None:
    assert rules.imdsv2_violations(nodeclass(metadataOptions={"httpTokens": "required"})) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"metadataOptions": {"httpTokens": "optional"}}, "is 'optional'"),
        ({"metadataOptions": {"httpPutResponseHopLimit": 2}}, "is missing"),
        ({}, "is missing"),
    ],
)
def test_imdsv2_not_required_fails(spec: dict[str, Any], expected: str) -> None:
    [violation] = rules.imdsv2_violations(nodeclass(**spec))
    assert expected in violation


def test_encrypted_volumes_pass() -> None:
    mappings = [
        {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "encrypted": True}},
        {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "500Gi", "encrypted": True, "kmsKeyID": "k"}},
    ]
    assert rules.ebs_encryption_violations(nodeclass(blockDeviceMappings=mappings)) == []


def test_no_block_device_mappings_uses_karpenters_encrypted_default() -> None:
    assert rules.ebs_encryption_violations(nodeclass()) == []


def test_unencrypted_or_unset_volumes_fail() -> None:
    mappings = [
        {"deviceName": "/dev/xvda", "ebs": {"encrypted": True}},
        {"deviceName": "/dev/xvdb", "ebs": {"encrypted": False}},
        {"deviceName": "/dev/xvdc", "ebs": {"volumeSize": "50Gi"}},
        {"rootVolume": True},
    ]
    violations = rules.ebs_encryption_violations(nodeclass(blockDeviceMappings=mappings))
    assert [v.split(" (")[0] for v in violations] == [
        "EC2NodeClass spec.blockDeviceMappings[1]",
        "EC2NodeClass spec.blockDeviceMappings[2]",
        "EC2NodeClass spec.blockDeviceMappings[3]",
    ]


def test_pinned_ami_alias_passes() -> None:
    props = nodeclass(amiSelectorTerms=[{"alias": "al2023@v20260714"}])
    assert rules.latest_ami_alias_violations(props) == []


@pytest.mark.parametrize("alias", ["al2023@latest", "bottlerocket@latest", "AL2023@Latest"])
def test_latest_ami_alias_fails(alias: str) -> None:
    props = nodeclass(amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}, {"alias": alias}])
    [violation] = rules.latest_ami_alias_violations(props)
    assert "amiSelectorTerms[1].alias" in violation


@pytest.mark.parametrize(
    ("stack", "tags", "production"),
    [
        ("prod", {}, True),
        ("acme/gpu-eks/prod", {}, True),
        ("dev", {}, False),
        ("acme/gpu-eks/dev", {}, False),
        ("staging", {"environment": "production"}, True),
        ("staging", {"environment": "staging"}, False),
        (None, {}, True),  # unknown stack: fail closed
    ],
)
def test_production_stack(stack: str | None, tags: dict[str, str], production: bool) -> None:
    assert rules.is_production_stack(stack, tags, ["prod"]) is production


# --- Helm ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chart", "name"),
    [
        ("karpenter", "karpenter"),
        ("oci://public.ecr.aws/karpenter/karpenter-crd", "karpenter-crd"),
        ("nvidia/gpu-operator", "gpu-operator"),
        ("eks/aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin"),
    ],
)
def test_chart_name(chart: str, name: str) -> None:
    assert rules.chart_name(chart) == name


@pytest.mark.parametrize("version", ["1.14.1", "v26.7.0", "v0.5.20", "1.0.0-rc.1", "2.0.0+build.5"])
def test_exact_versions_are_pins(version: str) -> None:
    assert rules.version_pin_problem(version) is None


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (None, "no version"),
        ("", "no version"),
        ("latest", "'latest'"),
        ("^1.14.0", "range"),
        ("~26.7", "range"),
        (">=1.0.0 <2.0.0", "range"),
        ("1.x", "range"),
        ("1.14.*", "range"),
        ("1.14", "not an exact SemVer"),
        (1.14, "non-string"),
    ],
)
def test_unpinned_versions(version: Any, problem: str) -> None:
    found = rules.version_pin_problem(version)
    assert found is not None
    assert problem in found


def test_helm_release_pinned_passes_and_unrelated_chart_is_ignored() -> None:
    charts = rules.DEFAULT_PINNED_CHARTS
    pinned = {"chart": "oci://public.ecr.aws/karpenter/karpenter", "version": "1.14.1"}
    assert rules.helm_version_violations(pinned, charts) == []
    assert rules.helm_version_violations({"chart": "ingress-nginx"}, charts) == []


@pytest.mark.parametrize(
    "chart", ["karpenter", "karpenter-crd", "gpu-operator", "eks/aws-efa-k8s-device-plugin"]
)
def test_helm_release_unpinned_fails(chart: str) -> None:
    [violation] = rules.helm_version_violations(
        {"chart": chart, "version": "latest"}, rules.DEFAULT_PINNED_CHARTS
    )
    assert chart in violation


# --- IAM ----------------------------------------------------------------------------------------


def document(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


SCOPED = {"Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:Describe*"], "Resource": "*"}


@pytest.mark.parametrize(
    "policy",
    [
        document(SCOPED),
        json.dumps(document(SCOPED)),
        {"Version": "2012-10-17", "Statement": SCOPED},  # a single statement object
        document({"Sid": "DenyHTTP", "Effect": "Deny", "Action": "*", "Resource": "*"}),
        document({"Effect": "Deny", "Action": "sqs:*", "Resource": "*"}),
    ],
    ids=["dict", "json-string", "single-statement", "deny-star", "deny-service-star"],
)
def test_scoped_policy_passes(policy: Any) -> None:
    assert rules.iam_wildcard_violations("aws:iam/policy:Policy", {"policy": policy}) == []


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ({"Effect": "Allow", "Action": "*", "Resource": "*"}, "every action of every service"),
        ({"Effect": "Allow", "Action": ["ec2:RunInstances", "*"], "Resource": "*"}, "every action of every"),
        ({"Effect": "Allow", "Action": "*:*", "Resource": "*"}, "every action of every service"),
        ({"Action": "iam:*", "Resource": "*"}, "every iam action"),  # Effect defaults to Allow
        ({"Effect": "Allow", "Action": "S3:*", "Resource": "*"}, "every S3 action"),
        ({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}, "NotAction"),
    ],
)
def test_wildcard_actions_fail(statement: dict[str, Any], expected: str) -> None:
    for policy in (document(statement), json.dumps(document(statement))):
        [violation] = rules.iam_wildcard_violations("aws:iam/rolePolicy:RolePolicy", {"policy": policy})
        assert expected in violation


def test_allowed_service_wildcard_is_accepted_but_star_never() -> None:
    policy = document({"Effect": "Allow", "Action": ["logs:*", "*"], "Resource": "*"})
    [violation] = rules.iam_wildcard_violations("aws:iam/policy:Policy", {"policy": policy}, ["logs:*"])
    assert "'*'" in violation


def test_invalid_json_policy_fails() -> None:
    [violation] = rules.iam_wildcard_violations("aws:iam/policy:Policy", {"policy": "{not json"})
    assert "not valid JSON" in violation


def test_role_inline_policies_are_checked_but_trust_policy_is_not() -> None:
    trust = json.dumps(document({"Effect": "Allow", "Action": "sts:*", "Principal": {"Service": "x"}}))
    props = {
        "assumeRolePolicy": trust,
        "inlinePolicies": [
            {"name": "ok", "policy": json.dumps(document(SCOPED))},
            {
                "name": "admin",
                "policy": json.dumps(document({"Effect": "Allow", "Action": "*", "Resource": "*"})),
            },
        ],
    }
    [violation] = rules.iam_wildcard_violations("aws:iam/role:Role", props)
    assert violation.startswith("IAM inlinePolicies[1] (admin):")


def test_other_resource_types_are_ignored() -> None:
    policy = document({"Effect": "Allow", "Action": "*", "Resource": "*"})
    assert rules.iam_wildcard_violations("aws:sqs/queuePolicy:QueuePolicy", {"policy": policy}) == []
