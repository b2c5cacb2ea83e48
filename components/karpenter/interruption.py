"""Karpenter's interruption queue: SQS queue settings, its policy and the EventBridge rules that feed it.

Source: `cloudformation.yaml` of Karpenter 1.14.1 (`KarpenterInterruptionQueue`,
`KarpenterInterruptionQueuePolicy` and the five `AWS::Events::Rule` resources), vendored in
`tests/fixtures/karpenter-1.14.1/` and compared against in the tests.

Wiring (done by the component): one `aws.sqs.Queue(**queue_properties(), name=queue_name(cluster))`, one
`aws.sqs.QueuePolicy(policy=json.dumps(queue_policy(queue.arn)))`, and per rule in `INTERRUPTION_RULES` an
`aws.cloudwatch.EventRule(event_pattern=rule.event_pattern_json())` with an
`aws.cloudwatch.EventTarget(target_id=TARGET_ID, arn=queue.arn)`. The controller is told the queue NAME
through the chart's `settings.interruptionQueue`. With interruption handling off none of this exists.
"""

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from components.iam_document import PolicyDocument, policy_document
from facts.partitions import check_arn, check_cluster_name, partition_of_arn

QUEUE_MESSAGE_RETENTION_SECONDS: Final = 300
"""`MessageRetentionPeriod`: an interruption notice older than five minutes is useless."""

QUEUE_SQS_MANAGED_SSE: Final = True
"""`SqsManagedSseEnabled`: server-side encryption with SQS-owned keys."""

QUEUE_POLICY_ID: Final = "EC2InterruptionPolicy"

QUEUE_SENDERS: Final[tuple[str, ...]] = ("events.amazonaws.com", "sqs.amazonaws.com")
"""Service principals allowed to send to the queue (literal in the template, in every partition)."""

TARGET_ID: Final = "KarpenterInterruptionQueueTarget"
"""Target ID of the queue in every rule."""

_QUEUE_NAME_MAX: Final = 80
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def queue_properties() -> dict[str, Any]:
    """Keyword arguments of `aws.sqs.Queue` that upstream sets: retention 300 s, SQS-managed SSE."""
    return {
        "message_retention_seconds": QUEUE_MESSAGE_RETENTION_SECONDS,
        "sqs_managed_sse_enabled": QUEUE_SQS_MANAGED_SSE,
    }


def queue_name(cluster_name: str) -> str:
    """Upstream's queue name: the cluster name (`QueueName: ${ClusterName}`).

    Raises `ValueError` for cluster names SQS does not accept as queue names (over 80 characters).
    """
    name = check_cluster_name(cluster_name)
    if not _QUEUE_NAME.match(name):
        raise ValueError(
            f"cluster name {name!r} is not a valid SQS queue name "
            f"(at most {_QUEUE_NAME_MAX} letters, digits, '-' or '_'); choose a queue name"
        )
    return name


def queue_policy(queue_arn: str) -> PolicyDocument:
    """Resource policy of the interruption queue: EventBridge and SQS may send; plain HTTP is denied.

    Statements as in the template. One addition: `"Version": "2012-10-17"`, which the template omits (AWS
    then assumes the 2008 policy language); the statements use nothing that differs between the two.
    No partition argument: the template writes the service principals literally, and `queue_arn` carries
    its partition (checked).
    """
    partition = partition_of_arn(queue_arn, argument="queue_arn")
    check_arn(queue_arn, service="sqs", partition=partition, argument="queue_arn")
    return policy_document(
        {
            "Effect": "Allow",
            "Principal": {"Service": list(QUEUE_SENDERS)},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
        },
        {
            "Sid": "DenyHTTP",
            "Effect": "Deny",
            "Action": "sqs:*",
            "Resource": queue_arn,
            "Condition": {"Bool": {"aws:SecureTransport": False}},
            "Principal": "*",
        },
        policy_id=QUEUE_POLICY_ID,
    )


@dataclass(frozen=True)
class InterruptionRule:
    """One EventBridge rule that forwards an event type to the interruption queue."""

    logical_id: str
    """The rule's logical ID in the template."""
    name: str
    """Short kebab-case name, for Pulumi resource names (`<cluster>-<name>`)."""
    description: str
    """What the rule forwards, for the rule's `description`."""
    source: str
    """`source` of the events."""
    detail_type: str
    """`detail-type` of the events."""

    @property
    def event_pattern(self) -> dict[str, list[str]]:
        """The rule's event pattern, as in the template."""
        return {"source": [self.source], "detail-type": [self.detail_type]}

    def event_pattern_json(self) -> str:
        """`event_pattern` as the JSON string `aws.cloudwatch.EventRule(event_pattern=...)` takes."""
        return json.dumps(self.event_pattern)


INTERRUPTION_RULES: Final[tuple[InterruptionRule, ...]] = (
    InterruptionRule(
        logical_id="ScheduledChangeRule",
        name="health-event",
        description="Karpenter interruption: AWS Health scheduled changes",
        source="aws.health",
        detail_type="AWS Health Event",
    ),
    InterruptionRule(
        logical_id="SpotInterruptionRule",
        name="spot-interruption",
        description="Karpenter interruption: EC2 Spot Instance interruption warnings",
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
    ),
    InterruptionRule(
        logical_id="RebalanceRule",
        name="rebalance",
        description="Karpenter interruption: EC2 instance rebalance recommendations",
        source="aws.ec2",
        detail_type="EC2 Instance Rebalance Recommendation",
    ),
    InterruptionRule(
        logical_id="InstanceStateChangeRule",
        name="instance-state-change",
        description="Karpenter interruption: EC2 instance state changes",
        source="aws.ec2",
        detail_type="EC2 Instance State-change Notification",
    ),
    InterruptionRule(
        logical_id="CapacityReservationInterruptionRule",
        name="capacity-reservation-interruption",
        description="Karpenter interruption: EC2 capacity reservation interruption warnings",
        source="aws.ec2",
        detail_type="EC2 Capacity Reservation Instance Interruption Warning",
    ),
)
"""The five rules of the template, in its order."""


def interruption_rules() -> tuple[InterruptionRule, ...]:
    """`INTERRUPTION_RULES` (a function for callers that prefer one)."""
    return INTERRUPTION_RULES
