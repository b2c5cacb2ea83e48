"""The `gpu-eks:cost` section: a cap on what the node pools may cost at once, and a monthly AWS budget.

The cap is checked before any resource exists against the pools' worst case (`pools.cost`: the most
expensive set of nodes their limits admit, at us-east-1 on-demand list price from Karpenter 1.14.1's compiled
table); the policy pack enforces the same bound on the declared NodePools (`policy/`). The budget is an AWS
Budgets cost budget filtered by the stack's cost-allocation tag (`gpu-eks/stack`), which notifies by e-mail
and/or an SNS topic.
"""

from decimal import Decimal
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from config.base import ConfigModel
from config.types import described, repeated


def _usd(value: Any) -> Any:
    """A positive amount of US dollars as the stack file writes it: a number (not a string, not a switch)."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("must be a positive amount in US dollars written as a number, such as 550 or 549.5")
    amount = Decimal(str(value))
    if not amount.is_finite() or amount <= 0:
        raise ValueError("must be a positive amount in US dollars, such as 550 or 549.5")
    return amount


UsdAmount = Annotated[Decimal, BeforeValidator(_usd)]


def as_written(amount: Decimal) -> int | float:
    """An amount as the stack file wrote it (550, 549.5), for messages."""
    return int(amount) if amount == amount.to_integral_value() else float(amount)


EmailAddress = Annotated[
    str,
    described(r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address such as platform-team@example.com"),
]

SnsTopicArn = Annotated[
    str,
    described(
        r"arn:aws(-cn|-us-gov)?:sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}",
        "an SNS topic ARN such as arn:aws:sns:us-west-2:111122223333:gpu-eks-budget",
    ),
]

BUDGET_ALERTS = ((Decimal(80), "ACTUAL"), (Decimal(100), "FORECASTED"))
"""When the budget notifies: at 80 % of the month's budget actually spent, and when AWS forecasts the month
to end above it."""


class CostConfig(ConfigModel):
    """What the stack may spend: a cap on the node pools' worst case, and a monthly budget."""

    max_worst_case_usd_per_hour: UsdAmount | None = None
    """The most the node pools' limits may let run at once, per hour in US dollars: their worst case (the
    most expensive set of nodes every pool's limits admit, at us-east-1 on-demand list price; `python -m
    synth cost <stack>` shows it) must stay at or below it, or the configuration is refused before anything
    is created. While a pool's nodes are replaced it may bill up to twice its worst case, for at most its
    `terminationGracePeriod` (draining nodes do not count against the limits). Leave unset for no cap."""
    monthly_budget_usd: UsdAmount | None = None
    """An AWS Budgets cost budget per calendar month, in US dollars, on what is tagged `gpu-eks/stack:
    <stack>` (activate that tag as a cost-allocation tag in the billing console first); it notifies at 80 %
    spent and at a forecast above 100 %. Needs `budgetNotificationEmails` or `budgetNotificationTopicArn`."""
    budget_notification_emails: tuple[EmailAddress, ...] = Field(default=(), max_length=10)
    """E-mail addresses the budget notifies (at most 10: AWS Budgets allows one SNS topic and up to 10
    e-mail subscribers per notification, API reference `Notification`)."""
    budget_notification_topic_arn: SnsTopicArn | None = None
    """An SNS topic of the same account the budget notifies; its access policy must let
    `budgets.amazonaws.com` publish (AWS Cost Management guide, "Creating an Amazon SNS topic for budget
    notifications")."""

    def problems(self) -> list[tuple[tuple[str, ...], str, Any]]:
        """Mistakes that span keys of this section, as (path below `cost`, message, value)."""
        targets = bool(self.budget_notification_emails or self.budget_notification_topic_arn)
        found: list[tuple[tuple[str, ...], str, Any]] = []
        if self.monthly_budget_usd is not None and not targets:
            found.append(
                (
                    ("monthlyBudgetUsd",),
                    "is set but nobody would hear of it: add budgetNotificationEmails (a list of addresses) "
                    "and/or budgetNotificationTopicArn (an SNS topic ARN)",
                    as_written(self.monthly_budget_usd),
                )
            )
        if self.monthly_budget_usd is None and targets:
            key = (
                "budgetNotificationEmails"
                if self.budget_notification_emails
                else "budgetNotificationTopicArn"
            )
            value = list(self.budget_notification_emails) or self.budget_notification_topic_arn
            found.append(((key,), "is set without monthlyBudgetUsd, so no budget would notify it", value))
        if duplicates := repeated(self.budget_notification_emails):
            found.append(
                (("budgetNotificationEmails",), f"lists {', '.join(duplicates)} more than once", duplicates)
            )
        return found
