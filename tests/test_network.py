"""Network: subnet plan, AZ spread, NAT layout, discovery tags, bring-your-own VPC."""

import ipaddress

import pytest

from components.network import DISCOVERY_TAG, subnet_plan
from synth.runner import ProgramRun
from tests.conftest import stack_run
from tests.helpers import closure, run

SUBNET = "aws:ec2/subnet:Subnet"


def test_subnet_plan_gives_each_az_a_private_quarter_and_a_small_public_subnet() -> None:
    plan = subnet_plan("10.20.0.0/16", ["us-west-2a", "us-west-2b", "us-west-2c"])
    private = [(p.availability_zone, p.cidr) for p in plan if not p.public]
    public = [(p.availability_zone, p.cidr) for p in plan if p.public]
    assert private == [
        ("us-west-2a", "10.20.0.0/18"),
        ("us-west-2b", "10.20.64.0/18"),
        ("us-west-2c", "10.20.128.0/18"),
    ]
    assert public == [
        ("us-west-2a", "10.20.192.0/22"),
        ("us-west-2b", "10.20.196.0/22"),
        ("us-west-2c", "10.20.200.0/22"),
    ]


@pytest.mark.parametrize("cidr", ["10.0.0.0/16", "172.16.0.0/18", "192.168.16.0/20"])
def test_subnet_plan_never_overlaps_and_stays_inside_the_vpc(cidr: str) -> None:
    networks = [ipaddress.IPv4Network(p.cidr) for p in subnet_plan(cidr, ["a", "b", "c"])]
    vpc = ipaddress.IPv4Network(cidr)
    assert all(n.subnet_of(vpc) for n in networks)
    assert not any(a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1 :])
    assert min(n.prefixlen for n in networks) >= 18
    assert max(n.prefixlen for n in networks) <= 26


def _subnets(run_: ProgramRun, public: bool) -> list[dict[str, object]]:
    kind = "-public-" if public else "-private-"
    return [r.inputs for r in run_.of_type(SUBNET) if kind in r.name]


def test_dev_spreads_subnets_over_three_azs_with_the_tags_eks_and_karpenter_need(dev: ProgramRun) -> None:
    private, public = _subnets(dev, public=False), _subnets(dev, public=True)
    assert sorted(s["availabilityZone"] for s in private) == ["us-west-2a", "us-west-2b", "us-west-2c"]
    assert sorted(s["availabilityZone"] for s in public) == ["us-west-2a", "us-west-2b", "us-west-2c"]
    for subnet in private:
        tags = subnet["tags"]
        assert isinstance(tags, dict)
        assert tags["kubernetes.io/role/internal-elb"] == "1"
        assert tags[DISCOVERY_TAG] == "ml-dev"
        assert subnet["mapPublicIpOnLaunch"] is False
    for subnet in public:
        tags = subnet["tags"]
        assert isinstance(tags, dict)
        assert tags["kubernetes.io/role/elb"] == "1"
        assert DISCOVERY_TAG not in tags  # nodes never land in public subnets


def test_vpc_has_dns_for_eks(dev: ProgramRun) -> None:
    vpc = dev.one("aws:ec2/vpc:Vpc").inputs
    assert vpc["cidrBlock"] == "10.20.0.0/16"
    assert vpc["enableDnsHostnames"] is True
    assert vpc["enableDnsSupport"] is True


def test_dev_has_one_nat_gateway_that_every_private_route_table_uses(dev: ProgramRun) -> None:
    (nat,) = dev.of_type("aws:ec2/natGateway:NatGateway")
    private_tables = [r for r in dev.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]
    assert len(private_tables) == 3
    for table in private_tables:
        assert nat.urn in table.property_dependencies["routes"]


def test_prod_has_a_nat_gateway_per_az_and_each_private_table_uses_its_own(prod: ProgramRun) -> None:
    nats = prod.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == 3
    for table in (r for r in prod.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name):
        az = table.name.rsplit("-private-", 1)[1]
        (nat,) = [n for n in nats if n.name.endswith(az)]
        assert nat.urn in table.dependencies


def test_nat_gateways_sit_in_public_subnets(prod: ProgramRun) -> None:
    public_urns = {r.urn for r in prod.of_type(SUBNET) if "-public-" in r.name}
    for nat in prod.of_type("aws:ec2/natGateway:NatGateway"):
        assert set(nat.property_dependencies["subnetId"]) <= public_urns


EGRESS = (
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/eip:Eip",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_control_plane_starts_once_its_subnets_exist_without_waiting_for_egress(stack: str) -> None:
    """The first `up`'s critical path: the control plane (the longest create) needs its subnets, not the
    NAT gateways and routes, which are built while it comes up."""
    result = stack_run(stack)
    cluster = result.one("eks:index:Cluster")
    waits_for = closure(result, cluster.urn)
    private = {r.urn for r in result.of_type(SUBNET) if "-private-" in r.name}
    assert private <= waits_for
    egress = {r.urn: f"{r.type} {r.name}" for t in EGRESS for r in result.of_type(t)}
    assert egress
    assert sorted(egress[u] for u in waits_for & set(egress)) == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_nodes_and_what_they_run_wait_for_the_private_routes(stack: str) -> None:
    result = stack_run(stack)
    routes = {
        r.urn
        for r in result.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
        if "-private-" in r.name
    }
    nats = {r.urn for r in result.of_type("aws:ec2/natGateway:NatGateway")}
    group = result.one("aws:eks/nodeGroup:NodeGroup")
    assert routes <= set(group.dependencies)
    assert nats <= closure(result, group.urn)
    # Every chart that runs pods pulls images through the NAT (the CRD charts hold only CRDs).
    for release in result.of_type("kubernetes:helm.sh/v3:Release"):
        if release.inputs["chart"].rsplit("/", 1)[-1] not in ("karpenter-crd", "prometheus-operator-crds"):
            assert routes <= closure(result, release.urn), release.name


def test_existing_vpc_is_used_as_is_and_only_gets_the_discovery_tag() -> None:
    private = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    result = run(
        cluster={"name": "ml-byo"},
        network={"existing": {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": private}},
    )
    assert result.of_type("aws:ec2/vpc:Vpc") == []
    assert result.of_type(SUBNET) == []
    assert result.of_type("aws:ec2/natGateway:NatGateway") == []
    tags = [
        r.inputs for r in result.of_type("aws:ec2/tag:Tag") if r.inputs["resourceId"].startswith("subnet-")
    ]
    assert sorted(t["resourceId"] for t in tags) == private
    assert {(t["key"], t["value"]) for t in tags} == {(DISCOVERY_TAG, "ml-byo")}
    cluster = result.one("eks:index:Cluster").inputs
    assert cluster["vpcId"] == "vpc-0123456789abcdef0"
    assert cluster["privateSubnetIds"] == private
    assert result.one("aws:eks/nodeGroup:NodeGroup").inputs["subnetIds"] == private
    assert result.outputs["vpcId"] == "vpc-0123456789abcdef0"
