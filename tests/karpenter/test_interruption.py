"""Interruption queue, its policy and EventBridge rules against upstream's template of the pinned release."""

import json
import re
from typing import Any

import pytest

from components.karpenter.interruption import (
    INTERRUPTION_RULES,
    QUEUE_MESSAGE_RETENTION_SECONDS,
    QUEUE_SQS_MANAGED_SSE,
    TARGET_ID,
    interruption_rules,
    queue_name,
    queue_policy,
    queue_properties,
)
from tests.karpenter.cloudformation import resolve, resources_of_type
from tests.karpenter.conftest import Stack


def test_queue_properties_are_upstreams(template: dict[str, Any], stack: Stack) -> None:
    queue = resolve(
        template["Resources"]["KarpenterInterruptionQueue"]["Properties"], stack.template_parameters()
    )

    assert set(queue) == {"QueueName", "MessageRetentionPeriod", "SqsManagedSseEnabled"}
    assert queue_properties() == {
        "message_retention_seconds": queue["MessageRetentionPeriod"],
        "sqs_managed_sse_enabled": queue["SqsManagedSseEnabled"],
    }
    assert queue_properties() == {"message_retention_seconds": 300, "sqs_managed_sse_enabled": True}
    assert (QUEUE_MESSAGE_RETENTION_SECONDS, QUEUE_SQS_MANAGED_SSE) == (300, True)
    assert queue_name(stack.cluster_name) == queue["QueueName"] == "gpu-eks-prod"


def test_queue_name_refuses_what_sqs_refuses() -> None:
    assert queue_name("a" * 80) == "a" * 80
    with pytest.raises(ValueError, match="not a valid SQS queue name"):
        queue_name("a" * 81)


def test_queue_policy_is_upstreams(template: dict[str, Any], stack: Stack) -> None:
    properties = resolve(
        template["Resources"]["KarpenterInterruptionQueuePolicy"]["Properties"], stack.template_parameters()
    )
    upstream = properties["PolicyDocument"]
    policy = queue_policy(stack.queue_arn)

    assert properties["Queues"] == [stack.queue_url]
    assert policy["Id"] == upstream["Id"] == "EC2InterruptionPolicy"
    assert len(policy["Statement"]) == len(upstream["Statement"]) == 2
    for statement, upstream_statement in zip(policy["Statement"], upstream["Statement"], strict=True):
        assert statement == upstream_statement
    # The one addition: the current policy language version, which the template leaves out.
    assert {key: value for key, value in policy.items() if key != "Version"} == upstream
    assert "Version" not in upstream
    assert policy["Version"] == "2012-10-17"


def test_queue_policy_statements(stack: Stack) -> None:
    allow, deny = queue_policy(stack.queue_arn)["Statement"]
    assert allow == {
        "Effect": "Allow",
        "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
        "Action": "sqs:SendMessage",
        "Resource": stack.queue_arn,
    }
    assert deny["Sid"] == "DenyHTTP"
    assert deny["Effect"] == "Deny"
    assert deny["Principal"] == "*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": False}}
    assert '"aws:SecureTransport": false' in json.dumps(deny)


@pytest.mark.parametrize(
    ("queue_arn", "message"),
    [
        ("https://sqs.us-west-2.amazonaws.com/123456789012/q", "queue_arn must be an ARN"),
        ("arn:aws:sns:us-west-2:123456789012:q", "must be an ARN of service 'sqs'"),
        ("arn:aws-iso:sqs:us-iso-east-1:123456789012:q", "partition must be one of"),
    ],
)
def test_queue_policy_refuses_anything_but_a_queue_arn(queue_arn: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        queue_policy(queue_arn)


def test_rules_are_upstreams(template: dict[str, Any], stack: Stack) -> None:
    upstream = {
        logical_id: resolve(properties, stack.template_parameters())
        for logical_id, properties in resources_of_type(template, "AWS::Events::Rule").items()
    }
    rules = {rule.logical_id: rule for rule in INTERRUPTION_RULES}

    assert list(rules) == list(upstream)
    for logical_id, properties in upstream.items():
        assert set(properties) == {"EventPattern", "Targets"}, logical_id
        assert rules[logical_id].event_pattern == properties["EventPattern"], logical_id
        assert properties["Targets"] == [{"Id": TARGET_ID, "Arn": stack.queue_arn}], logical_id


def test_rules_sources_and_detail_types() -> None:
    assert [(rule.source, rule.detail_type) for rule in interruption_rules()] == [
        ("aws.health", "AWS Health Event"),
        ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        ("aws.ec2", "EC2 Instance State-change Notification"),
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
    ]


def test_rule_event_pattern_json_round_trips() -> None:
    for rule in INTERRUPTION_RULES:
        assert json.loads(rule.event_pattern_json()) == {
            "source": [rule.source],
            "detail-type": [rule.detail_type],
        }
    assert INTERRUPTION_RULES[0].event_pattern_json() == (
        '{"source": ["aws.health"], "detail-type": ["AWS Health Event"]}'
    )


def test_rule_names_are_unique_kebab_case() -> None:
    names = [rule.name for rule in INTERRUPTION_RULES]
    assert len(set(names)) == len(names) == 5
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", name) for name in names)
