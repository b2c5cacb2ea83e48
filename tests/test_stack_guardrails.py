"""Every committed stack passes the policy pack's guardrails and the Karpenter API server's checks, as
declared: the same rules `pulumi preview --policy-pack policy` applies, run on the synthesised inputs."""

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from synth.runner import ROOT, ProgramRun
from tests.support.crd_check import validate

sys.path.insert(0, str(Path(ROOT) / "policy"))
from gpu_eks_policy import rules

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def test_every_karpenter_object_passes_the_crd_schema_and_cel_rules(any_stack: ProgramRun) -> None:
    objects = any_stack.of_type(NODEPOOL) + any_stack.of_type(NODECLASS)
    assert objects
    for obj in objects:
        manifest = {k: obj.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert validate(manifest) == [], obj.name


def test_node_pools_reference_declared_node_classes(any_stack: ProgramRun) -> None:
    classes = {r.inputs["metadata"]["name"]: r for r in any_stack.of_type(NODECLASS)}
    for pool in any_stack.of_type(NODEPOOL):
        ref = pool.inputs["spec"]["template"]["spec"]["nodeClassRef"]
        assert ref["name"] in classes
        assert classes[ref["name"]].urn in pool.dependencies


def test_karpenter_objects_wait_for_the_crds_and_controller(any_stack: ProgramRun) -> None:
    releases = {r.name: r.urn for r in any_stack.of_type("kubernetes:helm.sh/v3:Release")}
    for obj in any_stack.of_type(NODEPOOL) + any_stack.of_type(NODECLASS):
        assert releases["karpenter-crd"] in obj.dependencies
        assert releases["karpenter-controller"] in obj.dependencies
        assert obj.delete_before_replace


@pytest.mark.parametrize(
    "check",
    [rules.nodepool_limits_violations, rules.gpu_nodepool_violations],
    ids=["limits", "gpu-taint-and-limit"],
)
def test_node_pools_pass_the_guardrails(
    any_stack: ProgramRun, check: Callable[[Mapping[str, Any]], list[str]]
) -> None:
    for pool in any_stack.of_type(NODEPOOL):
        assert check(pool.inputs) == [], pool.name


def test_node_classes_pass_the_guardrails(any_stack: ProgramRun, prod: ProgramRun) -> None:
    for node_class in any_stack.of_type(NODECLASS):
        assert rules.imdsv2_violations(node_class.inputs) == []
        assert rules.ebs_encryption_violations(node_class.inputs) == []
    for node_class in prod.of_type(NODECLASS):
        assert rules.latest_ami_alias_violations(node_class.inputs) == []


def test_releases_pin_versions_and_iam_has_no_wildcard_actions(any_stack: ProgramRun) -> None:
    for release in any_stack.of_type("kubernetes:helm.sh/v3:Release"):
        # Every chart the program installs is one the pack checks: a new chart must be added there too.
        assert rules.chart_name(release.inputs["chart"]) in rules.DEFAULT_PINNED_CHARTS, release.name
        assert rules.helm_version_violations(release.inputs, rules.DEFAULT_PINNED_CHARTS) == []
    checked = 0
    for resource in any_stack.resources:
        if resource.type.startswith("aws:iam/"):
            assert rules.iam_wildcard_violations(resource.type, resource.inputs) == [], resource.name
            checked += 1
    assert checked > 10
