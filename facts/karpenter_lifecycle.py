"""Karpenter 1.14.1 node lifecycle facts: when a NodeClaim counts as initialized, what Karpenter cleans up by
itself, what node repair acts on, and how its controller holds leadership (pure data).

Sources (facts, not code):
- kubernetes-sigs/karpenter tag v1.14.1 @ 6e7eab7a0f485d7225eb98995fad9b66c79b322b:
  `pkg/controllers/nodeclaim/lifecycle/initialization.go`, `.../liveness.go`, `pkg/controllers/node/health/`,
  `pkg/scheduling/taints.go`, `pkg/utils/nodeclaim/nodeclaim.go` (`NodeForNodeClaim`),
  `pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go` (a NodeClaim's owner reference),
  `pkg/controllers/state/statenode.go` (`Allocatable`), `pkg/operator/operator.go` and
  `pkg/operator/options/options.go` (leader election), `pkg/controllers/state/cluster.go`
  (`updateNodePoolResources`) and `pkg/controllers/provisioning/provisioner.go` (`Schedule`), with
  controller-runtime v0.23.1 (its `go.mod`)
  `pkg/manager/manager.go` defaults (lease 15 s, renew deadline 10 s, retry 2 s).
- aws/karpenter-provider-aws tag v1.14.1 @ bde00654cd316fddb3dccfba3f5ac07039865429:
  `pkg/cloudprovider/cloudprovider.go` (`RepairPolicies`), `charts/karpenter/templates/role.yaml` (the
  controller's Role on its lease, in the release namespace), and its documentation at that tag:
  `website/content/en/docs/concepts/disruption.md` (budgets and expiry, blocked drains) and
  `.../concepts/nodepools.md` (`terminationGracePeriod`).
"""

from dataclasses import dataclass

NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""Label on NodeClaims and Nodes naming their NodePool."""
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""Label on a launched NodeClaim naming its EC2 instance type (the NodeClaim CRD's `Type` printer column,
`karpenter.sh_nodeclaims.yaml` of v1.14.1, vendored in tests/fixtures/karpenter-1.14.1/crds)."""
NODEPOOL_OWNER_KIND = "NodePool"
"""Each NodeClaim Karpenter creates has one owner reference: its NodePool (apiVersion `karpenter.sh/v1`, the
pool's name and uid), which is how an Event about the pool finds the pool's uid without reading it."""
CONDITION_LAUNCHED = "Launched"
CONDITION_REGISTERED = "Registered"
CONDITION_INITIALIZED = "Initialized"
"""NodeClaim condition types. Karpenter sets `Initialized` True when, on the Node it finds by the
NodeClaim's `status.providerID`: the Node is Ready; no startup taint of the NodeClaim (`spec.startupTaints`,
matched by key and effect) and no known ephemeral taint (`KNOWN_EPHEMERAL_TAINTS`) is left; and every resource
the NodeClaim requests (`spec.resources.requests`, the sum of what the pods it was launched for requested)
is non-zero in the Node's allocatable. A resource those pods did not request is not waited for: a GPU
NodeClaim launched for pods that requested only `nvidia.com/gpu` waits for that resource and not, say,
`vpc.amazonaws.com/efa`.
Until then Karpenter never disrupts the node and counts what it expects from it (allocatable the Node reports
as zero is taken from the NodeClaim, i.e. the instance type and NodeOverlays)."""

KNOWN_EPHEMERAL_TAINTS: tuple[tuple[str, str], ...] = (
    ("node.kubernetes.io/not-ready", "NoSchedule"),
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
    ("karpenter.sh/unregistered", "NoExecute"),
)
"""(key, effect) of the taints Karpenter waits to see gone before initializing a node, besides its startup
taints (`KnownEphemeralTaints`; the cloud-provider one also matches its value `true`)."""
KNOWN_EPHEMERAL_TAINT_PREFIXES = ("readiness.k8s.io/",)
"""Taint key prefixes Karpenter also treats as ephemeral (the Node Readiness Controller's)."""

LAUNCH_TIMEOUT_SECONDS = 5 * 60
"""A NodeClaim not `Launched` after this is deleted by Karpenter (liveness.go `LaunchTimeout`)."""
REGISTRATION_TIMEOUT_SECONDS = 15 * 60
"""A launched NodeClaim whose Node has not registered after this is deleted by Karpenter
(`registrationTimeout`). Nothing deletes a registered NodeClaim that never initializes: only `expireAfter`
ends it."""

