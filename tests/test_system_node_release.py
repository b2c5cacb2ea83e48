"""The system node group's AMI release: the one EKS recommends for the cluster's minor (an SSM public
parameter per AMI type), so a new release is a reviewed plan line instead of waiting for the next minor."""

import pytest
from pulumi.runtime import MockCallArgs

from facts.eks import node_group_release_parameter
from synth.mocks import AwsMocks
from synth.runner import ProgramRun
from tests.helpers import run

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def recommended(ami_type: str, minor: str) -> str:
    """What SSM answers for the parameter (the mock, which answers as SSM does: tests/test_mocks.py)."""
    name = node_group_release_parameter(ami_type, minor)
    answer, _ = AwsMocks("us-west-2").call(
        MockCallArgs(token="aws:ssm/getParameter:getParameter", args={"name": name}, provider="")
    )
    return str(answer["value"])


def test_committed_stacks_pin_the_recommended_release_of_their_minor(any_stack: ProgramRun) -> None:
    group = any_stack.one(NODE_GROUP, "cluster-system")
    version = group.inputs["version"]
    assert group.inputs["releaseVersion"] == recommended("AL2023_x86_64_STANDARD", version)
    assert group.inputs["releaseVersion"].startswith(f"{version}.")  # EKS: the release of the group's minor


@pytest.mark.parametrize(
    ("ami_type", "instance_type", "parameter"),
    [
        (
            "AL2023_ARM_64_STANDARD",
            "m7g.large",
            "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/recommended/release_version",
        ),
        (
            "BOTTLEROCKET_x86_64",
            "m7i.large",
            "/aws/service/bottlerocket/aws-k8s-1.34/x86_64/latest/image_version",
        ),
    ],
)
def test_each_ami_type_reads_its_own_parameter(ami_type: str, instance_type: str, parameter: str) -> None:
    assert node_group_release_parameter(ami_type, "1.34") == parameter
    nodes = {"amiType": ami_type, "instanceTypes": [instance_type]}
    group = run(cluster={"name": "ml", "kubernetesVersion": "1.34", "systemNodes": nodes}).one(NODE_GROUP)
    assert group.inputs["releaseVersion"] == recommended(ami_type, "1.34")
