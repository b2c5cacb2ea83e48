"""The `gpu-eks:teams` section: ML teams, each given its own namespace and access to it alone."""

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.types import IamRoleArn, KubernetesName, WholeNumber, repeated
from facts.eks import NamespaceAccess
from facts.kubernetes import PodSecurityLevel


class TeamConfig(ConfigModel):
    """One team: a namespace of its name, and IAM roles that may work in it (and nowhere else).

    Removing a team revokes its roles' access; its namespace stays, with the team's workloads and volume
    claims in it (delete it by hand: docs/operations.md#teams)."""

    name: KubernetesName
    """The team and its namespace: a DNS-1123 label (lower-case letters, digits and '-', at most 63
    characters), unique, and none of the namespaces the cluster or gpu-eks uses (default, kube-*, the GPU
    Operator's, Karpenter's, observability's, the GPU node guard's, the smoke test's)."""
    role_arns: tuple[IamRoleArn, ...]
    """IAM roles of the team, each given an EKS access entry scoped to this namespace. A role may belong to
    several teams (one access entry, scoped to all their namespaces), but not be a cluster admin or an
    automation role as well: those are cluster-admin already, and EKS allows one access entry per role."""
    access: NamespaceAccess = "edit"
    """What the roles may do in the namespace: `view` (AmazonEKSViewPolicy: read, no Secrets), `edit`
    (AmazonEKSEditPolicy: run and change workloads, Secrets, volume claims; no RBAC) or `admin`
    (AmazonEKSAdminPolicy: edit plus Roles and RoleBindings in the namespace). None of them reaches
    cluster-scoped objects or the namespace's quota."""
    gpu_quota: WholeNumber | None = Field(default=None, ge=0)
    """At most this many `nvidia.com/gpu` requested by the namespace's pods at once (a ResourceQuota on
    `requests.nvidia.com/gpu`); unset, no cap. On a time-sliced pool it counts slices (replicas per GPU, not
    physical GPUs); MIG `mixed` resources (`nvidia.com/mig-*`) are not counted."""
    pod_security: PodSecurityLevel = "baseline"
    """The Pod Security Standard the namespace enforces: `baseline` (default) admits GPU and EFA pods, their
    `/dev/shm` emptyDir included; pods adding `IPC_LOCK` (NCCL/EFA memory locking), using host paths, host
    namespaces or privileged containers need `privileged`; `restricted` also requires non-root pods that drop
    every capability."""

    @field_validator("role_arns")
    @classmethod
    def _unique_roles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("must list at least one role: a team without one gives nobody access")
        if duplicates := repeated(value):
            raise ValueError(f"lists {', '.join(duplicates)} more than once")
        return value
