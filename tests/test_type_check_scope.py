"""mypy skips only pulumi_aws services that nothing here uses (scripts/type_check_scope.py)."""

import pytest

from scripts.type_check_scope import PYPROJECT, render, skipped, used_in
from synth.runner import ProgramRun


def test_the_skip_list_is_current() -> None:
    current = PYPROJECT.read_text()
    assert current == render(current), "run: .venv/bin/python -m scripts.type_check_scope"


def test_no_service_a_stack_declares_resources_of_is_skipped(any_stack: ProgramRun) -> None:
    declared = {r.type.split(":")[1].split("/")[0] for r in any_stack.resources if r.type.startswith("aws:")}
    assert {"ec2", "eks", "iam", "sqs", "cloudwatch"} <= declared
    assert not declared & set(skipped())


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
    assert used_in(source) == services
