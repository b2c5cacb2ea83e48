"""The stack's cost budget and the tags that attribute spend to a stack, a cluster and a pool."""

import pytest

from synth.runner import ProgramRun
from tests.helpers import run

BUDGET = "aws:budgets/budget:Budget"
GPU_POOL = {"name": "gpu-a", "instanceFamilies": ["g6"], "limits": {"nvidia.com/gpu": "4"}}


def test_no_budget_unless_one_is_configured(any_stack: ProgramRun) -> None:
    assert any_stack.of_type(BUDGET) == []


def test_a_budget_counts_the_stacks_tag_and_notifies_its_subscribers() -> None:
    program = run(
        nodePools=[GPU_POOL],
        cost={
            "monthlyBudgetUsd": 25000,
            "budgetNotificationEmails": ["platform@example.com"],
            "budgetNotificationTopicArn": "arn:aws:sns:us-west-2:111122223333:gpu-eks-budget",
        },
    )
    (budget,) = program.of_type(BUDGET)
    inputs = budget.inputs
    assert inputs["name"] == "gpu-eks-ml-test"
    assert (inputs["budgetType"], inputs["limitAmount"], inputs["limitUnit"], inputs["timeUnit"]) == (
        "COST",
        "25000",
        "USD",
        "MONTHLY",
    )
    # AWS Budgets filters a user-defined cost-allocation tag as `user:<key>$<value>`.
    assert inputs["costFilters"] == [{"name": "TagKeyValue", "values": ["user:gpu-eks/stack$test"]}]
    # Usage before credits and refunds: credits would hide GPU spend until they run out.
    assert inputs["costTypes"] == {"includeCredit": False, "includeRefund": False}
    subscribers = {
        "subscriberEmailAddresses": ["platform@example.com"],
        "subscriberSnsTopicArns": ["arn:aws:sns:us-west-2:111122223333:gpu-eks-budget"],
    }
    assert inputs["notifications"] == [
        {"comparisonOperator": "GREATER_THAN", "threshold": 80, "thresholdType": "PERCENTAGE",
         "notificationType": "ACTUAL", **subscribers},
        {"comparisonOperator": "GREATER_THAN", "threshold": 100, "thresholdType": "PERCENTAGE",
         "notificationType": "FORECASTED", **subscribers},
    ]  # fmt: skip
    assert inputs["tags"]["gpu-eks/stack"] == "test"
    # The provider's id is `<account>:<name>` (the mock follows terraform-provider-aws budgets/budget.go).
    assert budget.id.endswith(":gpu-eks-ml-test")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_node_class_tags_its_instances_with_stack_cluster_and_pool(
    stack: str, request: pytest.FixtureRequest
) -> None:
    program: ProgramRun = request.getfixturevalue(stack)
    classes = program.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    assert classes
    for node_class in classes:
        pool = node_class.inputs["metadata"]["name"]
        tags = node_class.inputs["spec"]["tags"]
        assert {k: tags[k] for k in ("gpu-eks/stack", "gpu-eks/cluster", "gpu-eks/pool")} == {
            "gpu-eks/stack": stack,
            "gpu-eks/cluster": f"ml-{stack}",
            "gpu-eks/pool": pool,
        }
