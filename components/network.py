"""Network: a VPC over 2-3 availability zones with public and private subnets and NAT, or an existing VPC.

Private subnets carry `karpenter.sh/discovery: <cluster>` so EC2NodeClasses select them by tag. A new VPC
gets an S3 gateway endpoint on its private route tables (free) and, if configured, interface endpoints for
the AWS APIs the cluster and an in-VPC deployer call.
"""

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from config.network import NetworkConfig, VpcEndpointsConfig
from facts.vpc_endpoints import S3_GATEWAY_SERVICE

HTTPS = 443

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
    private_egress: list[pulumi.CustomResource]
    """What anything in the private subnets reaches AWS and the internet through: the private route tables'
    associations (the NAT routes) and the VPC endpoints with their security group rule. Nodes wait for it,
    and the Kubernetes provider depends on it, so on `pulumi destroy` every node and Kubernetes object goes
    first: a deployer inside the VPC keeps its way to AWS and Pulumi Cloud while it removes them. Empty for
    an existing VPC (its owners keep its egress)."""

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
        """`availability_zones`: the zones a VPC the stack creates spans (`vpc_zones` of the region's)."""
        super().__init__("gpu-eks:network:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if config.existing is not None:
            existing = config.existing
            self.vpc_id = pulumi.Output.from_input(existing.vpc_id)
            self.private_subnet_ids = pulumi.Output.from_input(list(existing.private_subnet_ids))
            self.control_plane_subnet_ids = self.private_subnet_ids
            self.public_subnet_ids = pulumi.Output.from_input(list(existing.public_subnet_ids))
            self.private_egress = []
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
                zones=availability_zones,
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
        zones: list[str],
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> None:
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
        private_tables: list[aws.ec2.RouteTable] = []
        for az, subnet_resource in private.items():
            nat = nats.get(az, nats[nat_zones[0]])
            route_table = aws.ec2.RouteTable(
                f"{name}-private-{az}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags={**tags, "Name": f"{name}-private-{az}"},
                opts=child,
            )
            private_tables.append(route_table)
            private_routes.append(
                aws.ec2.RouteTableAssociation(
                    f"{name}-private-{az}",
                    subnet_id=subnet_resource.id,
                    route_table_id=route_table.id,
                    opts=child,
                )
            )
        endpoints = self._endpoints(
            name=name,
            config=config.endpoints,
            vpc=vpc,
            vpc_cidr=config.cidr,
            private=private,
            private_tables=private_tables,
            tags=tags,
        )
        self.private_egress = [*private_routes, *endpoints]
        self.vpc_id = vpc.id
        self.control_plane_subnet_ids = pulumi.Output.all(*[s.id for s in private.values()])
        # For nodes: resolve only once the NAT routes and the endpoints exist, so no node starts in a subnet
        # without egress, and on destroy the nodes go before them.
        self.private_subnet_ids = pulumi.Output.all(
            ids=[s.id for s in private.values()], egress=[r.id for r in self.private_egress]
        ).apply(lambda resolved: list(resolved["ids"]))
        self.discovery = list(private.values())
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public.values()])

    def _endpoints(
        self,
        *,
        name: str,
        config: VpcEndpointsConfig,
        vpc: aws.ec2.Vpc,
        vpc_cidr: str,
        private: dict[str, aws.ec2.Subnet],
        private_tables: list[aws.ec2.RouteTable],
        tags: dict[str, str],
    ) -> list[pulumi.CustomResource]:
        """The S3 gateway endpoint on the private route tables and the interface endpoints, with the security
        group that admits HTTPS to them from the VPC (nodes, pods, an in-VPC runner)."""
        child = pulumi.ResourceOptions(parent=self)
        created: list[pulumi.CustomResource] = []
        if config.s3_gateway:
            created.append(
                self._endpoint(
                    f"{name}-s3",
                    S3_GATEWAY_SERVICE,
                    "Gateway",
                    vpc=vpc,
                    tags=tags,
                    opts=child,
                    # It adds a prefix-list route to each table; the tables' inline routes leave it alone
                    # (terraform-provider-aws skips `vpce-` prefix-list routes when it reads a route table).
                    placement=lambda _: {"route_table_ids": [t.id for t in private_tables]},
                )
            )
        if not config.interface:
            return created
        group = aws.ec2.SecurityGroup(
            f"{name}-endpoints",
            vpc_id=vpc.id,
            description="gpu-eks interface VPC endpoints: HTTPS from the VPC",
            tags={**tags, "Name": f"{name}-endpoints"},
            opts=child,
        )
        https = aws.vpc.SecurityGroupIngressRule(
            f"{name}-endpoints-https",
            security_group_id=group.id,
            cidr_ipv4=vpc_cidr,
            ip_protocol="tcp",
            from_port=HTTPS,
            to_port=HTTPS,
            description="HTTPS from the VPC to the interface endpoints",
            tags=tags,
            opts=child,
        )
        created.append(https)
        subnets = {az: s.id for az, s in private.items()}

        def interface(offered: pulumi.Output[aws.ec2.GetVpcEndpointServiceResult]) -> dict[str, Any]:
            # An ENI in each private subnet whose zone the service is offered in (a few services skip a zone);
            # the service's public name resolves to the endpoint inside the VPC: no client changes.
            return {
                "subnet_ids": pulumi.Output.all(zones=offered.availability_zones, subnets=subnets).apply(
                    lambda r: [subnet for az, subnet in r["subnets"].items() if az in r["zones"]]
                ),
                "security_group_ids": [group.id],
                "private_dns_enabled": True,
            }

        created += [
            self._endpoint(
                f"{name}-{service.replace('.', '-')}",
                service,
                "Interface",
                vpc=vpc,
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[https]),
                placement=interface,
            )
            for service in config.interface
        ]
        return created

    @staticmethod
    def _endpoint(
        name: str,
        service: str,
        kind: str,
        *,
        vpc: aws.ec2.Vpc,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions,
        placement: Callable[[pulumi.Output[aws.ec2.GetVpcEndpointServiceResult]], dict[str, Any]],
    ) -> aws.ec2.VpcEndpoint:
        """An endpoint of `service` (`kind` Gateway or Interface) with the arguments `placement` derives from
        the offered service. The service name is asked of EC2 as the region spells it; an unknown or
        unoffered one fails the preview."""
        offered = aws.ec2.get_vpc_endpoint_service_output(service=service, service_type=kind)
        return aws.ec2.VpcEndpoint(
            name,
            vpc_id=vpc.id,
            service_name=offered.service_name,
            vpc_endpoint_type=kind,
            tags={**tags, "Name": name},
            opts=opts,
            **placement(offered),
        )
