"""The pack as the Pulumi CLI runs it: `python -m pulumi.policy <engine> <pack dir>`, spoken to over gRPC.

No Pulumi CLI is needed: the SDK's entry point runs `policy/__main__.py` with runpy, `PolicyPack` serves the
Analyzer service on 127.0.0.1 and prints its port, and these tests play the engine (GetAnalyzerInfo,
Configure, ConfigureStack, Analyze) with the protobuf messages the engine sends.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

POLICY_DIR = Path(__file__).resolve().parent.parent
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's sentinel for an unknown string

Analyze = Callable[[str, dict[str, Any]], dict[str, list[str]]]


class Pack:
    def __init__(self, stack: str) -> None:
        env = dict(os.environ, PULUMI_STACK=stack, PULUMI_PROJECT="gpu-eks", PULUMI_DRY_RUN="true")
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(POLICY_DIR)],
            cwd=POLICY_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        port = self.process.stdout.readline().strip()
        assert port.isdigit(), f"the pack did not start: {port!r}"
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def configure(self, config: dict[str, dict[str, Any]]) -> None:
        request = analyzer_pb2.ConfigureAnalyzerRequest()
        for name, properties in config.items():
            entry = request.policyConfig[name]
            entry.enforcementLevel = analyzer_pb2.MANDATORY
            entry.properties.update(properties)
        self.stub.Configure(request, timeout=10)

    def analyze(self, resource_type: str, props: dict[str, Any]) -> list[Any]:
        properties = struct_pb2.Struct()
        properties.update(props)
        request = analyzer_pb2.AnalyzeRequest(
            type=resource_type,
            properties=properties,
            urn=f"urn:pulumi:t::gpu-eks::{resource_type}::r",
            name="r",
        )
        return list(self.stub.Analyze(request, timeout=10).diagnostics)


@pytest.fixture
def start_pack() -> Iterator[Callable[[str], Pack]]:
    packs: list[Pack] = []

    def start(stack: str) -> Pack:
        packs.append(Pack(stack))
        return packs[-1]

    yield start
    for pack in packs:
        pack.close()


def mandatory_violations(diagnostics: list[Any]) -> set[str]:
    return {d.policyName for d in diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY}


GPU_POOL_WITHOUT_TAINT = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]}
                ]
            }
        },
        "limits": {"cpu": "1000", "nvidia.com/gpu": 8},
    },
}
LATEST_NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "gpu"},
    "spec": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "metadataOptions": {"httpTokens": "required"},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": True}}],
    },
}


def test_engine_sees_every_policy_as_mandatory(start_pack: Callable[[str], Pack]) -> None:
    info = start_pack("prod").stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=10)
    assert info.name == "gpu-eks-guardrails"
    assert len(info.policies) == 8
    assert {p.enforcementLevel for p in info.policies} == {analyzer_pb2.MANDATORY}
    schemas = {p.name: set(p.configSchema.properties) for p in info.policies}
    assert schemas["karpenter-no-latest-ami-in-production"] == {"productionStacks"}
    assert schemas["karpenter-worst-case-spend"] == {"maxWorstCaseUsdPerHour"}


def test_violations_in_a_production_stack(start_pack: Callable[[str], Pack]) -> None:
    pack = start_pack("prod")
    pack.configure(json.loads((POLICY_DIR / "policy-config.json").read_text()))
    assert mandatory_violations(
        pack.analyze("kubernetes:karpenter.sh/v1:NodePool", GPU_POOL_WITHOUT_TAINT)
    ) == {"karpenter-gpu-nodepool-taint-and-limit"}
    assert mandatory_violations(
        pack.analyze("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", LATEST_NODECLASS)
    ) == {"karpenter-no-latest-ami-in-production"}
    assert mandatory_violations(
        pack.analyze("kubernetes:helm.sh/v3:Release", {"chart": "karpenter-crd"})
    ) == {"helm-release-pinned-version"}
    star = json.dumps({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
    assert mandatory_violations(pack.analyze("aws:iam/rolePolicy:RolePolicy", {"policy": star})) == {
        "iam-no-wildcard-actions"
    }


def test_latest_alias_passes_in_dev_unless_tagged_production(start_pack: Callable[[str], Pack]) -> None:
    pack = start_pack("dev")
    assert pack.analyze("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", LATEST_NODECLASS) == []
    pack.stub.ConfigureStack(
        analyzer_pb2.AnalyzerStackConfigureRequest(stack="dev", tags={"environment": "production"}),
        timeout=10,
    )
    assert mandatory_violations(
        pack.analyze("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", LATEST_NODECLASS)
    ) == {"karpenter-no-latest-ami-in-production"}


def test_unknown_values_become_an_advisory_note_not_a_pass(start_pack: Callable[[str], Pack]) -> None:
    [diagnostic] = start_pack("prod").analyze("aws:iam/policy:Policy", {"policy": UNKNOWN_STRING})
    assert diagnostic.enforcementLevel == analyzer_pb2.ADVISORY
    assert "during preview" in diagnostic.message
