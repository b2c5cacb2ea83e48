"""EKS facts: add-on names and version shapes, access policies, control-plane logging, EBS CSI (pure data)."""

import re
from typing import Final, Literal

from facts.partitions import Partition, check_partition

# --- Add-ons ---------------------------------------------------------------------------------------------

VPC_CNI: Final = "vpc-cni"
KUBE_PROXY: Final = "kube-proxy"
COREDNS: Final = "coredns"
POD_IDENTITY_AGENT: Final = "eks-pod-identity-agent"
EBS_CSI_DRIVER: Final = "aws-ebs-csi-driver"
"""EKS add-on names as `aws eks list-addons` / `describe-addon-versions` spell them."""

ADDON_VERSION = re.compile(r"v\d+\.\d+\.\d+-eksbuild\.\d+")
"""Shape of an EKS add-on version (`addonVersion` of describe-addon-versions, e.g. `v1.19.2-eksbuild.1`)."""


def kube_proxy_minor(addon_version: str) -> str:
    """`v1.35.0-eksbuild.2` -> `1.35`. kube-proxy builds follow Kubernetes: describe-addon-versions offers a
    cluster version only kube-proxy builds of its own minor (the EKS user guide's table, "Manage
    kube-proxy": 1.35 -> v1.35.3-eksbuild.13, 1.36 -> v1.36.0-eksbuild.14;
    https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html)."""
    major, minor = addon_version.removeprefix("v").split(".")[:2]
    return f"{major}.{minor}"


# --- Access policies -------------------------------------------------------------------------------------

CLUSTER_ADMIN_POLICY: Final = "AmazonEKSClusterAdminPolicy"
"""Kubernetes `cluster-admin` through an access entry: the only EKS access policy that may write
cluster-scoped objects (CRDs, ClusterRoles, Namespaces, StorageClasses, NodePools). `AmazonEKSAdminPolicy`
maps to the namespaced `admin` role and the view policies grant no writes (EKS user guide, "Review access
policy permissions": https://docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html)."""


NamespaceAccess = Literal["view", "edit", "admin"]
"""What a team may do in its namespaces (`gpu-eks:teams[].access`)."""

NAMESPACE_ACCESS_POLICIES: Final[dict[str, str]] = {
    "view": "AmazonEKSViewPolicy",
    "edit": "AmazonEKSEditPolicy",
    "admin": "AmazonEKSAdminPolicy",
}
"""The EKS access policy of each team access level, associated with a `namespace` access scope. From the EKS
user guide, "Review access policy permissions" (https://docs.aws.amazon.com/eks/latest/userguide/
access-policy-permissions.html), which says their rules are "similar to the permissions in the Kubernetes
user-facing cluster roles" (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles):

- `AmazonEKSViewPolicy` ("view most Kubernetes resources"), like `view`: reads workloads, Services,
  ConfigMaps, Events and logs, never Secrets;
- `AmazonEKSEditPolicy` ("edit most Kubernetes resources"), like `edit`: creates, changes and deletes
  workloads, Services, ConfigMaps, Secrets and PersistentVolumeClaims, execs into pods; no Roles or
  RoleBindings;
- `AmazonEKSAdminPolicy` ("most permissions to resources"), like `admin`: `edit` plus Roles and RoleBindings
  in the namespace (so it may hand its own access to service accounts and other principals).

None of them writes the namespace itself or its ResourceQuota, and none reaches cluster-scoped objects
(nodes, CRDs, NodePools)."""


def cluster_access_policy_arn(partition: Partition, policy: str) -> str:
    """`arn:<partition>:eks::aws:cluster-access-policy/<policy>` (`aws eks list-access-policies`)."""
    return f"arn:{check_partition(partition)}:eks::aws:cluster-access-policy/{policy}"


# --- Upgrades --------------------------------------------------------------------------------------------

