"""The `gpu-eks:cluster` section: the EKS control plane, its system node group and who administers it."""

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from config.types import AwsTags, IamRoleArn, InstanceType, PublicCidr

SUPPORTED_KUBERNETES_VERSIONS = ("1.33", "1.34", "1.35", "1.36")
"""Kubernetes minors that Karpenter 1.14 (1.30-1.36), the GPU Operator v26.7 (1.33-1.36) and the EKS
AL2023 NVIDIA AMIs (1.30-1.36) all support."""

DEFAULT_KUBERNETES_VERSION = "1.35"

LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
CONTROL_PLANE_LOG_TYPES: tuple[LogType, ...] = (
    "api",
    "audit",
    "authenticator",
    "controllerManager",
    "scheduler",
)

SystemAmiType = Literal[
    "AL2023_x86_64_STANDARD", "AL2023_ARM_64_STANDARD", "BOTTLEROCKET_x86_64", "BOTTLEROCKET_ARM_64"
]


def _is_arm_instance_type(instance_type: str) -> bool:
    """Graviton families carry a `g` after the generation digit (m7g, c8gd, r7gn); a1 is ARM too."""
    family = instance_type.split(".", 1)[0]
    if family == "a1":
        return True
    digits = [i for i, ch in enumerate(family) if ch.isdigit()]
    return bool(digits) and "g" in family[digits[0] + 1 :]


class EndpointConfig(ConfigModel):
    """Who can reach the Kubernetes API endpoint."""

    public_access: bool = True
    """Reachable from the internet (restricted by `publicAccessCidrs`)."""
    private_access: bool = True
    """Reachable from inside the VPC; nodes then talk to the API without leaving it."""
    public_access_cidrs: tuple[PublicCidr, ...] = ("0.0.0.0/0",)
    """Allow list for the public endpoint."""

    @model_validator(mode="after")
    def _reachable(self) -> Self:
        if not (self.public_access or self.private_access):
            raise ValueError(
                "publicAccess and privateAccess are both false: nothing could reach the API server; "
                "set at least one to true"
            )
        if not self.public_access and "public_access_cidrs" in self.model_fields_set:
            raise ValueError("publicAccessCidrs is set but publicAccess is false; remove one of them")
        return self


class SystemNodesConfig(ConfigModel):
    """The on-demand managed node group where cluster-critical controllers run (Karpenter, the GPU
    Operator's controllers, CoreDNS). Karpenter never runs on nodes it manages."""

    instance_types: tuple[InstanceType, ...] = Field(default=("m7i.large",), min_length=1)
    """Instance types for the group; all of one architecture, matching `amiType`."""
    min_size: int = Field(default=2, ge=2)
    """At least 2, so the controllers keep running while a node is replaced."""
    desired_size: int = Field(default=2, ge=2)
    """Initial size; later changes by hand or autoscaler are not reverted (see README)."""
    max_size: int = Field(default=4, ge=2, le=100)
    """Upper bound for the group."""
    disk_size_gib: int = Field(default=50, ge=20, le=16384)
    """Root volume size of each system node."""
    ami_type: SystemAmiType = "AL2023_x86_64_STANDARD"
    """EKS-optimised AMI type of the group."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"sizes must satisfy minSize <= desiredSize <= maxSize, got "
                f"{self.min_size} <= {self.desired_size} <= {self.max_size}"
            )
        arm_ami = "ARM" in self.ami_type
        mismatched = [t for t in self.instance_types if _is_arm_instance_type(t) != arm_ami]
        if mismatched:
            arch = "arm64" if arm_ami else "x86_64"
            raise ValueError(
                f"instance types {', '.join(mismatched)} do not match amiType {self.ami_type} ({arch})"
            )
        return self


class ClusterConfig(ConfigModel):
    """The EKS cluster."""

    name: str = Field(min_length=1, max_length=38)
    """Cluster name; also prefixes IAM roles and the interruption queue, hence at most 38 characters."""
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    """Kubernetes minor version (quote it in YAML: 1.30 unquoted is the number 1.3)."""
    endpoint: EndpointConfig = EndpointConfig()
    """API endpoint access."""
    admin_role_arns: tuple[IamRoleArn, ...] = ()
    """IAM roles granted cluster-admin through EKS access entries. The identity that runs `pulumi up` is
    admin already (pulumi-eks always creates the cluster with the creator's admin access entry), so do not
    list that role here: EKS refuses a second access entry for the same principal."""
    system_nodes: SystemNodesConfig = SystemNodesConfig()
    """The system managed node group."""
    log_types: tuple[LogType, ...] = CONTROL_PLANE_LOG_TYPES
    """Control-plane log types sent to CloudWatch Logs."""
    protect: bool = False
    """Protect the cluster and data-bearing resources: Pulumi `protect` plus EKS deletion protection."""
    tags: AwsTags = Field(default_factory=dict)
    """Extra AWS tags on every resource that takes tags (at most 44; not `aws:`, `gpu-eks/`, Karpenter's)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:

        if not re.fullmatch(r"[a-zA-Z][a-zA-Z0-9-]*", value):
            raise ValueError("must start with a letter and contain only letters, digits and '-'")
        return value

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _version(cls, value: object) -> object:
        if value not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(
                f"must be one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} (a quoted string in YAML)"
            )
        return value

    @field_validator("admin_role_arns")
    @classmethod
    def _unique_admins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        duplicates = sorted({arn for arn in value if value.count(arn) > 1})
        if duplicates:
            raise ValueError(f"lists {', '.join(duplicates)} more than once")
        return value
