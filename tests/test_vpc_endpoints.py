"""VPC endpoints: the S3 gateway endpoint every new VPC gets, prod's interface endpoints, their security
group, what they cost, and where they sit in the declared graph (created before the nodes, deleted after
every node and Kubernetes object, never in the control plane's way)."""

import json
from typing import Any

import pulumi
import pytest

from config.errors import ConfigError
from facts.pricing import HOURS_PER_MONTH
from facts.vpc_endpoints import (
    INTERFACE_ENDPOINT_USD_PER_AZ_HOUR,
    INTERFACE_ENDPOINT_USD_PER_GB,
    INTERFACE_SERVICES,
    NAT_GATEWAY_USD_PER_GB,
    interface_endpoints_usd_per_hour,
)
from synth.mocks import AwsMocks
from synth.runner import ROOT, ProgramRun, RecordingMonitor, run_program, stack_config
from tests.conftest import stack_run
from tests.helpers import closure, config, run

ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
SUBNET = "aws:ec2/subnet:Subnet"
GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def endpoints(result: ProgramRun, kind: str) -> dict[str, dict[str, Any]]:
    """Service (last part of its service name) -> inputs, of the endpoints of one type."""
    return {
        r.inputs["serviceName"].removeprefix("com.amazonaws.us-west-2."): r.inputs
        for r in result.of_type(ENDPOINT)
        if r.inputs["vpcEndpointType"] == kind
    }


def private_ids(result: ProgramRun, type_token: str) -> list[str]:
    return sorted(r.id for r in result.of_type(type_token) if "-private-" in r.name)


def network_egress(result: ProgramRun) -> dict[str, str]:
    """URN -> description of the NAT routes of the private subnets and everything endpoint-related."""
    return {
        r.urn: f"{r.type} {r.name}"
        for r in result.resources
        if (r.type == "aws:ec2/routeTableAssociation:RouteTableAssociation" and "-private-" in r.name)
        or r.type in (ENDPOINT, GROUP)
        or (r.type == INGRESS and r.name.startswith("network-"))
    }


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_new_vpc_has_an_s3_gateway_endpoint_on_its_private_route_tables(stack: str) -> None:
    result = stack_run(stack)
    [(service, s3)] = endpoints(result, "Gateway").items()
    assert service == "s3"
    assert sorted(s3["routeTableIds"]) == private_ids(result, ROUTE_TABLE)
    assert len(s3["routeTableIds"]) == 3
    assert s3["vpcId"] == result.one("aws:ec2/vpc:Vpc").id
    assert "subnetIds" not in s3  # a gateway: routes, no ENIs
    assert "securityGroupIds" not in s3


def test_dev_has_no_interface_endpoint_and_no_endpoint_security_group(dev: ProgramRun) -> None:
    assert endpoints(dev, "Interface") == {}
    assert dev.of_type(GROUP) == []


def test_prod_reaches_the_apis_of_its_runner_and_controllers_through_interface_endpoints(
    prod: ProgramRun,
) -> None:
    interface = endpoints(prod, "Interface")
    assert set(interface) == {"sts", "eks-auth", "eks", "ec2", "sqs", "ssm", "ecr.api", "ecr.dkr"}
    [group] = prod.of_type(GROUP)
    vpc = prod.one("aws:ec2/vpc:Vpc")
    assert group.inputs["vpcId"] == vpc.id
    for service, inputs in interface.items():
        assert sorted(inputs["subnetIds"]) == private_ids(prod, SUBNET), service  # an ENI in every AZ
        assert inputs["securityGroupIds"] == [group.id], service
        assert inputs["privateDnsEnabled"] is True, service  # clients keep the public service names
    # HTTPS from the VPC (nodes, pods, the in-VPC runner), nothing else.
    [rule] = [r.inputs for r in prod.of_type(INGRESS) if r.inputs["securityGroupId"] == group.id]
    assert rule == {
        "securityGroupId": group.id,
        "cidrIpv4": vpc.inputs["cidrBlock"],
        "ipProtocol": "tcp",
        "fromPort": 443,
        "toPort": 443,
        "description": "HTTPS from the VPC to the interface endpoints",
        "tags": rule["tags"],
    }


class _StsMissingFromOneZone(AwsMocks):
    """A region where the STS endpoint service is not offered in us-west-2c (DescribeVpcEndpointServices
    lists, per service, the zones it is offered in; some services miss a zone, such as use1-az3)."""

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        result, failures = super().call(args)
        if args.token.endswith("getVpcEndpointService") and args.args.get("service") == "sts":
            result = {
                **result,
                "availabilityZones": [z for z in result["availabilityZones"] if z != "us-west-2c"],
            }
        return result, failures


def test_interface_endpoints_skip_zones_their_service_is_not_offered_in() -> None:
    monitor = RecordingMonitor(_StsMissingFromOneZone("us-west-2"))
    result = run_program(
        config(cluster={"name": "ml-test"}, network={"endpoints": {"interface": ["sts", "ec2"]}}),
        monitor=monitor,
    )
    subnets = {r.id: r.inputs["availabilityZone"] for r in result.of_type(SUBNET) if "-private-" in r.name}
    interface = endpoints(result, "Interface")
    assert sorted(subnets[s] for s in interface["ec2"]["subnetIds"]) == [
        "us-west-2a",
        "us-west-2b",
        "us-west-2c",
    ]
    assert sorted(subnets[s] for s in interface["sts"]["subnetIds"]) == ["us-west-2a", "us-west-2b"]


def test_the_s3_gateway_endpoint_can_be_left_out() -> None:
    result = run(cluster={"name": "ml-test"}, network={"endpoints": {"s3Gateway": False}})
    assert result.of_type(ENDPOINT) == []


