"""CostBudget: an AWS Budgets cost budget on what the stack's cost-allocation tag covers.

Everything gpu-eks creates carries `gpu-eks/stack: <stack>` (and `gpu-eks/cluster`); the GPU nodes carry it
too, through their EC2NodeClass (with `gpu-eks/pool`), and so do the volumes the EBS CSI driver creates. Once
that key is activated as a cost-allocation tag (Billing console, Cost allocation tags: activation is per
account and shows up to 24 hours later), Cost Explorer and AWS Budgets see it as `user:gpu-eks/stack`, and
this budget counts the month's cost of the stack, GPU nodes and volumes included (before credits and
refunds), and notifies at 80 % spent and when the month is forecast to end above it.
"""

from collections.abc import Sequence
from decimal import Decimal

import pulumi
import pulumi_aws as aws

from config.cost import BUDGET_ALERTS, CostConfig

STACK_TAG = "gpu-eks/stack"
"""The cost-allocation tag the budget filters on (set on every resource by `__main__.py`)."""


def budget_filter(stack: str) -> aws.budgets.BudgetCostFilterArgs:
    """The cost filter of the stack's tag: `TagKeyValue` with `user:<key>$<value>`, the form AWS Budgets
    takes for a user-defined cost-allocation tag (pulumi-aws 7.51.1 `aws.budgets.Budget`, example "Create a
    cost filter using resource tags": `"user:business-unit$human_resources"`)."""
    return aws.budgets.BudgetCostFilterArgs(name="TagKeyValue", values=[f"user:{STACK_TAG}${stack}"])


def budget_cost_types() -> aws.budgets.BudgetCostTypesArgs:
    """Usage before credits and refunds (AWS Budgets counts both by default, pulumi-aws 7.51.1
    `BudgetCostTypesArgs`: `include_credit`, `include_refund` default true): an account living on credits
    would otherwise hear nothing of its GPU spend until the credits run out."""
    return aws.budgets.BudgetCostTypesArgs(include_credit=False, include_refund=False)


def budget_notifications(
    emails: Sequence[str], topic_arn: str | None
) -> list[aws.budgets.BudgetNotificationArgs]:
    """One notification per alert of `BUDGET_ALERTS`, each to every subscriber (AWS Budgets allows one SNS
    topic and up to 10 e-mail addresses per notification)."""
    return [
        aws.budgets.BudgetNotificationArgs(
            comparison_operator="GREATER_THAN",
            threshold=float(threshold),
            threshold_type="PERCENTAGE",
            notification_type=kind,
            subscriber_email_addresses=list(emails) or None,
            subscriber_sns_topic_arns=[topic_arn] if topic_arn else None,
        )
        for threshold, kind in BUDGET_ALERTS
    ]


def budget_name(cluster_name: str) -> str:
    """The budget's name: budgets are named per account, and the cluster's name is unique where it runs."""
    return f"gpu-eks-{cluster_name}"


class CostBudget(pulumi.ComponentResource):
    """The stack's monthly cost budget (only when `cost.monthlyBudgetUsd` is set)."""

    def __init__(
        self,
        name: str,
        *,
        config: CostConfig,
        stack: str,
        cluster_name: str,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-eks:budget:CostBudget", name, None, opts)
        amount = config.monthly_budget_usd or Decimal(0)
        self.budget = aws.budgets.Budget(
            name,
            name=budget_name(cluster_name),
            budget_type="COST",
            limit_amount=f"{amount:f}",
            limit_unit="USD",
            time_unit="MONTHLY",
            cost_filters=[budget_filter(stack)],
            cost_types=budget_cost_types(),
            notifications=budget_notifications(
                config.budget_notification_emails, config.budget_notification_topic_arn
            ),
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"budgetName": self.budget.name})
