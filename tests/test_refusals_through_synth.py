"""Every class of refused configuration as a user meets it: `python -m synth` run as a process on stack
files, one stack per class. Each must exit 2 with the refusal printed as `pulumi preview` prints it (the
key named), and no traceback: a check that raises instead of returning its problem fails here.

The cases cover the stack-file errors the CLI refuses, each kind of key and model refusal, and every
cross-section check of `config.stack.CROSS_SECTION_CHECKS` (a guard test keeps that list covered)."""

import json
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml

from config.stack import CROSS_SECTION_CHECKS, PRODUCTION_CHECKS, StackConfig
from synth.runner import ROOT

PROGRAM = (
    "__main__.py",
    "Pulumi.yaml",
    "components",
    "config",
    "contract",
    "facts",
    "policy",
    "pools",
    "synth",
)
"""What `python -m synth` needs of the project (the program, its config model, the production stacks
listed for the policy pack, and the synth itself)."""

GPU_POOL: dict[str, Any] = {"name": "gpu", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "4"}}
P4D_POOL: dict[str, Any] = {**GPU_POOL, "instanceFamilies": ["p4d"], "limits": {"nvidia.com/gpu": "56"}}
ROLE = "arn:aws:iam::111122223333:role/platform-admin"
MIXED_MIG: dict[str, Any] = {
    "nodePools": [{**P4D_POOL, "mig": {"profile": "all-balanced"}, "limits": {"nvidia.com/gpu": "8"}}],
    "gpuOperator": {"mig": {"strategy": "mixed"}},
}
"""A pool of 1g, 2g and 3g MIG devices at once (several resources under the mixed strategy)."""


def stack(**sections: Any) -> dict[str, Any]:
    """A stack file's `config:` with these sections (a minimal cluster unless given)."""
    sections.setdefault("cluster", {"name": "ml-refused"})
    return {"aws:region": "us-west-2", **{f"gpu-eks:{k}": v for k, v in sections.items()}}


