"""Who reaches the Kubernetes API: private-endpoint ingress rules, the refusal of an API nothing could reach,
and prod's bootstrap path exactly as docs/private-production.md writes it."""

import json
import re
import textwrap
from typing import Any

import pytest

from components import yaml_text
from components.cluster import ApiAccessRule, api_access_rules
from config.cluster import EndpointConfig
from config.errors import ConfigError
from synth.runner import ROOT, ProgramRun, run_program, stack_config
from tests.helpers import closure, run, run_failing

RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
PRIVATE_ONLY = {"publicAccess": False, "privateAccess": True}


def test_an_api_nothing_could_reach_is_refused_with_both_ways_out() -> None:
    error, monitor = run_failing(cluster={"name": "ml-test", "endpoint": PRIVATE_ONLY})
    assert isinstance(error, ConfigError)
    [problem] = error.problems
    assert problem.key == "gpu-eks:cluster.endpoint"
    message = str(problem)
    assert "publicAccess is false and neither privateAccessCidrs nor privateAccessSecurityGroupIds" in message
    assert (
        "publicAccessCidrs restricted to the deploying runner's egress CIDRs while bootstrapping" in message
    )
    assert "network.existing, a peering or a transit gateway) and list it in privateAccessCidrs" in message
    assert monitor.registrations == []


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        (
            {"privateAccess": False, "privateAccessCidrs": ["10.100.0.0/16"]},
            "gpu-eks:cluster.endpoint: privateAccessCidrs or privateAccessSecurityGroupIds is set but "
            "privateAccess is false",
        ),
        (
            {**PRIVATE_ONLY, "privateAccessCidrs": ["10.100.0.0/16", "10.100.0.0/16"]},
            "gpu-eks:cluster.endpoint: privateAccessCidrs lists 10.100.0.0/16 more than once",
        ),
        (
            {**PRIVATE_ONLY, "privateAccessSecurityGroupIds": ["sg-12"]},
            "gpu-eks:cluster.endpoint.privateAccessSecurityGroupIds[0] = 'sg-12': must be a security group",
        ),
        (
            {**PRIVATE_ONLY, "privateAccessCidrs": ["10.100.0.1/16"]},
            "gpu-eks:cluster.endpoint.privateAccessCidrs[0] = '10.100.0.1/16': must be a CIDR block",
        ),
        (
            {**PRIVATE_ONLY, "privateAccessCidrs": ["10.100.0.0/16", "2001:db8:1::/48"]},
            "gpu-eks:cluster.endpoint.privateAccessCidrs[1] = '2001:db8:1::/48': must be an IPv4 CIDR block "
            "such as 10.20.0.0/16: the cluster is IPv4",
        ),
        (
            {"privateAccess": False, "publicAccessCidrs": ["198.51.100.7/32", "192.0.2.0/28"]},
            "gpu-eks:cluster.endpoint.privateAccess = false: is false while publicAccessCidrs admits only "
            "198.51.100.7/32, 192.0.2.0/28: the nodes would reach the API through the public endpoint from "
            "the NAT gateways' addresses, which this stack creates and the list cannot hold, so no node "
            "would join. Set privateAccess: true",
        ),
    ],
)
def test_endpoint_mistakes_are_refused(endpoint: dict[str, Any], expected: str) -> None:
    error, monitor = run_failing(cluster={"name": "ml-test", "endpoint": endpoint})
    assert isinstance(error, ConfigError)
    assert str(error.problems[0]).startswith(expected), str(error.problems[0])
    assert monitor.registrations == []


