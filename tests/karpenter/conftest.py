"""Shared fixtures: one stack per supported partition, and the vendored template resolved for it."""

from dataclasses import dataclass
from typing import Any

import pytest

from tests.karpenter.cloudformation import load_template


@dataclass(frozen=True)
class Stack:
    """Where a cluster lives, and the ARNs of the resources the template would create for it."""

    partition: str
    region: str
    dns_suffix: str
    account_id: str = "123456789012"
    cluster_name: str = "gpu-eks-prod"

    @property
    def node_role_arn(self) -> str:
        return f"arn:{self.partition}:iam::{self.account_id}:role/KarpenterNodeRole-{self.cluster_name}"

    @property
    def queue_arn(self) -> str:
        return f"arn:{self.partition}:sqs:{self.region}:{self.account_id}:{self.cluster_name}"

    @property
    def queue_url(self) -> str:
        return f"https://sqs.{self.region}.{self.dns_suffix}/{self.account_id}/{self.cluster_name}"

    def template_parameters(self) -> dict[str, str]:
        """Every `${...}`, `!Ref` and `!GetAtt` of the template, as CloudFormation would fill them in."""
        return {
            "AWS::Partition": self.partition,
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::URLSuffix": self.dns_suffix,
            "ClusterName": self.cluster_name,
            "KarpenterNodeRole.Arn": self.node_role_arn,
            "KarpenterInterruptionQueue.Arn": self.queue_arn,
            "KarpenterInterruptionQueue": self.queue_url,
        }


STACKS = (
    Stack(partition="aws", region="us-west-2", dns_suffix="amazonaws.com"),
    Stack(partition="aws-cn", region="cn-northwest-1", dns_suffix="amazonaws.com.cn"),
    Stack(partition="aws-us-gov", region="us-gov-west-1", dns_suffix="amazonaws.com"),
)


@pytest.fixture(params=STACKS, ids=[stack.partition for stack in STACKS])
def stack(request: pytest.FixtureRequest) -> Stack:
    result: Stack = request.param
    return result


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()