# case -> (stack file `config:` or raw file text, the key the refusal names, the cross-section check it hits)
CASES: dict[str, tuple[dict[str, Any] | str, str, str | None]] = {
    # --- the stack file itself (the CLI refuses it before the program runs) ---
    "yaml-syntax": ("config:\n  aws:region: us-west-2\n  gpu-eks:cluster: {name: ml\n", "line 4", None),
    "no-config": ("aws:region: us-west-2\n", "has no top-level `config:`", None),
    "malformed-key": ("config:\n  gpu-eks.cluster: {name: ml}\n", "'gpu-eks.cluster'", None),
    # --- keys ---
    "unknown-namespace": ({**stack(), "gpu_eks:network": {"cidr": "10.1.0.0/16"}}, "gpu_eks:network", None),
    "unknown-section": ({**stack(), "gpu-eks:nodepools": []}, "gpu-eks:nodepools", None),
    "dotted-section": ({**stack(), "gpu-eks:cluster.name": "ml"}, "gpu-eks:cluster.name", None),
    "kubernetes-key": ({**stack(), "kubernetes:kubeconfig": "~/.kube/config"}, "kubernetes:kubeconfig", None),
    "aws-typo": ({**stack(), "aws:regoin": "us-east-1"}, "aws:regoin", None),
    "default-providers-off": (
        {**stack(), "pulumi:disable-default-providers": ["aws"]},
        "pulumi:disable-default-providers",
        None,
    ),
    "section-as-text": ({**stack(), "gpu-eks:network": "10.1.0.0/16"}, "gpu-eks:network", None),
    # --- the model: types, values, unknown and missing keys ---
    "no-cluster": ({"aws:region": "us-west-2"}, "gpu-eks:cluster", None),
    "region": (stack() | {"aws:region": "us-west-3"}, "aws:region", None),
    "wrong-type": (stack(nodePools={"name": "x"}), "gpu-eks:nodePools", None),
    "bad-value": (
        stack(nodePools=[{**GPU_POOL, "expireAfter": "14d"}]),
        "gpu-eks:nodePools[0].expireAfter",
        None,
    ),
    "unknown-nested-key": (stack(karpenter={"replica": 2}), "gpu-eks:karpenter.replica", None),
    "quoted-number": (
        stack(cluster={"name": "ml", "systemNodes": {"minSize": "3"}}),
        "gpu-eks:cluster.systemNodes.minSize",
        None,
    ),
    "section-rule": (
        stack(cluster={"name": "ml", "endpoint": {"publicAccess": False, "privateAccess": False}}),
        "gpu-eks:cluster.endpoint",
        None,
    ),
    # --- cross-section checks ---
    "cluster-rule": (
        stack(cluster={"name": "ml", "adminRoleArns": [ROLE], "automation": {"deployRoleArn": ROLE}}),
        "gpu-eks:cluster.automation.deployRoleArn",
        "_cluster_problems",
    ),
    "nodes-outside-allow-list": (
        stack(
            cluster={
                "name": "ml",
                "endpoint": {"privateAccess": False, "publicAccessCidrs": ["198.51.100.7/32"]},
            }
        ),
        "gpu-eks:cluster.endpoint.privateAccess",
        "_cluster_problems",
    ),
    "role-of-another-partition": (
        stack(cluster={"name": "ml", "adminRoleArns": [ROLE]}) | {"aws:region": "cn-north-1"},
        "gpu-eks:cluster.adminRoleArns[0]",
        "_cluster_problems",
    ),
    "karpenter-replicas": (
        stack(karpenter={"replicas": 5}),
        "gpu-eks:karpenter.replicas",
        "_karpenter_replicas_problems",
    ),
    "controller-larger-than-a-system-node": (
        stack(karpenter={"controllerResources": {"cpu": "2"}}),
        "gpu-eks:karpenter.controllerResources.cpu = '2': the Karpenter controller requests 2000m of cpu, "
        "more than a m7i.large system node can give it (1930m allocatable",
        "_system_node_problems",
    ),
    "prometheus-larger-than-a-system-node": (
        stack(observability={"backend": "inCluster", "prometheus": {"memory": "8Gi"}}),
        "gpu-eks:observability.prometheus.memory = '8Gi': Prometheus requests 8192Mi of memory",
        "_system_node_problems",
    ),
    "system-nodes-too-small": (
        stack(cluster={"name": "ml", "systemNodes": {"instanceTypes": ["t3.micro"]}}),
        "gpu-eks:cluster.systemNodes.instanceTypes[0] = 't3.micro': the Karpenter controller requests 1024Mi",
        "_system_node_problems",
    ),
    "system-nodes-too-few": (
        stack(
            karpenter={"controllerResources": {"cpu": "1500m"}},
            observability={"backend": "managed", "prometheus": {"cpu": "1500m"}},
        ),
        "gpu-eks:cluster.systemNodes.minSize = 2: 2 system nodes can give 3850m of cpu",
        "_system_node_problems",
    ),
    "gpu-operator-series": (
        stack(gpuOperator={"version": "v25.3.0"}),
        "gpu-eks:gpuOperator.version",
        "_gpu_operator_problems",
    ),
    "cdi-off": (
        stack(nodePools=[GPU_POOL], gpuOperator={"extraValues": {"cdi": {"enabled": False}}}),
        "gpu-eks:gpuOperator.extraValues.cdi.enabled",
        "_gpu_operator_problems",
    ),
    "observability-rule": (
        stack(observability={"backend": "managed", "prometheus": {"retention": "30d"}}),
        "gpu-eks:observability.prometheus.retention",
        "_observability_problems",
    ),
    "service-monitor-without-backend": (
        stack(nodePools=[GPU_POOL], gpuOperator={"dcgmExporter": {"serviceMonitor": True}}),
        "gpu-eks:gpuOperator.dcgmExporter.serviceMonitor",
        "_observability_problems",
    ),
    "duplicate-pool": (
        stack(nodePools=[GPU_POOL, GPU_POOL]),
        "gpu-eks:nodePools[1].name",
        "_node_pool_problems",
    ),
    "startup-taint": (
        stack(nodePools=[{**GPU_POOL, "startupTaints": [{"key": "x/wait", "effect": "NoSchedule"}]}]),
        "gpu-eks:nodePools[0].startupTaints[0].key",
        "_node_pool_problems",
    ),
    "mig-on-l4": (
        stack(nodePools=[{**GPU_POOL, "mig": {"profile": "all-1g.10gb"}}]),
        "gpu-eks:nodePools[0].mig.profile = 'all-1g.10gb': L4 GPUs (g6) do not support MIG",
        "_node_pool_problems",
    ),
    "mig-on-l4-with-smoke-test": (
        stack(
            nodePools=[{**GPU_POOL, "mig": {"profile": "all-1g.10gb"}}],
            smokeTest={"enabled": True, "nodePool": "gpu"},
        ),
        "gpu-eks:nodePools[0].mig.profile = 'all-1g.10gb': L4 GPUs (g6) do not support MIG",
        "_node_pool_problems",
    ),
    "mig-profile-unknown-with-smoke-test": (
        stack(
            nodePools=[{**P4D_POOL, "mig": {"profile": "nope"}}],
            gpuOperator={"mig": {"config": {"x": [{"devices": "all", "mig-enabled": False}]}}},
            smokeTest={"enabled": True, "nodePool": "gpu"},
        ),
        "gpu-eks:nodePools[0]: GPU pool 'gpu': MIG profile 'nope' is not one of the custom configs",
        "_node_pool_problems",
    ),
    "bottlerocket-time-slicing": (
        stack(nodePools=[{**GPU_POOL, "ami": "bottlerocket@1.40.0", "timeSlicing": {"replicas": 2}}]),
        "gpu-eks:nodePools[0]",
        "_node_pool_problems",
    ),
    "cap-below-one-node": (
        stack(nodePools=[{**GPU_POOL, "limits": {"cpu": "2", "nvidia.com/gpu": "4"}}]),
        "gpu-eks:nodePools[0].limits.cpu",
        "_node_pool_problems",
    ),
    "mixed-mig-without-overlays": (
        stack(**MIXED_MIG, karpenter={"gpuSharingOverlays": False}),
        "gpu-eks:karpenter.gpuSharingOverlays",
        "_node_pool_problems",
    ),
    "overlay-gate-off": (
        stack(
            nodePools=[{**GPU_POOL, "timeSlicing": {"replicas": 4}, "limits": {"nvidia.com/gpu": "16"}}],
            karpenter={"featureGates": {"nodeOverlay": False}},
        ),
        "gpu-eks:karpenter.featureGates.nodeOverlay",
        "_node_pool_problems",
    ),
    "team-namespace-taken": (
        stack(teams=[{"name": "gpu-operator", "roleArns": [ROLE]}]),
        "gpu-eks:teams[0].name = 'gpu-operator': is the namespace of the GPU Operator",
        "_team_problems",
    ),
    "team-role-is-admin": (
        stack(
            cluster={"name": "ml", "adminRoleArns": [ROLE]}, teams=[{"name": "research", "roleArns": [ROLE]}]
        ),
        "gpu-eks:teams[0].roleArns[0]",
        "_team_problems",
    ),
    "team-role-of-another-partition": (
        stack(teams=[{"name": "research", "roleArns": [ROLE]}]) | {"aws:region": "cn-north-1"},
        "gpu-eks:teams[0].roleArns[0]",
        "_cluster_problems",
    ),
    "smoke-test-no-pool": (
        stack(smokeTest={"enabled": True, "nodePool": "missing"}),
        "gpu-eks:smokeTest.nodePool",
        "_smoke_test_problems",
    ),
    "smoke-test-cpu-pool": (
        stack(
            nodePools=[{"name": "cpu", "kind": "cpu", "limits": {"cpu": "64"}}],
            smokeTest={"enabled": True, "nodePool": "cpu"},
        ),
        "gpu-eks:smokeTest.nodePool",
        "_smoke_test_problems",
    ),
    "smoke-test-mixed-mig": (
        stack(**MIXED_MIG, smokeTest={"enabled": True, "nodePool": "gpu"}),
        "gpu-eks:smokeTest.nodePool",
        "_smoke_test_problems",
    ),
    "budget-without-target": (
        stack(cost={"monthlyBudgetUsd": 1000}),
        "gpu-eks:cost.monthlyBudgetUsd",
        "_cost_problems",
    ),
    # A stack named `production` is one of policy/policy-config.json's productionStacks.
    "production": (stack(), "gpu-eks:observability.backend", "_production_alerting_problems"),
    "worst-case-over-cap": (
        stack(nodePools=[P4D_POOL], cost={"maxWorstCaseUsdPerHour": 10}),
        "gpu-eks:cost.maxWorstCaseUsdPerHour",
        "_cost_cap_problems",
    ),
}


