"""BlockStorage: the EBS CSI driver add-on with its Pod Identity role, and the default StorageClass."""

import json

import kubernetes_validate

from components.storage import DEFAULT_STORAGE_CLASS, default_storage_class
from synth.mocks import default_addon_version
from synth.runner import ProgramRun, Registration
from tests.helpers import run

STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"


def ebs_csi_addon(result: ProgramRun) -> Registration:
    return next(
        a for a in result.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver"
    )


def test_the_driver_gets_its_credentials_through_pod_identity_with_the_managed_policy(
    dev: ProgramRun,
) -> None:
    addon = ebs_csi_addon(dev)
    role = dev.one("aws:iam/role:Role", "storage-ebs-csi-controller")
    [association] = addon.inputs["podIdentityAssociations"]
    assert association == {"roleArn": role.outputs["arn"], "serviceAccount": "ebs-csi-controller-sa"}
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Statement"][0]["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    attachment = dev.one("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "storage-ebs-csi-controller")
    assert attachment.inputs["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    assert attachment.inputs["role"] == role.outputs["name"]
    agent = next(
        a for a in dev.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "eks-pod-identity-agent"
    )
    for needed in (attachment, agent, dev.one("aws:eks/nodeGroup:NodeGroup")):
        assert needed.urn in addon.dependencies, needed.name


def test_the_driver_follows_the_cluster_version_or_its_pin() -> None:
    assert ebs_csi_addon(run()).inputs["addonVersion"] == default_addon_version("aws-ebs-csi-driver", "1.35")
    pinned = run(cluster={"name": "ml-test", "addons": {"ebsCsiDriver": {"version": "v1.44.0-eksbuild.1"}}})
    assert ebs_csi_addon(pinned).inputs["addonVersion"] == "v1.44.0-eksbuild.1"


def test_the_policy_arn_follows_the_partition() -> None:
    result = run(region="cn-north-1", cluster={"name": "ml-cn"})
    attachment = result.one("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "storage-ebs-csi-controller")
    assert (
        attachment.inputs["policyArn"] == "arn:aws-cn:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    )


def test_the_default_storage_class_is_encrypted_gp3_named_for_others(any_stack: ProgramRun) -> None:
    storage_class = any_stack.one(STORAGE_CLASS)
    inputs = storage_class.inputs
    assert inputs["metadata"]["name"] == DEFAULT_STORAGE_CLASS == "gp3-encrypted"
    assert inputs["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert inputs["provisioner"] == "ebs.csi.aws.com"
    assert inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    # Volumes are created where the pod lands (Karpenter picks the zone), may grow, and go with their claim.
    assert inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert inputs["allowVolumeExpansion"] is True
    assert inputs["reclaimPolicy"] == "Delete"
    assert ebs_csi_addon(any_stack).urn in storage_class.dependencies


def test_the_storage_class_passes_the_kubernetes_schema() -> None:
    manifest = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", **default_storage_class()}
    kubernetes_validate.validate(manifest, "1.35", strict=True)


def test_the_driver_tags_every_volume_with_the_stacks_own_tags_for_the_budget() -> None:
    # cluster.tags stay off the driver's one `--extra-tags=k=v,...` flag (a key may hold `=`).
    result = run(cluster={"name": "ml-test", "tags": {"team": "ml", "a=b": "c"}})
    values = json.loads(ebs_csi_addon(result).inputs["configurationValues"])
    tags = {"gpu-eks/cluster": "ml-test", "gpu-eks/stack": "test"}
    assert values == {"controller": {"extraVolumeTags": tags}}
