"""Tearing prod down, as docs/private-production.md writes it, tested as a plan: the program runs with each
step's configuration (the YAML blocks marked `<!-- prod-teardown: <step> -->`), and each transition is
judged by what `pulumi up` (or `pulumi destroy`) would do.

From private-only prod: (1) an `up` from the in-VPC runner that lifts the protection and re-opens the public
endpoint to the outside runner's address, changing nothing else; (2) PROD_RUNS_ON moves outside (no stack
change); (3) `pulumi destroy` from outside, which the protection no longer blocks and which reaches the API
through the re-opened endpoint until the last Kubernetes object is gone."""

import json
import re
import textwrap
from typing import Any

from components import yaml_text
from synth.plan import Plan, State, plan, state_of_run
from synth.runner import ROOT, ProgramRun, run_program, stack_config
from tests.helpers import closure
from tests.test_api_access import readme_endpoint

DOC = ROOT / "docs" / "private-production.md"
CLUSTER = "eks:index:Cluster"


def teardown_block(step: str) -> dict[str, Any]:
    """The `gpu-eks:cluster` settings of the block marked `<!-- prod-teardown: <step> -->`."""
    match = re.search(rf"<!-- prod-teardown: {step} -->\s*```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert match, f"docs/private-production.md has no block marked prod-teardown: {step}"
    cluster: dict[str, Any] = yaml_text.load(textwrap.dedent(match.group(1)))["gpu-eks:cluster"]
    return cluster


def prod_with(cluster_settings: dict[str, Any]) -> ProgramRun:
    values = stack_config("prod")
    cluster = {**json.loads(values["gpu-eks:cluster"]), **cluster_settings}
    return run_program({**values, "gpu-eks:cluster": json.dumps(cluster)}, stack="prod")


def private_prod() -> ProgramRun:
    """Where the bootstrap ends (docs/private-production.md, step 3)."""
    return prod_with({"endpoint": readme_endpoint("private-only")})


def destroy(state: State) -> Plan:
    return plan(state, State({}, "nothing (pulumi destroy)"))


def test_step_1_lifts_the_protection_and_reopens_the_endpoint_changing_nothing_else() -> None:
    reopen = teardown_block("reopen")
    assert reopen["protect"] is False
    before, after = private_prod(), prod_with(reopen)
    result = plan(state_of_run(before, "private"), state_of_run(after, "reopened"))
    assert [(s.op, s.type, s.name) for s in result.steps] == [("update", CLUSTER, "cluster")]
    assert set(result.steps[0].because) == {
        "deletionProtection",
        "endpointPublicAccess",
        "publicAccessCidrs[0]",
    }
    assert not result.blocking
    cluster = after.one(CLUSTER).inputs
    assert cluster["endpointPublicAccess"] is True
    assert cluster["publicAccessCidrs"] == reopen["endpoint"]["publicAccessCidrs"]
    assert cluster["endpointPrivateAccess"] is True
    # It runs on the in-VPC runner: the rule that lets that runner in is still declared.
    rule = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
    assert [r.inputs for r in after.of_type(rule)] == [r.inputs for r in before.of_type(rule)]
    assert [r.name for r in after.resources if r.protect] == []


def test_without_step_1_the_destroy_is_refused() -> None:
    result = destroy(state_of_run(private_prod(), "private"))
    blocked = sorted(f.message.split(": the resource is protected")[0] for f in result.findings if f.blocking)
    assert blocked == [
        "delete aws:amp/workspace:Workspace observability",
        "delete aws:cloudwatch/logGroup:LogGroup cluster-control-plane-logs",
        f"delete {CLUSTER} cluster",
    ]


def test_step_3_destroys_everything_from_outside() -> None:
    reopened = prod_with(teardown_block("reopen"))
    result = destroy(state_of_run(reopened, "reopened"))
    assert not result.blocking, [f.message for f in result.findings if f.blocking]
    assert result.count("delete") == len(state_of_run(reopened, "reopened").resources)
    assert {s.op for s in result.steps} == {"delete"}
    # From outside, the API is reached through the public endpoint, which goes with the cluster, after every
    # Kubernetes object (each depends on the cluster through its provider).
    cluster = reopened.one(CLUSTER)
    objects = [r for r in reopened.resources if r.type.startswith("kubernetes:")]
    assert objects
    assert all(cluster.urn in closure(reopened, r.urn) for r in objects)


def test_the_outside_runner_is_not_a_placeholder_once_filled_in() -> None:
    """The documented address is a documentation address to replace, like the bootstrap's: a preview warns,
    an `up` refuses it (tests/test_placeholders.py)."""
    reopened = prod_with(teardown_block("reopen"))
    assert any(
        w.startswith("gpu-eks:cluster.endpoint.publicAccessCidrs[0] = '198.51.100.7/32'")
        for w in reopened.warnings
    )