def test_nodes_on_the_public_endpoint_need_it_open_or_the_existing_vpcs_nat_addresses_listed() -> None:
    """Without a private endpoint, nodes reach the API from their NAT addresses: fine when the public endpoint
    is open to all; in an existing VPC the list may hold its NAT addresses, which the program cannot see, so
    it warns instead of refusing."""
    open_to_all = run(cluster={"name": "ml-test", "endpoint": {"privateAccess": False}})
    assert open_to_all.one("eks:index:Cluster").inputs["endpointPrivateAccess"] is False
    assert open_to_all.warnings == []
    existing = {
        "vpcId": "vpc-0123456789abcdef0",
        "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    }
    restricted = {"privateAccess": False, "publicAccessCidrs": ["34.210.0.0/28"]}
    result = run(cluster={"name": "ml-test", "endpoint": restricted}, network={"existing": existing})
    assert result.one("eks:index:Cluster").inputs["publicAccessCidrs"] == ["34.210.0.0/28"]
    assert result.warnings == [
        "gpu-eks:cluster.endpoint.privateAccess = false: nodes reach the API through the public endpoint "
        "from the existing VPC's NAT addresses, so publicAccessCidrs must hold them, or no node joins; "
        "privateAccess: true keeps that traffic inside the VPC"
    ]


def test_each_source_is_one_rule_named_after_it() -> None:
    endpoint = EndpointConfig.model_validate(
        {
            **PRIVATE_ONLY,
            "privateAccessCidrs": ["10.100.0.0/16", "172.16.8.0/22"],
            "privateAccessSecurityGroupIds": ["sg-0123456789abcdef0"],
        }
    )
    assert api_access_rules(endpoint) == [
        ApiAccessRule(
            "api-from-10.100.0.0-16",
            "Kubernetes API from 10.100.0.0/16 (cluster.endpoint.privateAccessCidrs)",
            cidr_ipv4="10.100.0.0/16",
        ),
        ApiAccessRule(
            "api-from-172.16.8.0-22",
            "Kubernetes API from 172.16.8.0/22 (cluster.endpoint.privateAccessCidrs)",
            cidr_ipv4="172.16.8.0/22",
        ),
        ApiAccessRule(
            "api-from-sg-0123456789abcdef0",
            "Kubernetes API from sg-0123456789abcdef0 (cluster.endpoint.privateAccessSecurityGroupIds)",
            referenced_security_group_id="sg-0123456789abcdef0",
        ),
    ]


def test_adding_a_source_leaves_the_other_rules_as_they_are() -> None:
    one = api_access_rules(
        EndpointConfig.model_validate({**PRIVATE_ONLY, "privateAccessCidrs": ["10.1.0.0/16"]})
    )
    two = api_access_rules(
        EndpointConfig.model_validate({**PRIVATE_ONLY, "privateAccessCidrs": ["10.0.0.0/16", "10.1.0.0/16"]})
    )
    assert set(one) < set(two)


def test_rules_open_tcp_443_on_the_cluster_security_group_and_come_before_any_kubernetes_write() -> None:
    result = run(
        cluster={
            "name": "ml-private",
            "endpoint": {
                **PRIVATE_ONLY,
                "privateAccessCidrs": ["10.100.0.0/16"],
                "privateAccessSecurityGroupIds": ["sg-0123456789abcdef0"],
            },
        }
    )
    cluster = result.one("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in cluster.inputs
    rules = {r.name: r for r in result.of_type(RULE)}
    assert set(rules) == {"cluster-api-from-10.100.0.0-16", "cluster-api-from-sg-0123456789abcdef0"}
    for rule in rules.values():
        assert rule.inputs["securityGroupId"] == cluster.outputs["clusterSecurityGroupId"]
        assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == (
            "tcp",
            443,
            443,
        )
    assert rules["cluster-api-from-10.100.0.0-16"].inputs["cidrIpv4"] == "10.100.0.0/16"
    assert rules["cluster-api-from-sg-0123456789abcdef0"].inputs["referencedSecurityGroupId"] == (
        "sg-0123456789abcdef0"
    )
    # Every Kubernetes resource goes through the provider, which waits for (and on destroy outlives) them.
    provider = result.one("pulumi:providers:kubernetes")
    assert {r.urn for r in rules.values()} <= set(provider.dependencies)
    release = result.one("kubernetes:helm.sh/v3:Release", "karpenter-controller")
    assert {r.urn for r in rules.values()} <= closure(result, release.urn)


def test_no_rule_without_private_sources(dev: ProgramRun) -> None:
    assert dev.of_type(RULE) == []


# --- prod's bootstrap path, as docs/private-production.md writes it ----------------------------


def readme_endpoint(step: str) -> dict[str, Any]:
    """The `gpu-eks:cluster.endpoint` of the YAML block marked `<!-- prod-endpoint: <step> -->` in
    docs/private-production.md."""
    readme = (ROOT / "docs" / "private-production.md").read_text()
    match = re.search(rf"<!-- prod-endpoint: {step} -->\s*```yaml\n(.*?)```", readme, re.DOTALL)
    assert match, f"docs/private-production.md has no block marked prod-endpoint: {step}"
    block = textwrap.dedent(match.group(1))
    endpoint: dict[str, Any] = yaml_text.load(block)["gpu-eks:cluster"]["endpoint"]
    return endpoint


def prod_with_endpoint(endpoint: dict[str, Any]) -> ProgramRun:
    values = stack_config("prod")
    cluster = json.loads(values["gpu-eks:cluster"])
    values["gpu-eks:cluster"] = json.dumps({**cluster, "endpoint": endpoint})
    return run_program(values, stack="prod")


def test_the_committed_prod_endpoint_is_the_readmes_first_step() -> None:
    committed = yaml_text.load((ROOT / "Pulumi.prod.yaml").read_text())["config"]["gpu-eks:cluster"]
    assert committed["endpoint"] == readme_endpoint("bootstrap")


def test_prod_goes_private_through_the_readmes_steps() -> None:
    runner_in = prod_with_endpoint(readme_endpoint("runner-inside"))
    cluster = runner_in.one("eks:index:Cluster").inputs
    assert cluster["endpointPublicAccess"] is True  # still reachable the old way while the runner moves
    assert runner_in.of_type(RULE)

    private = prod_with_endpoint(readme_endpoint("private-only"))
    cluster = private.one("eks:index:Cluster").inputs
    assert cluster["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in cluster
    # The switch changes the endpoint only: the rule that lets the runner in is the one already there.
    assert [r.inputs for r in private.of_type(RULE)] == [r.inputs for r in runner_in.of_type(RULE)]
