"""Network: a VPC over 2-3 availability zones with public and private subnets and NAT, or an existing VPC.

Private subnets carry `karpenter.sh/discovery: <cluster>` so EC2NodeClasses select them by tag.
"""

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from config.network import NetworkConfig

DISCOVERY_TAG = "karpenter.sh/discovery"
"""The tag Karpenter's subnet and security group selector terms match on (value: the cluster name)."""


@dataclass(frozen=True)
class SubnetPlan:
    """One subnet to create."""

    availability_zone: str
    cidr: str
    public: bool


def vpc_zones(available: Sequence[str], count: int) -> list[str]:
    """The zones a VPC the stack creates spans: the first `count` of the region's zones in name order."""
    return sorted(available)[:count]


def subnet_plan(vpc_cidr: str, availability_zones: list[str]) -> list[SubnetPlan]:
    """Carve the VPC: each AZ gets a private quarter (pods take one IP each, so these are large); the fourth
    quarter is cut into /(prefix+6) public subnets, which only hold NAT gateways and load balancers."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    quarters = list(vpc.subnets(prefixlen_diff=2))
    public_blocks = list(quarters[3].subnets(new_prefix=vpc.prefixlen + 6))
    plan = [SubnetPlan(az, str(quarters[i]), public=False) for i, az in enumerate(availability_zones)]
    plan += [SubnetPlan(az, str(public_blocks[i]), public=True) for i, az in enumerate(availability_zones)]
    return plan


def subnet_tags(cluster_name: str, public: bool) -> dict[str, str]:
    """Tags that let the AWS Load Balancer Controller and Karpenter find the right subnets."""
    if public:
        return {"kubernetes.io/role/elb": "1"}
    return {"kubernetes.io/role/internal-elb": "1", DISCOVERY_TAG: cluster_name}


class Network(pulumi.ComponentResource):
    """The VPC the cluster runs in."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    """The private subnets, resolved once they route to the internet: for nodes and anything else that
    needs egress (image pulls, AWS APIs)."""
    control_plane_subnet_ids: pulumi.Output[list[str]]
    """The same subnets, resolved as soon as they exist: the control plane's ENIs need no egress, so the
    cluster (the longest create) starts without waiting for NAT gateways and routes."""
    public_subnet_ids: pulumi.Output[list[str]]
    discovery: list[pulumi.Resource]
    """What carries the `karpenter.sh/discovery` tag of the private subnets (the subnets, or the tags added
    to an existing VPC's): Karpenter's controller depends on them, so they outlive it on destroy."""

    def __init__(
        self,
        name: str,
        *,
        config: NetworkConfig,
        cluster_name: str,
        availability_zones: list[str],
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-eks:network:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if config.existing is not None:
            existing = config.existing
            self.vpc_id = pulumi.Output.from_input(existing.vpc_id)
            self.private_subnet_ids = pulumi.Output.from_input(list(existing.private_subnet_ids))
            self.control_plane_subnet_ids = self.private_subnet_ids
            self.public_subnet_ids = pulumi.Output.from_input(list(existing.public_subnet_ids))
            # We do not own these subnets; add only the discovery tag Karpenter cannot work without.
            self.discovery = [
                aws.ec2.Tag(
                    f"{name}-{subnet_id}-discovery",
                    resource_id=subnet_id,
                    key=DISCOVERY_TAG,
                    value=cluster_name,
                    opts=child,
                )
                for subnet_id in existing.private_subnet_ids
            ]
        else:
            self._create_vpc(
                name=name,
                config=config,
                cluster_name=cluster_name,
                availability_zones=availability_zones,
                tags=tags,
                child=child,
            )
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    def _create_vpc(
        self,
        *,
        name: str,
        config: NetworkConfig,
        cluster_name: str,
        availability_zones: list[str],
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> None:
        zones = vpc_zones(availability_zones, config.availability_zones)
        vpc = aws.ec2.Vpc(
            name,
            cidr_block=config.cidr,
            enable_dns_hostnames=True,  # EKS nodes and private endpoints need both.
            enable_dns_support=True,
            tags={**tags, "Name": name},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(name, vpc_id=vpc.id, tags={**tags, "Name": name}, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**tags, "Name": f"{name}-public"},
            opts=child,
        )
        public: dict[str, aws.ec2.Subnet] = {}
        private: dict[str, aws.ec2.Subnet] = {}
        for subnet in subnet_plan(config.cidr, zones):
            kind = "public" if subnet.public else "private"
            resource = aws.ec2.Subnet(
                f"{name}-{kind}-{subnet.availability_zone}",
                vpc_id=vpc.id,
                cidr_block=subnet.cidr,
                availability_zone=subnet.availability_zone,
                map_public_ip_on_launch=False,
                tags={
                    **tags,
                    "Name": f"{name}-{kind}-{subnet.availability_zone}",
                    **subnet_tags(cluster_name, subnet.public),
                },
                opts=child,
            )
            (public if subnet.public else private)[subnet.availability_zone] = resource
        for az, subnet_resource in public.items():
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{az}", subnet_id=subnet_resource.id, route_table_id=public_rt.id, opts=child
            )
        nat_zones = zones if config.nat_gateways == "perAz" else zones[:1]
        nats: dict[str, aws.ec2.NatGateway] = {}
        for az in nat_zones:
            eip = aws.ec2.Eip(
                f"{name}-nat-{az}", domain="vpc", tags={**tags, "Name": f"{name}-nat-{az}"}, opts=child
            )
            nats[az] = aws.ec2.NatGateway(
                f"{name}-{az}",
                allocation_id=eip.id,
                subnet_id=public[az].id,
                tags={**tags, "Name": f"{name}-{az}"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
        private_routes: list[aws.ec2.RouteTableAssociation] = []
        for az, subnet_resource in private.items():
            nat = nats.get(az, nats[nat_zones[0]])
            route_table = aws.ec2.RouteTable(
                f"{name}-private-{az}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags={**tags, "Name": f"{name}-private-{az}"},
                opts=child,
            )
            private_routes.append(
                aws.ec2.RouteTableAssociation(
                    f"{name}-private-{az}",
                    subnet_id=subnet_resource.id,
                    route_table_id=route_table.id,
                    opts=child,
                )
            )
        self.vpc_id = vpc.id
        self.control_plane_subnet_ids = pulumi.Output.all(*[s.id for s in private.values()])
        # For nodes: resolve only once the NAT routes exist, so no node starts in a subnet without egress.
        self.private_subnet_ids = pulumi.Output.all(
            ids=[s.id for s in private.values()], routed=[r.id for r in private_routes]
        ).apply(lambda resolved: list(resolved["ids"]))
        self.discovery = list(private.values())
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public.values()])
