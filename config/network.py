"""The `gpu-eks:network` section: a new VPC, or an existing one."""

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from config.types import Flag, VpcCidr, WholeNumber, repeated
from facts.vpc_endpoints import InterfaceService


def _ids(prefix: str, values: tuple[str, ...]) -> tuple[str, ...]:

    bad = [v for v in values if not re.fullmatch(rf"{prefix}-[0-9a-f]{{8,17}}", v)]
    if bad:
        raise ValueError(f"{', '.join(bad)} is not an id of the form {prefix}-0123456789abcdef0")
    if len(set(values)) != len(values):
        raise ValueError("lists a subnet more than once")
    return values


class ExistingVpc(ConfigModel):
    """A VPC someone else manages. Its private subnets must route to the internet (NAT) or have the VPC
    endpoints EKS nodes need; gpu-eks adds the `karpenter.sh/discovery` tag to them."""

    vpc_id: str
    """The VPC id (vpc-...)."""
    private_subnet_ids: tuple[str, ...] = Field(min_length=2)
    """Private subnets in at least two availability zones; nodes and the control plane ENIs go here."""
    public_subnet_ids: tuple[str, ...] = ()
    """Public subnets for internet-facing load balancers (optional)."""

    @field_validator("vpc_id")
    @classmethod
    def _vpc_id(cls, value: str) -> str:
        return _ids("vpc", (value,))[0]

    @field_validator("private_subnet_ids", "public_subnet_ids")
    @classmethod
    def _subnet_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _ids("subnet", value)


class VpcEndpointsConfig(ConfigModel):
    """AWS APIs reached from the private subnets without the NAT gateways (VPC endpoints)."""

    s3_gateway: Flag = True
    """An S3 gateway endpoint on the private route tables. Free: ECR keeps image layers in S3, so with it
    layer downloads (GPU images run to gigabytes) skip the NAT gateways' per-GB charge."""
    interface: tuple[InterfaceService, ...] = ()
    """Interface endpoints, each with an ENI in every private subnet, private DNS on, and a security group
    admitting HTTPS from the VPC: nodes, controllers and an in-VPC runner then reach these APIs when the NAT
    gateways cannot. Each costs per AZ-hour and per GB (docs/private-production.md, "VPC endpoints and what
    they cost")."""

    @field_validator("interface")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if twice := repeated(value):
            raise ValueError(f"lists {', '.join(twice)} more than once; one endpoint per service")
        return value


class NetworkConfig(ConfigModel):
    """Where the cluster lives."""

    cidr: VpcCidr = "10.0.0.0/16"
    """CIDR of the new VPC (/16 to /20); a quarter per AZ goes to private subnets."""
    availability_zones: WholeNumber = Field(default=3, ge=2, le=3)
    """How many availability zones to spread over (EKS needs at least 2)."""
    nat_gateways: Literal["single", "perAz"] = "single"
    """`single`: one NAT gateway (cheap; its AZ is a single point of failure for egress).
    `perAz`: one per AZ (resilient; for production)."""
    endpoints: VpcEndpointsConfig = VpcEndpointsConfig()
    """VPC endpoints of the new VPC: the S3 gateway endpoint (on by default, free) and optional interface
    endpoints. An existing VPC's endpoints are its owners' to manage."""
    existing: ExistingVpc | None = None
    """Use this VPC instead of creating one (then leave `cidr`, `availabilityZones`, `natGateways` and
    `endpoints` unset)."""

    @model_validator(mode="after")
    def _existing_excludes_new(self) -> Self:
        if self.existing is not None:
            clashing = sorted(
                {"cidr", "availability_zones", "nat_gateways", "endpoints"} & self.model_fields_set
            )
            if clashing:
                keys = ", ".join(type(self).model_fields[k].alias or k for k in clashing)
                raise ValueError(
                    f"{keys} describe a new VPC but `existing` names one to use; remove one or the other"
                )
        return self
