"""`karpenter-worst-case-spend`: the stack policy bounding the declared NodePools' worst-case spend.

Driven in-process through pulumi_policy's `StackValidationArgs` (props wrapped as the engine wraps them), and
through gRPC as the engine calls `AnalyzeStack`. The pack's figure is the program's: both stacks' declared
objects are priced by the pack exactly as `synth cost` prices their configuration.
"""

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from gpu_eks_policy import build_policies, spend
from gpu_eks_policy.pack import STACK_ENV_VAR
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from components import yaml_text

POLICY_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = POLICY_DIR.parent
POLICY = next(
    p
    for p in build_policies()
    if isinstance(p, StackValidationPolicy) and p.name == "karpenter-worst-case-spend"
)


def declared(stack: str) -> list[dict[str, Any]]:
    """Every resource `stack`'s committed snapshot records, as resources of the engine (the pack picks the
    NodePools and NodeOverlays itself)."""
    entries = yaml_text.load((REPO_ROOT / "snapshots" / stack / "resources.yaml").read_text())
    return [e for e in entries if "inputs" in e]  # components have none


def urn(stack: str, resource: dict[str, Any]) -> str:
    return f"urn:pulumi:{stack}::gpu-eks::{resource['type']}::{resource['name']}"


def violations(resources: list[dict[str, Any]], config: dict[str, Any], stack: str = "prod") -> list[str]:
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    policy_resources = [
        PolicyResource(
            r["type"], unknown_checking_proxy(r["inputs"]), urn(stack, r), r["name"], opts, None, None, [], {}
        )
        for r in resources
    ]  # fmt: skip
    messages: list[str] = []
    previous = os.environ.get(STACK_ENV_VAR)
    os.environ[STACK_ENV_VAR] = stack
    try:
        args = StackValidationArgs(policy_resources, config)

        def report(message: str, urn: str | None = None) -> None:
            messages.append(message)

        POLICY.validate(args, report)
    finally:
        if previous is None:
            del os.environ[STACK_ENV_VAR]
        else:
            os.environ[STACK_ENV_VAR] = previous
    return messages


def test_the_committed_config_caps_prod_as_its_stack_file_does() -> None:
    policy_config = json.loads((POLICY_DIR / "policy-config.json").read_text())
    caps = policy_config["karpenter-worst-case-spend"]["maxWorstCaseUsdPerHour"]
    for stack_file in sorted(REPO_ROOT.glob("Pulumi.*.yaml")):
        if stack_file.name == "Pulumi.yaml":
            continue
        stack = stack_file.name.split(".")[1]
        cost = yaml_text.load(stack_file.read_text())["config"].get("gpu-eks:cost") or {}
        assert caps.get(stack) == cost.get("maxWorstCaseUsdPerHour"), stack
    assert violations(declared("prod"), policy_config["karpenter-worst-case-spend"]) == []


def test_a_cap_below_the_declared_worst_case_is_a_violation_naming_the_figure_and_pools() -> None:
    (message,) = violations(declared("prod"), {"maxWorstCaseUsdPerHour": {"prod": 500}})
    assert message.startswith(
        "The NodePools may run $544.26/h at once at their limits (us-east-1 on-demand list price), above "
        "this stack's cap of $500/h (maxWorstCaseUsdPerHour): gpu-training up to $440.32/h "
        "(8 x p5.48xlarge); gpu-inference up to $103.94/h (64 x g5.4xlarge)."
    )
    assert violations(declared("prod"), {"maxWorstCaseUsdPerHour": {"*": 545}}) == []
    assert violations(declared("prod"), {"maxWorstCaseUsdPerHour": {"dev": 1}}) == []


def test_the_packs_figure_is_the_programs() -> None:
    """`pools.declared` (the pack) on the snapshot's objects against `pools.cost` (the program)."""
    from config.stack import parse_stack_config
    from pools.cost import stack_cost
    from synth.runner import stack_config

    for stack in ("dev", "prod"):
        config = parse_stack_config(stack_config(stack))
        program = stack_cost(config.node_pools, config.gpu_operator).worst_case_usd_per_hour
        # Accepted at exactly the program's figure, refused a cent below it.
        for limit in (program, program - Decimal("0.01")):
            found = violations(declared(stack), {"maxWorstCaseUsdPerHour": {stack: float(limit)}}, stack)
            assert (found == []) is (limit == program), (stack, limit, found)


def test_a_pool_without_a_bound_is_a_violation_with_or_without_a_cap() -> None:
    resources = declared("dev")
    pool = next(r for r in resources if r["type"].endswith(":NodePool"))
    pool["inputs"]["spec"]["limits"] = {}
    (message,) = violations(resources, {})
    assert message.startswith("NodePool gpu-inference may launch any number of g5.16xlarge")
    assert "count against none of its spec.limits" in message


@pytest.mark.parametrize("caps", [{"prod": -1}, {"prod": "lots"}, {"prod": True}, [550]])
def test_a_cap_that_is_no_positive_number_stops_the_run(caps: Any) -> None:
    with pytest.raises(ValueError, match="maxWorstCaseUsdPerHour"):
        spend.stack_cap(caps, "org/gpu-eks/prod")


def test_the_engine_gets_the_violation_through_analyze_stack() -> None:
    env = dict(os.environ, PULUMI_STACK="prod", PULUMI_PROJECT="gpu-eks", PULUMI_DRY_RUN="true")
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(POLICY_DIR)],
        cwd=POLICY_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        assert port.isdigit(), port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            configure = analyzer_pb2.ConfigureAnalyzerRequest()
            entry = configure.policyConfig["karpenter-worst-case-spend"]
            entry.enforcementLevel = analyzer_pb2.MANDATORY
            entry.properties.update({"maxWorstCaseUsdPerHour": {"prod": 500}})
            stub.Configure(configure, timeout=10)
            request = analyzer_pb2.AnalyzeStackRequest()
            for r in declared("prod"):
                properties = struct_pb2.Struct()
                properties.update(r["inputs"])
                request.resources.append(
                    analyzer_pb2.AnalyzerResource(
                        type=r["type"], properties=properties, urn=urn("prod", r), name=r["name"],
                    )
                )  # fmt: skip
            diagnostics = stub.AnalyzeStack(request, timeout=30).diagnostics
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert [(d.policyName, d.enforcementLevel) for d in diagnostics] == [
        ("karpenter-worst-case-spend", analyzer_pb2.MANDATORY)
    ]
    assert "$544.26/h" in diagnostics[0].message