@pytest.mark.parametrize(
    ("network", "key", "expected"),
    [
        (
            {"endpoints": {"interface": ["sts", "s3"]}},
            "gpu-eks:network.endpoints.interface[1]",
            "'ec2', 'ecr.api', 'ecr.dkr', 'eks', 'eks-auth', 'sqs', 'ssm', 'sts' or 'aps-workspaces'",
        ),
        (
            {"endpoints": {"interface": ["sts", "ec2", "sts"]}},
            "gpu-eks:network.endpoints.interface",
            "lists sts more than once",
        ),
        (
            {
                "existing": {
                    "vpcId": "vpc-0123456789abcdef0",
                    "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                },
                "endpoints": {"interface": ["sts"]},
            },
            "gpu-eks:network",
            "endpoints describe a new VPC but `existing` names one to use",
        ),
        ({"endpoints": {"s3Gateway": "yes"}}, "gpu-eks:network.endpoints.s3Gateway", "true or false"),
    ],
)
def test_endpoint_mistakes_are_refused_naming_the_key(
    network: dict[str, Any], key: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        run(cluster={"name": "ml-test"}, network=network)
    [problem] = refused.value.problems
    assert problem.key == key
    assert expected in str(problem)


def test_every_offered_service_is_an_accepted_config_value() -> None:
    """The facts' table and the config's accepted values are the same list."""
    result = run(cluster={"name": "ml-test"}, network={"endpoints": {"interface": list(INTERFACE_SERVICES)}})
    assert set(endpoints(result, "Interface")) == set(INTERFACE_SERVICES)


# --- the declared graph -------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_control_plane_does_not_wait_for_the_endpoints(stack: str) -> None:
    result = stack_run(stack)
    cluster = result.one("eks:index:Cluster")
    waiting = [desc for urn, desc in network_egress(result).items() if urn in closure(result, cluster.urn)]
    assert waiting == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_nodes_and_every_kubernetes_object_outlive_none_of_the_egress(stack: str) -> None:
    """On `pulumi destroy`, every node group and Kubernetes object is deleted before the NAT routes and the
    endpoints: a deployer inside the VPC keeps its way to AWS and Pulumi Cloud, and every controller its way
    to AWS, while they go."""
    result = stack_run(stack)
    egress = network_egress(result)
    assert len([d for d in egress.values() if ENDPOINT in d]) == (1 if stack == "dev" else 9)
    dependents = [*result.of_type("aws:eks/nodeGroup:NodeGroup")] + [
        r for r in result.resources if r.type.startswith("kubernetes:")
    ]
    assert len(dependents) > 20
    for resource in dependents:
        deps = closure(result, resource.urn)
        missing = sorted(desc for urn, desc in egress.items() if urn not in deps)
        assert not missing, f"{resource.type} {resource.name} could outlive: {missing}"


def test_nothing_the_nodes_run_is_needed_by_the_endpoints(prod: ProgramRun) -> None:
    """The endpoints depend only on the network: no cycle, and no node or Kubernetes object can hold them."""
    for urn in network_egress(prod):
        types = {prod.by_urn(u).type for u in closure(prod, urn)}
        assert types <= {
            "aws:ec2/vpc:Vpc",
            SUBNET,
            ROUTE_TABLE,
            GROUP,
            INGRESS,
            "aws:ec2/internetGateway:InternetGateway",
            "aws:ec2/natGateway:NatGateway",
            "aws:ec2/eip:Eip",
            "aws:ec2/routeTableAssociation:RouteTableAssociation",
            "pulumi:providers:aws",
        }, prod.by_urn(urn).name


# --- what they cost -----------------------------------------------------------------------------


def test_prods_interface_endpoints_cost_what_its_stack_file_says(prod: ProgramRun) -> None:
    """Recomputed from what is declared (each endpoint's ENIs), not from the config."""
    eni_hours = sum(len(e["subnetIds"]) for e in endpoints(prod, "Interface").values())
    assert eni_hours == 24
    per_hour = eni_hours * INTERFACE_ENDPOINT_USD_PER_AZ_HOUR
    network = json.loads(stack_config("prod")["gpu-eks:network"])
    assert per_hour == pytest.approx(
        interface_endpoints_usd_per_hour(len(network["endpoints"]["interface"]), 3)
    )
    text = (ROOT / "Pulumi.prod.yaml").read_text()
    assert f"${per_hour:.2f}/h, ${per_hour * HOURS_PER_MONTH:,.2f} a month" in text


def test_the_private_production_page_states_prods_endpoint_cost(prod: ProgramRun) -> None:
    per_hour = sum(len(e["subnetIds"]) for e in endpoints(prod, "Interface").values()) * 0.01
    page = (ROOT / "docs" / "private-production.md").read_text()
    section = page.split("<!-- endpoint-cost: prod -->", 1)[1].split("\n\n", 1)[0]
    assert f"{len(endpoints(prod, 'Interface'))} endpoints in 3 AZs" in section
    assert f"**${per_hour:.2f} an hour, ${per_hour * HOURS_PER_MONTH:,.2f} a\nmonth**" in section
    assert INTERFACE_ENDPOINT_USD_PER_AZ_HOUR == 0.01  # the price the page quotes
    # And the per-GB prices it quotes, of the endpoints and of the NAT gateways they spare.
    assert f"plus ${INTERFACE_ENDPOINT_USD_PER_GB:.2f} per GB they process" in page
    assert f"which charge ${NAT_GATEWAY_USD_PER_GB:.3f} per GB processed" in page