LEADER_ELECTION_LEASE = "karpenter-leader-election"
"""The coordination.k8s.io Lease the Karpenter controller holds while it leads (option
`--leader-election-name`, default `karpenter-leader-election`), in the controller's own namespace (the
chart's release namespace: `--leader-election-namespace` defaults to empty, which controller-runtime reads as
the pod's namespace). Only the leader reconciles NodeClaims."""
LEADER_LEASE_DURATION_SECONDS = 15
LEADER_RENEW_DEADLINE_SECONDS = 10
LEADER_RETRY_PERIOD_SECONDS = 2
"""controller-runtime's defaults, which Karpenter does not change: the leader renews its Lease every 2 s and
steps down when it could not for 10 s; a standby takes over 15 s after the last renewal. On shutdown the
leader releases the Lease (`LeaderElectionReleaseOnCancel`), leaving it without a holder."""


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
condition has had the status for the toleration, unless the pool is unhealthy (`REPAIR_UNHEALTHY_PERCENT`).
The conditions other than `Ready` are set only by the EKS node monitoring agent. A node that is Ready but
never initialized (no `nvidia.com/gpu`, a startup taint left) matches none of them."""

REPAIR_UNHEALTHY_PERCENT = 20
"""Node repair stops in a pool once more of its nodes are unhealthy than 20 % of them, rounded up
(`allowedUnhealthyPercent`, `intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)`): one of three nodes
may be repaired, two may not. Many nodes failing alike is a cause no replacement fixes."""

DELETING_NODES_COUNT_AGAINST_LIMITS = False
"""Whether a node being deleted (drained after expiry, drift, consolidation, an interruption, node repair or
the GPU node guard) still counts against its NodePool's `limits`. It does not: the cluster state counts a
node marked for deletion as no resources (`updateNodePoolResources`: `lo.Ternary(oldNode.MarkedForDeletion(),
corev1.ResourceList{}, oldNode.Capacity())`), and the provisioner schedules the pods of deleting nodes onto
new ones at once, against the active nodes only (`nodes.Deleting().CurrentlyReschedulablePods`,
`nodes.Active()`). So while a set of nodes drains, replacements up to the pool's limits run beside it."""
EXPIRY_HONOURS_BUDGETS = False
"""Disruption budgets do not hold back expiry ("NodePool Disruption Budgets do not prevent Karpenter from
terminating expired nodes"): nodes launched together expire, and are replaced, together."""

# --- Drift: which changes make Karpenter replace a pool's nodes -------------------------------------------
# kubernetes-sigs/karpenter v1.14.1 (6e7eab7a): `pkg/controllers/nodeclaim/disruption/drift.go` marks a
# NodeClaim Drifted when its NodePool's hash annotation differs from the NodeClaim's (`NodePool.Hash` in
# `pkg/apis/v1/nodepool.go`: hashstructure of `spec.template`, with `hash:"ignore"` on
# `spec.template.spec.requirements`) or when its labels no longer fit the pool's requirements
# (`areRequirementsDrifted`); `spec.disruption`, `spec.limits` and `spec.weight` are outside the template.
# aws/karpenter-provider-aws v1.14.1 (bde00654): `pkg/cloudprovider/drift.go` adds the EC2NodeClass's hash
# (`EC2NodeClass.Hash` in `pkg/apis/v1/ec2nodeclass.go`: hashstructure of `spec` with `hash:"ignore"` on the
# fields below, `amiFamily` hashed as resolved) and dynamic drift on what the selectors resolve to; the
# provider's `website/content/en/docs/concepts/disruption.md` ("Drift", "NodePool Disruption Budgets").

NODE_POOL_HASHED = "spec.template"
"""NodePool inputs in its drift hash: a change of any of them drifts every node of the pool."""
NODE_POOL_REQUIREMENTS = "spec.template.spec.requirements"
"""Not hashed: a node drifts only when its labels no longer fit the new requirements."""
NODE_CLASS_NOT_HASHED = (
    "spec.subnetSelectorTerms",
    "spec.securityGroupSelectorTerms",
    "spec.capacityReservationSelectorTerms",
    "spec.ipPrefixCount",
    "spec.amiSelectorTerms",
    "spec.amiFamily",
)
"""EC2NodeClass inputs outside its drift hash; any other `spec` input drifts every node launched from it."""
NODE_CLASS_DYNAMIC_DRIFT = {
    "spec.amiSelectorTerms": "nodes not on an AMI it now selects (AMIDrift)",
    "spec.subnetSelectorTerms": "nodes in a subnet it no longer selects (SubnetDrift)",
    "spec.securityGroupSelectorTerms": "nodes whose security groups differ from those it now selects "
    "(SecurityGroupDrift)",
    "spec.capacityReservationSelectorTerms": "nodes in a capacity reservation it no longer selects "
    "(CapacityReservationDrift)",
}
"""Unhashed EC2NodeClass inputs that drift the nodes which no longer match what they resolve to."""
DEFAULT_DISRUPTION_BUDGET = "10%"
"""A NodePool without `spec.disruption.budgets` gets one budget of `nodes: 10%`; budgets bound drift, not
expiry or a NodePool's deletion."""
