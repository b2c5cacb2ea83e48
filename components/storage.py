"""BlockStorage: the EBS CSI driver add-on with its Pod Identity role, and the cluster's default
StorageClass (`gp3-encrypted`), so training pods get volumes for checkpoints and datasets; the driver tags
every volume with the stack's tags, so the cost budget sees them.

The driver's node DaemonSet tolerates every taint by default (`node.tolerateAllTaints: true` in
kubernetes-sigs/aws-ebs-csi-driver charts/aws-ebs-csi-driver/values.yaml @da0df42a, the chart the add-on
is built from), so volumes attach on the tainted GPU nodes too; its controller runs on the system nodes.
"""

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import Cluster, default_addon_version, eks_addon
from components.karpenter.iam import managed_policy_arn, pod_identity_trust_policy
from config.types import GPU_EKS_TAG_PREFIX
from facts.eks import EBS_CSI_DRIVER, EBS_CSI_POLICY, EBS_CSI_PROVISIONER, EBS_CSI_SERVICE_ACCOUNT
from facts.partitions import Partition

DEFAULT_STORAGE_CLASS = "gp3-encrypted"
"""Name of the default StorageClass; other stacks and components (observability) refer to it by name."""

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def driver_configuration(tags: dict[str, str]) -> dict[str, Any]:
    """The add-on's configuration values: the stack's own tags on every volume (and snapshot) the driver
    creates, whatever StorageClass a claim names, so the budget on `gpu-eks/stack` sees PersistentVolumes
    (checkpoints, datasets) as it sees the GPU nodes' disks.

    The chart passes `controller.extraVolumeTags` to the driver as one `--extra-tags=k=v,...` flag, split at
    `,` and at the first `=` (aws-ebs-csi-driver `docs/tagging.md`, "extraTags"): only gpu-eks's own tags,
    whose keys and values hold neither, go there; `cluster.tags` may hold `=` (AWS allows it in a key)."""
    return {
        "controller": {
            "extraVolumeTags": {k: v for k, v in sorted(tags.items()) if k.startswith(GPU_EKS_TAG_PREFIX)}
        }
    }


def default_storage_class() -> dict[str, Any]:
    """The default StorageClass: encrypted gp3 (3000 IOPS and 125 MiB/s baseline at any size, cheaper than
    gp2) with the default `aws/ebs` key.

    `WaitForFirstConsumer` creates a volume in the availability zone the pod is scheduled to: with
    Karpenter launching nodes in whichever zone has capacity, `Immediate` would pin pods to a volume's zone
    that may have no GPU capacity. Volumes can grow in place; released volumes are deleted. Clusters created
    at Kubernetes 1.30 or later have no default StorageClass of their own (EKS no longer marks `gp2`)."""
    return {
        "metadata": {"name": DEFAULT_STORAGE_CLASS, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": EBS_CSI_PROVISIONER,
        "parameters": {"type": "gp3", "encrypted": "true"},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }


class BlockStorage(pulumi.ComponentResource):
    """EBS volumes for PersistentVolumeClaims: the `aws-ebs-csi-driver` add-on and the default class."""

    addon: aws.eks.Addon
    storage_class: k8s.storage.v1.StorageClass

    def __init__(
        self,
        name: str,
        *,
        cluster: Cluster,
        version: str | None,
        partition: Partition,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`version`: the pinned add-on build (`cluster.addons.ebsCsiDriver.version`), or None for the
        default build of the cluster's Kubernetes version."""
        super().__init__("gpu-eks:storage:BlockStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-ebs-csi-controller",
            assume_role_policy=json.dumps(pod_identity_trust_policy()),
            tags=tags,
            opts=child,
        )
        attachment = aws.iam.RolePolicyAttachment(
            f"{name}-ebs-csi-controller",
            role=role.name,
            policy_arn=managed_policy_arn(partition, EBS_CSI_POLICY),
            opts=child,
        )
        self.addon = eks_addon(
            f"{name}-{EBS_CSI_DRIVER}",
            cluster_name=cluster.name,
            addon=EBS_CSI_DRIVER,
            version=version or default_addon_version(EBS_CSI_DRIVER, cluster.kubernetes_version, self),
            configuration_values=json.dumps(driver_configuration(tags), sort_keys=True),
            # EKS creates the Pod Identity association of the controller's service account with the add-on.
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=role.arn, service_account=EBS_CSI_SERVICE_ACCOUNT
                )
            ],
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                # The controller is a Deployment (ACTIVE only once nodes run it) and gets credentials from
                # the Pod Identity agent, with the policy attached.
                depends_on=[attachment, cluster.pod_identity_agent, cluster.system_node_group],
            ),
        )
        spec = default_storage_class()
        self.storage_class = k8s.storage.v1.StorageClass(
            f"{name}-{DEFAULT_STORAGE_CLASS}",
            metadata=spec["metadata"],
            provisioner=spec["provisioner"],
            parameters=spec["parameters"],
            reclaim_policy=spec["reclaimPolicy"],
            volume_binding_mode=spec["volumeBindingMode"],
            allow_volume_expansion=spec["allowVolumeExpansion"],
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[self.addon]),
        )
        self.register_outputs(
            {"storageClass": DEFAULT_STORAGE_CLASS, "addonVersion": self.addon.addon_version}
        )
