"""The `gpu-eks:cluster` section: the EKS control plane, its system node group and who administers it."""

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from config.types import (
    AwsTags,
    Flag,
    IamRoleArn,
    InstanceType,
    PrivateAccessCidr,
    PublicCidr,
    SecurityGroupId,
    WholeNumber,
    repeated,
)
from facts.eks import ADDON_VERSION, LOG_RETENTION_DAYS, UpgradeSupportType, kube_proxy_minor

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
    """Who can reach the Kubernetes API endpoint.

    Every Helm release and Kubernetes object of the stack is applied through this endpoint, so whoever runs
    `pulumi up` (and `pulumi destroy`) must reach it: through the public endpoint from an address in
    `publicAccessCidrs`, or through the private endpoint from a network with a route into the VPC that is
    listed in `privateAccessCidrs` (or carries a security group of `privateAccessSecurityGroupIds`)."""

    public_access: Flag = True
    """Reachable from the internet (restricted by `publicAccessCidrs`)."""
    private_access: Flag = True
    """Reachable from inside the VPC; nodes then talk to the API without leaving it. Off, nodes use the public
    endpoint from the VPC's NAT addresses: refused unless `publicAccessCidrs` is open to all (with an existing
    VPC, a warning: the list must hold its NAT addresses)."""
    public_access_cidrs: tuple[PublicCidr, ...] = ("0.0.0.0/0",)
    """Allow list for the public endpoint."""
    private_access_cidrs: tuple[PrivateAccessCidr, ...] = ()
    """IPv4 networks outside the cluster's security group that may reach the private endpoint (tcp/443),
    e.g. the CI runners' VPC behind a peering or transit gateway, or a VPN range. One ingress rule each on
    the security group EKS creates for the cluster (which otherwise admits only itself)."""
    private_access_security_group_ids: tuple[SecurityGroupId, ...] = ()
    """Security groups (in this VPC or a peered VPC of the region) whose members may reach the private
    endpoint (tcp/443), e.g. a self-hosted runner's or a bastion's. One ingress rule each."""

    @model_validator(mode="after")
    def _reachable(self) -> Self:
        if not (self.public_access or self.private_access):
            raise ValueError(
                "publicAccess and privateAccess are both false: nothing could reach the API server; "
                "set at least one to true"
            )
        if not self.public_access and "public_access_cidrs" in self.model_fields_set:
            raise ValueError("publicAccessCidrs is set but publicAccess is false; remove one of them")
        private_sources = self.private_access_cidrs or self.private_access_security_group_ids
        if not self.private_access and private_sources:
            raise ValueError(
                "privateAccessCidrs or privateAccessSecurityGroupIds is set but privateAccess is false; "
                "set privateAccess: true or remove them"
            )
        if not self.public_access and not private_sources:
            raise ValueError(
                "publicAccess is false and neither privateAccessCidrs nor privateAccessSecurityGroupIds is "
                "set: the private endpoint admits only the cluster's own security group, so no `pulumi up` "
                "could install the charts (nor `pulumi destroy` remove them). Either keep publicAccess: true "
                "with publicAccessCidrs restricted to the deploying runner's egress CIDRs while "
                "bootstrapping, or deploy from a network that has a route into the VPC (network.existing, a "
                "peering or a transit gateway) and list it in privateAccessCidrs "
                "(or its security group in privateAccessSecurityGroupIds)"
            )
        for key, values in (
            ("publicAccessCidrs", self.public_access_cidrs),
            ("privateAccessCidrs", self.private_access_cidrs),
            ("privateAccessSecurityGroupIds", self.private_access_security_group_ids),
        ):
            if twice := repeated(values):
                raise ValueError(f"{key} lists {', '.join(twice)} more than once")
        return self


class SystemNodesConfig(ConfigModel):
    """The on-demand managed node group where cluster-critical controllers run (Karpenter, the GPU
    Operator's controllers, CoreDNS). Karpenter never runs on nodes it manages."""

    instance_types: tuple[InstanceType, ...] = Field(default=("m7i.large",), min_length=1)
    """Instance types for the group; all of one architecture, matching `amiType`."""
    min_size: WholeNumber = Field(default=2, ge=2)
    """At least 2, so the controllers keep running while a node is replaced."""
    desired_size: WholeNumber = Field(default=2, ge=2)
    """Initial size; later changes by hand or autoscaler are not reverted (see docs/operations.md)."""
    max_size: WholeNumber = Field(default=4, ge=2, le=100)
    """Upper bound for the group."""
    disk_size_gib: WholeNumber = Field(default=50, ge=20, le=16384)
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


