"""Karpenter 1.14.1 node lifecycle facts: when a NodeClaim counts as initialized, what Karpenter cleans up by
itself, and what node repair acts on (pure data).

Sources (facts, not code):
- kubernetes-sigs/karpenter tag v1.14.1 @ 6e7eab7a0f485d7225eb98995fad9b66c79b322b:
  `pkg/controllers/nodeclaim/lifecycle/initialization.go`, `.../liveness.go`, `pkg/controllers/node/health/`.
- aws/karpenter-provider-aws tag v1.14.1 @ bde00654cd316fddb3dccfba3f5ac07039865429:
  `pkg/cloudprovider/cloudprovider.go` (`RepairPolicies`).
"""

from dataclasses import dataclass

NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""Label on NodeClaims and Nodes naming their NodePool."""
CONDITION_LAUNCHED = "Launched"
CONDITION_REGISTERED = "Registered"
CONDITION_INITIALIZED = "Initialized"
"""NodeClaim condition types. `Initialized` turns True only when the Node is Ready, every startup taint of the
NodeClaim is gone (matched by key and effect), no known ephemeral taint is left and every extended resource
the NodeClaim expects (`nvidia.com/gpu` for a GPU type) is allocatable. Until then Karpenter never disrupts
the node and keeps counting the capacity it expects from it."""

LAUNCH_TIMEOUT_SECONDS = 5 * 60
"""A NodeClaim not `Launched` after this is deleted by Karpenter (liveness.go `LaunchTimeout`)."""
REGISTRATION_TIMEOUT_SECONDS = 15 * 60
"""A launched NodeClaim whose Node has not registered after this is deleted by Karpenter
(`registrationTimeout`). Nothing deletes a registered NodeClaim that never initializes: only `expireAfter`
ends it."""


@dataclass(frozen=True)
class RepairPolicy:
    """A node condition that node repair (feature gate `NodeRepair`) acts on, and after how long."""

    condition: str
    status: str
    toleration_seconds: int
    needs_node_monitoring_agent: bool


REPAIR_POLICIES = (
    RepairPolicy("Ready", "False", 30 * 60, False),
    RepairPolicy("Ready", "Unknown", 30 * 60, False),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * 60, True),
    RepairPolicy("StorageReady", "False", 30 * 60, True),
    RepairPolicy("NetworkingReady", "False", 30 * 60, True),
    RepairPolicy("KernelReady", "False", 30 * 60, True),
    RepairPolicy("ContainerRuntimeReady", "False", 30 * 60, True),
)
"""The AWS provider's repair policies. Repair deletes the NodeClaim (forcefully, no drain budget) once a
condition has had the status for the toleration, unless more than 20% of the pool's nodes are unhealthy. The
conditions other than `Ready` are set only by the EKS node monitoring agent. A node that is Ready but never
initialized (no `nvidia.com/gpu`, a startup taint left) matches none of them."""