UpgradeSupportType = Literal["STANDARD", "EXTENDED"]
"""`upgradePolicy.supportType` of an EKS cluster. EKS itself defaults to EXTENDED, which bills extended
support once the version leaves standard support; STANDARD instead upgrades the control plane automatically
at the end of standard support (EKS user guide, "Cluster upgrade policy":
https://docs.aws.amazon.com/eks/latest/userguide/view-upgrade-policy.html; pulumi-eks 4.4.0 documents the
EXTENDED default in its `upgrade_policy` docstring)."""


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def control_plane_version_move(current: str, target: str) -> str | None:
    """Why EKS refuses to move a cluster's control plane from `current` to `target` (`1.34`, `1.36`), or
    None when it can. It moves one minor version at a time and never back: "Once you upgrade a cluster, you
    can't downgrade to a previous version" (EKS user guide, "Update existing cluster to new Kubernetes
    version", https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html); "Control plane version
    upgrades must be done for one minor version at a time ... the current version of the cluster or one
    version higher" (eksctl in the EKS docs, https://docs.aws.amazon.com/eks/latest/eksctl/cluster-upgrade.html).
    """
    (major, old), (new_major, new) = _minor(current), _minor(target)
    if (new_major, new) < (major, old):
        return (
            f"EKS cannot downgrade a cluster's control plane: keep {current} (or move on to "
            f"{major}.{old + 1})"
        )
    if new_major != major or new - old > 1:
        return (
            f"EKS upgrades a control plane one minor version at a time: set {major}.{old + 1} first, run "
            f"`pulumi up`, then move on to {target}"
        )
    return None


def node_group_release_parameter(ami_type: str, kubernetes_version: str) -> str:
    """The SSM public parameter holding the release EKS recommends for a managed node group of `ami_type`
    on `kubernetes_version` (`1.35`): the value a node group's `releaseVersion` takes (`1.35.6-20260714` for
    AL2023, the Bottlerocket image version for Bottlerocket). The paths of
    terraform-aws-modules/terraform-aws-eks `modules/eks-managed-node-group/main.tf`
    (`ssm_ami_type_to_ssm_param`, b6ab9623); the EKS user guide, "Retrieve recommended Amazon Linux AMI IDs"
    (https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html), and Bottlerocket's
    (`/aws/service/bottlerocket/aws-k8s-<version>/<arch>/latest/image_version`)."""
    family, _, arch = ami_type.partition("_")
    ssm_arch = "arm64" if arch.startswith("ARM_64") else "x86_64"
    if family == "BOTTLEROCKET":
        return f"/aws/service/bottlerocket/aws-k8s-{kubernetes_version}/{ssm_arch}/latest/image_version"
    if family == "AL2023" and arch.endswith("_STANDARD"):
        return (
            f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{ssm_arch}/standard/"
            "recommended/release_version"
        )
    raise ValueError(f"no recommended-release parameter is known for amiType {ami_type}")


# --- Control-plane logs ----------------------------------------------------------------------------------

LOG_RETENTION_DAYS: Final[tuple[int, ...]] = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip
"""Retention periods CloudWatch Logs accepts (PutRetentionPolicy `retentionInDays`; the same list in the
pulumi-aws 7.51.1 docstring of `aws.cloudwatch.LogGroup.retention_in_days`, where 0 means never expire)."""


def control_plane_log_group(cluster_name: str) -> str:
    """The log group EKS writes control-plane logs to; it creates it without retention unless it exists
    (EKS user guide, "Send control plane logs to CloudWatch Logs":
    https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html)."""
    return f"/aws/eks/{cluster_name}/cluster"


# --- EBS CSI driver --------------------------------------------------------------------------------------

EBS_CSI_SERVICE_ACCOUNT: Final = "ebs-csi-controller-sa"
"""Service account of the add-on's controller in `kube-system` (EKS user guide, "Use Kubernetes volume
storage with Amazon EBS": https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html)."""
EBS_CSI_NAMESPACE: Final = "kube-system"
EBS_CSI_POLICY: Final = "service-role/AmazonEBSCSIDriverPolicy"
"""AWS-managed policy of the controller role (path included: `arn:aws:iam::aws:policy/service-role/...`).
It covers volumes encrypted with the default `aws/ebs` key; a customer-managed KMS key needs more."""
EBS_CSI_PROVISIONER: Final = "ebs.csi.aws.com"
"""The CSI driver name StorageClasses provision with."""