class AddonConfig(ConfigModel):
    """One EKS add-on."""

    version: str | None = None
    """Pin this build (e.g. `v1.19.2-eksbuild.1`, from `aws eks describe-addon-versions`). Unset: the build
    EKS marks as default for `kubernetesVersion`, so the add-on moves when the Kubernetes version moves."""

    @field_validator("version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None and not ADDON_VERSION.fullmatch(value):
            raise ValueError("must be an EKS add-on build such as v1.19.2-eksbuild.1")
        return value


class AddonsConfig(ConfigModel):
    """Version pins of the EKS add-ons, each optional."""

    vpc_cni: AddonConfig = AddonConfig()
    """`vpc-cni` (the `aws-node` DaemonSet: pod networking)."""
    kube_proxy: AddonConfig = AddonConfig()
    """`kube-proxy`; its builds follow the Kubernetes minor, so a pin must match `kubernetesVersion`."""
    coredns: AddonConfig = AddonConfig()
    """`coredns` (cluster DNS)."""
    pod_identity_agent: AddonConfig = AddonConfig()
    """`eks-pod-identity-agent` (EKS Pod Identity credentials for Karpenter and the EBS CSI driver)."""
    ebs_csi_driver: AddonConfig = AddonConfig()
    """`aws-ebs-csi-driver` (EBS volumes for PersistentVolumeClaims)."""

    def pinned(self, field: str) -> str | None:
        """The pinned version of the add-on behind `field` (a field name such as `vpc_cni`), if any."""
        addon: AddonConfig = getattr(self, field)
        return addon.version


class AutomationConfig(ConfigModel):
    """The CI roles that run this stack, each granted `AmazonEKSClusterAdminPolicy` by an access entry.

    Both need write access to the whole cluster: `pulumi preview` diffs Kubernetes objects by server-side
    apply in dry-run mode, which Kubernetes authorizes exactly like the write itself, and the stack writes
    cluster-scoped objects (CRDs, ClusterRoles, Namespaces, StorageClasses, NodePools)."""

    preview_role_arn: IamRoleArn | None = None
    """The role `pulumi preview` runs as in pull requests (`vars.AWS_PREVIEW_ROLE_ARN`). Read-only in AWS,
    but cluster admin in Kubernetes (dry-run writes), so trust it only for this repository's branches. A
    production stack's is its own (the `prod-preview` environment's), never a non-production stack's: that
    is refused, since any branch's pull request may assume the non-production one."""
    deploy_role_arn: IamRoleArn | None = None
    """The role `pulumi up` runs as on merge (`vars.AWS_DEPLOY_ROLE_ARN`). Leave unset when that role created
    the cluster: EKS already gave the creator an admin access entry, and refuses a second one."""


class ClusterConfig(ConfigModel):
    """The EKS cluster."""

    name: str = Field(min_length=1, max_length=38)
    """Cluster name; also prefixes IAM roles and the interruption queue, hence at most 38 characters."""
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    """Kubernetes minor version (quote it in YAML: 1.30 unquoted is the number 1.3). Changing it upgrades
    the control plane first, then the system node group and the add-ons (see docs/operations.md, Upgrades)."""
    upgrade_policy: UpgradeSupportType = "STANDARD"
    """At the end of standard support: `STANDARD` lets EKS upgrade the control plane to the next version;
    `EXTENDED` keeps the version and bills extended support. EKS's own default is `EXTENDED`."""
    endpoint: EndpointConfig = EndpointConfig()
    """API endpoint access."""
    admin_role_arns: tuple[IamRoleArn, ...] = ()
    """IAM roles granted cluster-admin through EKS access entries: the platform team's. The identity that runs
    `pulumi up` is admin already (pulumi-eks always creates the cluster with the creator's admin access
    entry), so do not list that role here: EKS refuses a second access entry for the same principal. ML
    teams belong in `gpu-eks:teams` (access to their own namespace only), not here."""
    automation: AutomationConfig = AutomationConfig()
    """Access entries for the CI roles that preview and deploy the stack."""
    system_nodes: SystemNodesConfig = SystemNodesConfig()
    """The system managed node group."""
    addons: AddonsConfig = AddonsConfig()
    """EKS add-on version pins (default: each add-on's default build for `kubernetesVersion`)."""
    log_types: tuple[LogType, ...] = CONTROL_PLANE_LOG_TYPES
    """Control-plane log types sent to CloudWatch Logs."""
    log_retention_days: WholeNumber = 90
    """Days CloudWatch keeps control-plane logs (in the log group `/aws/eks/<name>/cluster`, which the
    stack creates)."""
    protect: Flag = False
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

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            accepted = ", ".join(map(str, LOG_RETENTION_DAYS))
            raise ValueError(f"must be one of the periods CloudWatch Logs accepts: {accepted}")
        return value

    @field_validator("admin_role_arns")
    @classmethod
    def _unique_admins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if duplicates := repeated(value):
            raise ValueError(f"lists {', '.join(duplicates)} more than once")
        return value

    def problems(self) -> list[tuple[tuple[str, ...], str, str]]:
        """Mistakes that span keys of this section, as (path below `cluster`, message, value)."""
        found: list[tuple[tuple[str, ...], str, str]] = []
        pinned_proxy = self.addons.kube_proxy.version
        if pinned_proxy and kube_proxy_minor(pinned_proxy) != self.kubernetes_version:
            found.append(
                (
                    ("addons", "kubeProxy", "version"),
                    f"is a kube-proxy build for Kubernetes {kube_proxy_minor(pinned_proxy)}, but "
                    f"kubernetesVersion is {self.kubernetes_version}; EKS offers a kube-proxy build only for "
                    "its own minor: move the pin with kubernetesVersion, or remove it",
                    pinned_proxy,
                )
            )
        automation = {
            "previewRoleArn": self.automation.preview_role_arn,
            "deployRoleArn": self.automation.deploy_role_arn,
        }
        for key, arn in automation.items():
            if arn is not None and arn in self.admin_role_arns:
                found.append(
                    (
                        ("automation", key),
                        "is also listed in adminRoleArns; EKS allows one access entry per principal: "
                        "list the role in one place only",
                        arn,
                    )
                )
        if automation["previewRoleArn"] is not None and (
            automation["previewRoleArn"] == automation["deployRoleArn"]
        ):
            found.append(
                (
                    ("automation", "deployRoleArn"),
                    "is the same role as previewRoleArn; EKS allows one access entry per principal: "
                    "use separate roles (previews run pull-request code) or set only one",
                    automation["deployRoleArn"] or "",
                )
            )
        return found
