"""mypy skips only SDK subpackages that nothing here uses (scripts/type_check_scope.py)."""

import re

import pytest

from scripts.type_check_scope import (
    PYPROJECT,
    _imported_at_module_level,
    package_dir,
    render,
    skipped,
    subpackages,
    unused_pattern,
    used_in,
)
from synth.runner import ProgramRun


def test_the_skip_list_is_current() -> None:
    current = PYPROJECT.read_text()
    assert current == render(current), "run: .venv/bin/python -m scripts.type_check_scope"


def test_no_service_a_stack_declares_resources_of_is_skipped(any_stack: ProgramRun) -> None:
    declared = {r.type.split(":")[1].split("/")[0] for r in any_stack.resources if r.type.startswith("aws:")}
    assert {"ec2", "eks", "iam", "sqs", "cloudwatch"} <= declared
    assert not declared & set(skipped("pulumi_aws"))


def test_no_api_group_a_stack_declares_objects_of_is_skipped(any_stack: ProgramRun) -> None:
    # `kubernetes:rbac.authorization.k8s.io/v1:Role` is pulumi_kubernetes.rbac; custom resources
    # (`kubernetes:karpenter.sh/v1:NodePool`) are apiextensions.CustomResource.
    groups = {
        r.type.split(":")[1].split("/")[0].split(".")[0]
        for r in any_stack.resources
        if r.type.startswith("kubernetes:")
    }
    declared = (groups & subpackages("pulumi_kubernetes")) | {"apiextensions"}
    assert {"core", "apps", "helm", "rbac", "apiextensions"} <= declared
    assert not declared & set(skipped("pulumi_kubernetes"))


@pytest.mark.parametrize(
    ("source", "services"),
    [
        ("import pulumi_aws as aws\naws.ec2.Vpc('v')\naws.get_partition()", {"ec2", "get_partition"}),
        ("import pulumi_aws\nx: pulumi_aws.iam.Role", {"iam"}),
        ("import pulumi_aws.sqs as queues", {"sqs"}),
        ("import pulumi_aws.sqs\npulumi_aws.eks.Addon", {"sqs", "eks"}),
        ("from pulumi_aws import cloudwatch, get_region", {"cloudwatch", "get_region"}),
        ("from pulumi_aws.s3 import Bucket", {"s3"}),
        ("import pulumi_kubernetes as aws\naws.core.v1", set()),
        ("import pulumi\npulumi.ec2", set()),
    ],
)
def test_services_are_found_however_they_are_imported(source: str, services: set[str]) -> None:
    assert used_in(source, "pulumi_aws") == services


def test_api_groups_are_found_like_services() -> None:
    source = (
        "import pulumi_kubernetes as k8s\nk8s.core.v1.Namespace('n')\nfrom pulumi_kubernetes.helm import v3"
    )
    assert used_in(source, "pulumi_kubernetes") == {"core", "helm"}


def test_what_a_used_api_group_imports_at_module_level_is_not_skipped() -> None:
    # batch/v1 types hold scheduling types; helm/v3 imports the yaml module, which imports every API group,
    # but only inside the functions that build objects by kind, which mypy does not follow for us.
    sdk = "pulumi_kubernetes"
    assert "scheduling" in _imported_at_module_level(package_dir(sdk) / "batch" / "v1" / "_inputs.py", sdk)
    assert "yaml" in _imported_at_module_level(package_dir(sdk) / "helm" / "v3" / "helm.py", sdk)
    assert _imported_at_module_level(package_dir(sdk) / "yaml" / "yaml.py", sdk) == {"apiextensions"}
    assert {"scheduling", "yaml", "meta"}.isdisjoint(skipped(sdk))
    assert {"admissionregistration", "autoscaling"} <= set(skipped(sdk))


def test_set_up_compiles_exactly_what_mypy_analyses() -> None:
    pattern = re.compile(unused_pattern())
    for sdk in ("pulumi_aws", "pulumi_kubernetes"):
        for name in subpackages(sdk):
            path = f"/venv/site-packages/{sdk}/{name}/_inputs.py"
            assert bool(pattern.search(path)) == (name in skipped(sdk)), path