def _stack_file(case: dict[str, Any] | str) -> str:
    return case if isinstance(case, str) else yaml.safe_dump({"config": case}, sort_keys=False)


@pytest.fixture(scope="module")
def synth_output(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """`python -m synth --check <every case>` in a copy of the program with one stack file per case."""
    project = tmp_path_factory.mktemp("project")
    for name in PROGRAM:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, project / name)
    for case, (content, _, _) in CASES.items():
        (project / f"Pulumi.{case}.yaml").write_text(_stack_file(content))
    result = subprocess.run(
        [sys.executable, "-m", "synth", "--check", *CASES],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return result.returncode, result.stderr


def _block(stderr: str, case: str) -> str:
    """What synth printed for one stack: its Diagnostics block, or the CLI's one-line refusal of its file."""
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if line == f"  pulumi:pulumi:Stack (gpu-eks-{case}):":
            end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith("    ")), len(lines))
            return "\n".join(lines[i:end])
        if line.startswith(f"error: Pulumi.{case}.yaml"):
            return line
    raise AssertionError(f"nothing printed for {case}:\n{stderr}")


def test_every_refusal_exits_2_without_a_traceback(synth_output: tuple[int, str]) -> None:
    code, stderr = synth_output
    assert code == 2, stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1] == f"configuration refused: {', '.join(CASES)}"


@pytest.mark.parametrize("case", CASES)
def test_each_refusal_names_its_key(synth_output: tuple[int, str], case: str) -> None:
    block = _block(synth_output[1], case)
    assert CASES[case][1] in block, block
    if block.startswith("  pulumi:pulumi:Stack"):
        assert "    error: Invalid stack configuration" in block, block


def test_every_cross_section_check_has_a_case() -> None:
    covered = {check for _, _, check in CASES.values() if check}
    checks = CROSS_SECTION_CHECKS + PRODUCTION_CHECKS
    assert covered == {check.__name__ for _, check in checks}


@pytest.mark.parametrize("case", [c for c, (_, _, check) in CASES.items() if check])
def test_each_cross_section_case_is_refused_by_its_check(case: str) -> None:
    """The model accepts the case; the named check is what refuses it."""
    content, key, check_name = CASES[case]
    assert isinstance(content, dict)
    sections = {key.partition(":")[2]: value for key, value in content.items()}
    model = StackConfig.model_validate(json.loads(json.dumps(sections)))
    [check] = [c for _, c in CROSS_SECTION_CHECKS + PRODUCTION_CHECKS if c.__name__ == check_name]
    assert any(str(problem).startswith(key.split(" = ")[0]) for problem in check(model))
