"""Typed Karpenter API (1.14.1): `karpenter.sh/v1` NodePool, `karpenter.k8s.aws/v1` EC2NodeClass and
`karpenter.sh/v1alpha1` NodeOverlay.

Build objects with the models, turn them into manifests with `to_manifest()`:

    node_class = EC2NodeClass(metadata=ObjectMeta(name="gpu"), spec=EC2NodeClassSpec(...))
    CustomResource(..., spec=to_manifest(node_class)["spec"])

See `common` for the conventions (aliases, strictness, why server defaults stay out of the output).
"""

from components.karpenter_api.common import KarpenterModel, ObjectMeta, to_manifest
from components.karpenter_api.ec2nodeclass import (
    AMIFamily,
    AMISelectorTerm,
    BlockDevice,
    BlockDeviceMapping,
    CapacityReservationSelectorTerm,
    ConnectionTracking,
    CPUOptions,
    EC2NodeClass,
    EC2NodeClassSpec,
    KubeletConfiguration,
    MetadataOptions,
    NetworkInterface,
    PlacementGroupSelector,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
    VolumeType,
)
from components.karpenter_api.nodeoverlay import (
    NodeOverlay,
    NodeOverlayRequirement,
    NodeOverlaySpec,
    overlay_label_key_problem,
)
from components.karpenter_api.nodepool import (
    Budget,
    ConsolidationPolicy,
    Disruption,
    DisruptionReason,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodeClassReference,
    NodePool,
    NodePoolSpec,
    NodeSelectorRequirement,
    RequirementOperator,
    Taint,
    TaintEffect,
    label_key_problem,
)

__all__ = [
    "AMIFamily",
    "AMISelectorTerm",
    "BlockDevice",
    "BlockDeviceMapping",
    "Budget",
    "CPUOptions",
    "CapacityReservationSelectorTerm",
    "ConnectionTracking",
    "ConsolidationPolicy",
    "Disruption",
    "DisruptionReason",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "KarpenterModel",
    "KubeletConfiguration",
    "MetadataOptions",
    "NetworkInterface",
    "NodeClaimTemplate",
    "NodeClaimTemplateMetadata",
    "NodeClaimTemplateSpec",
    "NodeClassReference",
    "NodeOverlay",
    "NodeOverlayRequirement",
    "NodeOverlaySpec",
    "NodePool",
    "NodePoolSpec",
    "NodeSelectorRequirement",
    "ObjectMeta",
    "PlacementGroupSelector",
    "RequirementOperator",
    "SecurityGroupSelectorTerm",
    "SubnetSelectorTerm",
    "Taint",
    "TaintEffect",
    "VolumeType",
    "label_key_problem",
    "overlay_label_key_problem",
    "to_manifest",
]
