"""A realistic GPU node class, node pool and node overlay, built through the models: the fixtures every test
starts from."""

from components.karpenter_api import (
    AMISelectorTerm,
    BlockDevice,
    BlockDeviceMapping,
    Budget,
    Disruption,
    EC2NodeClass,
    EC2NodeClassSpec,
    MetadataOptions,
    NodeClaimTemplate,
    NodeClaimTemplateMetadata,
    NodeClaimTemplateSpec,
    NodeOverlay,
    NodeOverlayRequirement,
    NodeOverlaySpec,
    NodePool,
    NodePoolSpec,
    NodeSelectorRequirement,
    ObjectMeta,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
    Taint,
)

CLUSTER = "gpu-eks-dev"
AMI_ALIAS = "al2023@v20260714"
"""Newest amazon-eks-ami release with AL2023 NVIDIA AMIs (reference README); a pinned alias, not `latest`."""


def gpu_node_class() -> EC2NodeClass:
    """AL2023 NVIDIA AMI, discovery-tag selectors, node role by name, IMDSv2 hop limit 1, 200Gi gp3 root."""
    discovery = {"karpenter.sh/discovery": CLUSTER}
    return EC2NodeClass(
        metadata=ObjectMeta(name="gpu", labels={"app.kubernetes.io/part-of": "gpu-eks"}),
        spec=EC2NodeClassSpec(
            ami_selector_terms=[AMISelectorTerm(alias=AMI_ALIAS)],
            role=f"KarpenterNodeRole-{CLUSTER}",
            subnet_selector_terms=[SubnetSelectorTerm(tags=discovery)],
            security_group_selector_terms=[SecurityGroupSelectorTerm(tags=discovery)],
            metadata_options=MetadataOptions(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
            ),
            block_device_mappings=[
                BlockDeviceMapping(
                    device_name="/dev/xvda",
                    root_volume=True,
                    ebs=BlockDevice(
                        volume_size="200Gi",
                        volume_type="gp3",
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
            tags={"team": "ml-platform", "cluster": CLUSTER},
        ),
    )


def gpu_node_pool(node_class: EC2NodeClass | None = None) -> NodePool:
    """GPU instances only (`instance-gpu-count Gt 0`), GPU taint, limits, consolidation with budgets."""
    node_class = node_class or gpu_node_class()
    return NodePool(
        metadata=ObjectMeta(name="gpu"),
        spec=NodePoolSpec(
            weight=10,
            limits={"cpu": "1000", "memory": "4000Gi", "nvidia.com/gpu": 32},
            disruption=Disruption(
                consolidation_policy="WhenEmpty",
                consolidate_after="10m",
                budgets=[
                    Budget(nodes="10%"),
                    Budget(
                        nodes="0", schedule="0 8 * * mon-fri", duration="10h", reasons=["Empty", "Drifted"]
                    ),
                ],
            ),
            template=NodeClaimTemplate(
                metadata=NodeClaimTemplateMetadata(labels={"gpu-eks/pool": "gpu"}),
                spec=NodeClaimTemplateSpec(
                    node_class_ref=node_class.node_class_ref(),
                    requirements=[
                        NodeSelectorRequirement(
                            key="karpenter.k8s.aws/instance-gpu-count", operator="Gt", values=["0"]
                        ),
                        NodeSelectorRequirement(
                            key="karpenter.k8s.aws/instance-category", operator="In", values=["g", "p"]
                        ),
                        NodeSelectorRequirement(
                            key="karpenter.sh/capacity-type", operator="In", values=["on-demand", "spot"]
                        ),
                        NodeSelectorRequirement(key="kubernetes.io/arch", operator="In", values=["amd64"]),
                    ],
                    taints=[Taint.of("nvidia.com/gpu", "true", "NoSchedule")],
                    expire_after="336h",
                ),
            ),
        ),
    )


def gpu_node_overlay() -> NodeOverlay:
    """The `gpu` pool's 1-GPU instance types time-sliced 4 ways: 4 `nvidia.com/gpu` each, 10% cheaper."""
    return NodeOverlay(
        metadata=ObjectMeta(name="gpu-1gpu", labels={"app.kubernetes.io/part-of": "gpu-eks"}),
        spec=NodeOverlaySpec(
            requirements=[
                NodeOverlayRequirement(key="karpenter.sh/nodepool", operator="In", values=["gpu"]),
                NodeOverlayRequirement(
                    key="karpenter.k8s.aws/instance-gpu-count", operator="In", values=["1"]
                ),
                NodeOverlayRequirement(
                    key="karpenter.k8s.aws/instance-gpu-memory", operator="Gte", values=["1"]
                ),
            ],
            capacity={"nvidia.com/gpu": "4"},
            price_adjustment="-10%",
            weight=1000,
        ),
    )
