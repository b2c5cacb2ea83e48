"""A negative case per CEL rule of the NodePool, EC2NodeClass and NodeOverlay CRDs, for the API server and
the models.

Each case breaks the valid GPU example in one place. The offline API server (`crd_check`) must refuse it *by
that rule*, and the pydantic model must refuse it with a message naming the problem. A coverage test compares
the cases with the rules found in the vendored CRDs, so a Karpenter bump that adds, changes or drops a rule
fails until the table is brought up to date.
"""

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from components.karpenter_api import EC2NodeClass, NodeOverlay, NodePool, to_manifest
from tests.karpenter_api.examples import gpu_node_class, gpu_node_overlay, gpu_node_pool
from tests.support.crd_check import Rule, check, rules

Manifest = dict[str, Any]
Change = Callable[[Manifest], None]

NODE_POOL = ("karpenter.sh/v1", "NodePool")
NODE_CLASS = ("karpenter.k8s.aws/v1", "EC2NodeClass")
NODE_OVERLAY = ("karpenter.sh/v1alpha1", "NodeOverlay")
CRDS = (NODE_POOL, NODE_CLASS, NODE_OVERLAY)
_BASES: dict[tuple[str, str], Manifest] = {
    NODE_POOL: to_manifest(gpu_node_pool()),
    NODE_CLASS: to_manifest(gpu_node_class()),
    NODE_OVERLAY: to_manifest(gpu_node_overlay()),
}
_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    NODE_POOL: NodePool,
    NODE_CLASS: EC2NodeClass,
    NODE_OVERLAY: NodeOverlay,
}


@dataclass(frozen=True)
class Case:
    """A manifest that breaks exactly one CRD rule, and how the model must refuse it."""

    crd: tuple[str, str]
    path: str
    """Schema path of the rule, as `crd_check.Rule.schema_path`."""
    message: str
    """The rule's message in the CRD: together with `crd` and `path` it identifies the rule."""
    change: Change
    model_error: str | None
    """Fragment of the pydantic error; None only for transition rules, which need the old object."""
    old: Change | None = None
    """For transition rules: how the stored (old) object differs from the base."""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (*self.crd, self.path, self.message)

    def manifest(self) -> Manifest:
        manifest = copy.deepcopy(_BASES[self.crd])
        self.change(manifest)
        return manifest

    def old_manifest(self) -> Manifest | None:
        if self.old is None:
            return None
        manifest = copy.deepcopy(_BASES[self.crd])
        self.old(manifest)
        return manifest


# --------------------------------------------------------------------------------------------------------
# Helpers that change one place of a manifest
# --------------------------------------------------------------------------------------------------------
def _nothing(_: Manifest) -> None:
    return None


def _set(path: str, value: Any) -> Change:
    """Set `value` at the dotted `path` (list indices as numbers, the next index appends)."""

    def change(manifest: Manifest) -> None:
        *parents, last = path.split(".")
        node: Any = manifest
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list) and int(last) == len(node):
            node.append(copy.deepcopy(value))
        elif isinstance(node, list):
            node[int(last)] = copy.deepcopy(value)
        else:
            node[last] = copy.deepcopy(value)

    return change


def _delete(path: str) -> Change:
    def change(manifest: Manifest) -> None:
        *parents, last = path.split(".")
        node: Any = manifest
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]

    return change


def _all(*changes: Change) -> Change:
    def change(manifest: Manifest) -> None:
        for one in changes:
            one(manifest)

    return change


TEMPLATE = "spec.template.spec"
LABELS = "spec.template.metadata.labels"
REQ = f"{TEMPLATE}.requirements"
REF = f"{TEMPLATE}.nodeClassRef"
KUBELET = "spec.kubelet"
EBS = "spec.blockDeviceMappings.0.ebs"


def _label(key: str) -> Change:
    return _set(LABELS, {"gpu-eks/pool": "gpu", key: "x"})


def _requirement(requirement: dict[str, Any]) -> Change:
    def change(manifest: Manifest) -> None:
        manifest["spec"]["template"]["spec"]["requirements"].append(requirement)

    return change


def _overlay_requirement(requirement: dict[str, Any]) -> Change:
    def change(manifest: Manifest) -> None:
        manifest["spec"]["requirements"].append(requirement)

    return change


def _ami_terms(*terms: dict[str, Any], family: str | None = "AL2023") -> Change:
    changes = [_set("spec.amiSelectorTerms", list(terms))]
    if family is not None:
        changes.append(_set("spec.amiFamily", family))
    return _all(*changes)


_IFACE = {"deviceIndex": 0, "networkCardIndex": 0, "interfaceType": "interface"}
_TAG_RULES = "spec.tags"

# --------------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------------
NODE_POOL_CASES = [
    Case(
        NODE_POOL,
        "spec.disruption.budgets",
        "'schedule' must be set with 'duration'",
        _set("spec.disruption.budgets", [{"nodes": "0", "schedule": "@daily"}]),
        "with 'schedule' also needs 'duration'",
    ),
    Case(
        NODE_POOL,
        "spec.template.metadata.labels",
        'label domain "karpenter.sh" is restricted',
        _label("karpenter.sh/team"),
        "uses the restricted label domain 'karpenter.sh'",
    ),
    Case(
        NODE_POOL,
        "spec.template.metadata.labels",
        'label "karpenter.sh/nodepool" is restricted',
        _label("karpenter.sh/nodepool"),
        "'karpenter.sh/nodepool' is set by Karpenter itself",
    ),
    Case(
        NODE_POOL,
        "spec.template.metadata.labels",
        'label "kubernetes.io/hostname" is restricted',
        _label("kubernetes.io/hostname"),
        "'kubernetes.io/hostname' is restricted",
    ),
    Case(
        NODE_POOL,
        "spec.template.metadata.labels",
        'label domain "karpenter.k8s.aws" is restricted',
        _label("karpenter.k8s.aws/gpu-driver"),
        "uses the restricted label domain 'karpenter.k8s.aws'",
    ),
    Case(
        NODE_POOL,
        f"{REF}.group",
        "group may not be empty",
        _set(f"{REF}.group", ""),
        "group may not be empty",
    ),
    Case(NODE_POOL, f"{REF}.kind", "kind may not be empty", _set(f"{REF}.kind", ""), "kind may not be empty"),
    Case(NODE_POOL, f"{REF}.name", "name may not be empty", _set(f"{REF}.name", ""), "name may not be empty"),
    Case(
        NODE_POOL,
        REF,
        "nodeClassRef.group is immutable",
        _nothing,
        None,
        old=_set(f"{REF}.group", "compute.example.com"),
    ),
    Case(
        NODE_POOL,
        REF,
        "nodeClassRef.kind is immutable",
        _nothing,
        None,
        old=_set(f"{REF}.kind", "OtherClass"),
    ),
    Case(
        NODE_POOL,
        f"{REQ}[*].key",
        'label domain "karpenter.sh" is restricted',
        _requirement({"key": "karpenter.sh/team", "operator": "Exists"}),
        "uses the restricted label domain 'karpenter.sh'",
    ),
    Case(
        NODE_POOL,
        f"{REQ}[*].key",
        'label "karpenter.sh/nodepool" is restricted',
        _requirement({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu"]}),
        "'karpenter.sh/nodepool' is set by Karpenter itself",
    ),
    Case(
        NODE_POOL,
        f"{REQ}[*].key",
        'label "kubernetes.io/hostname" is restricted',
        _requirement({"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-0-1"]}),
        "'kubernetes.io/hostname' is restricted",
    ),
    Case(
        NODE_POOL,
        f"{REQ}[*].key",
        'label domain "karpenter.k8s.aws" is restricted',
        _requirement({"key": "karpenter.k8s.aws/instance-gpu-vendor", "operator": "Exists"}),
        "uses the restricted label domain 'karpenter.k8s.aws'",
    ),
    Case(
        NODE_POOL,
        REQ,
        "requirements with operator 'In' must have a value defined",
        _requirement({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": []}),
        "with operator 'In' must list at least one value",
    ),
    Case(
        NODE_POOL,
        REQ,
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        _set(f"{REQ}.0.values", ["0", "1"]),
        "with operator 'Gt' takes exactly one value",
    ),
    Case(
        NODE_POOL,
        REQ,
        "requirements with 'minValues' must have at least that many values specified in the 'values' field",
        _set(f"{REQ}.1.minValues", 3),
        "has minValues 3 but lists only 2 value(s)",
    ),
    Case(
        NODE_POOL,
        "spec",
        "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
        "provisioning modes",
        _nothing,
        None,
        old=_all(_set("spec.replicas", 2), _set("spec.limits", {"nodes": 4}), _delete("spec.weight")),
    ),
    Case(
        NODE_POOL,
        "spec",
        "only 'limits.nodes' is supported on static NodePools",
        _all(_set("spec.replicas", 2), _delete("spec.weight")),
        "supports only 'limits.nodes'; remove limits ['cpu', 'memory', 'nvidia.com/gpu']",
    ),
    Case(
        NODE_POOL,
        "spec",
        "'weight' is not supported on static NodePools",
        _all(_set("spec.replicas", 2), _set("spec.limits", {"nodes": 4})),
        "'weight' is not supported on a static NodePool",
    ),
]

_EVICTION_KEYS = (
    "['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree',"
    "'pid.available']"
)
_ALIAS_FAMILY_CASES = [
    ("AL2", "al2@v20250101", "AL2023"),
    ("AL2023", "al2023@v20260714", "AL2"),
    ("Bottlerocket", "bottlerocket@v1.45.0", "AL2023"),
    ("Windows2019", "windows2019@latest", "Windows2022"),
    ("Windows2022", "windows2022@latest", "Windows2025"),
    ("Windows2025", "windows2025@latest", "Windows2019"),
]
_ALIAS_FAMILY_MESSAGE = {
    "AL2": "an AL2",
    "AL2023": "an AL2023",
    "Bottlerocket": "a Bottlerocket",
    "Windows2019": "a Windows2019",
    "Windows2022": "a Windows2022",
    "Windows2025": "a Windows2025",
}

NODE_CLASS_CASES = [
    # amiSelectorTerms[*].alias
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms[*].alias",
        "'alias' is improperly formatted, must match the format 'family@version'",
        _set("spec.amiSelectorTerms.0.alias", "al2023"),
        "is not of the form 'family@version'",
    ),
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms[*].alias",
        "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', "
        "'windows2019', 'windows2022', 'windows2025'",
        _set("spec.amiSelectorTerms.0.alias", "ubuntu@v20260714"),
        "alias family 'ubuntu' is not supported",
    ),
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms[*].alias",
        "windows families may only specify version 'latest'",
        _set("spec.amiSelectorTerms.0.alias", "windows2022@v20260714"),
        "windows families cannot pin a version",
    ),
    # amiSelectorTerms
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms[*].tags",
        "empty tag keys or values aren't supported",
        _ami_terms({"tags": {"Name": ""}}),
        "has an empty key or value",
    ),
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms",
        "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
        _ami_terms({"owner": "amazon"}),
        "needs one of 'tags', 'id', 'name', 'alias' or 'ssmParameter'",
    ),
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
        _ami_terms({"id": "ami-0123456789abcdef0", "name": "my-ami"}),
        "amiSelectorTerm 'id' cannot be combined with ['name']",
    ),
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
        _ami_terms({"alias": "al2023@v20260714", "owner": "amazon"}, family=None),
        "amiSelectorTerm 'alias' cannot be combined with ['owner']",
    ),
    Case(
        NODE_CLASS,
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        _ami_terms({"alias": "al2023@v20260714"}, {"tags": {"team": "ml"}}, family=None),
        "with 'alias' must be the only term (got 2 terms)",
    ),
    # blockDeviceMappings
    Case(
        NODE_CLASS,
        "spec.blockDeviceMappings[*].ebs",
        "snapshotID or volumeSize must be defined",
        _delete(f"{EBS}.volumeSize"),
        "needs 'snapshotID' or 'volumeSize'",
    ),
    Case(
        NODE_CLASS,
        "spec.blockDeviceMappings[*].ebs",
        "snapshotID must be set when volumeInitializationRate is set",
        _set(f"{EBS}.volumeInitializationRate", 200),
        "'volumeInitializationRate' only applies to a volume created from 'snapshotID'",
    ),
    Case(
        NODE_CLASS,
        "spec.blockDeviceMappings",
        "must have only one blockDeviceMappings with rootVolume",
        _set(
            "spec.blockDeviceMappings.1",
            {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "100Gi"}},
        ),
        "only one blockDeviceMapping may set rootVolume: true",
    ),
    # capacityReservationSelectorTerms
    Case(
        NODE_CLASS,
        "spec.capacityReservationSelectorTerms[*].tags",
        "empty tag keys or values aren't supported",
        _set("spec.capacityReservationSelectorTerms", [{"tags": {"": "gpu"}}]),
        "has an empty key or value",
    ),
    Case(
        NODE_CLASS,
        "spec.capacityReservationSelectorTerms",
        "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
        _set("spec.capacityReservationSelectorTerms", [{"ownerID": "123456789012"}]),
        "needs one of 'tags', 'id' or 'instanceMatchCriteria'",
    ),
    Case(
        NODE_CLASS,
        "spec.capacityReservationSelectorTerms",
        "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation "
        "selector term",
        _set(
            "spec.capacityReservationSelectorTerms",
            [{"id": "cr-0123456789abcdef0", "ownerID": "123456789012"}],
        ),
        "capacityReservationSelectorTerm 'id' cannot be combined",
    ),
    # connectionTracking, instanceProfile
    Case(
        NODE_CLASS,
        "spec.connectionTracking",
        "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
        _set("spec.connectionTracking", {}),
        "connectionTracking needs one of",
    ),
    Case(
        NODE_CLASS,
        "spec.instanceProfile",
        "instanceProfile cannot be empty",
        _all(_delete("spec.role"), _set("spec.instanceProfile", "")),
        "instanceProfile cannot be empty",
    ),
    # kubelet
    Case(
        NODE_CLASS,
        f"{KUBELET}.evictionHard",
        f"valid keys for evictionHard are {_EVICTION_KEYS}",
        _set(KUBELET, {"evictionHard": {"memory.free": "5%"}}),
        "evictionHard has unknown eviction signal(s) ['memory.free']",
    ),
    Case(
        NODE_CLASS,
        f"{KUBELET}.evictionSoft",
        f"valid keys for evictionSoft are {_EVICTION_KEYS}",
        _set(
            KUBELET, {"evictionSoft": {"memory.free": "5%"}, "evictionSoftGracePeriod": {"memory.free": "1m"}}
        ),
        "evictionSoft has unknown eviction signal(s) ['memory.free']",
    ),
    Case(
        NODE_CLASS,
        f"{KUBELET}.evictionSoftGracePeriod",
        f"valid keys for evictionSoftGracePeriod are {_EVICTION_KEYS}",
        _set(
            KUBELET, {"evictionSoft": {"memory.free": "5%"}, "evictionSoftGracePeriod": {"memory.free": "1m"}}
        ),
        "evictionSoftGracePeriod has unknown eviction signal(s) ['memory.free']",
    ),
    Case(
        NODE_CLASS,
        f"{KUBELET}.kubeReserved",
        "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",
        _set(KUBELET, {"kubeReserved": {"nvidia.com/gpu": "1"}}),
        "kubeReserved has unknown resource(s) ['nvidia.com/gpu']",
    ),
    Case(
        NODE_CLASS,
        f"{KUBELET}.kubeReserved",
        "kubeReserved value cannot be a negative resource quantity",
        _set(KUBELET, {"kubeReserved": {"memory": "-1Gi"}}),
        "kubeReserved cannot reserve a negative quantity",
    ),
    Case(
        NODE_CLASS,
        f"{KUBELET}.systemReserved",
        "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",
        _set(KUBELET, {"systemReserved": {"pods": "10"}}),
        "systemReserved has unknown resource(s) ['pods']",
    ),
    Case(
        NODE_CLASS,
        f"{KUBELET}.systemReserved",
        "systemReserved value cannot be a negative resource quantity",
        _set(KUBELET, {"systemReserved": {"cpu": "-100m"}}),
        "systemReserved cannot reserve a negative quantity",
    ),
    Case(
        NODE_CLASS,
        KUBELET,
        "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        _set(KUBELET, {"imageGCHighThresholdPercent": 60, "imageGCLowThresholdPercent": 60}),
        "imageGCHighThresholdPercent (60) must exceed imageGCLowThresholdPercent (60)",
    ),
    Case(
        NODE_CLASS,
        KUBELET,
        "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
        _set(KUBELET, {"evictionSoft": {"memory.available": "5%"}, "evictionSoftGracePeriod": {}}),
        "evictionSoft signal(s) ['memory.available'] need a matching evictionSoftGracePeriod entry",
    ),
    Case(
        NODE_CLASS,
        KUBELET,
        "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
        _set(KUBELET, {"evictionSoft": {}, "evictionSoftGracePeriod": {"memory.available": "1m"}}),
        "evictionSoftGracePeriod signal(s) ['memory.available'] have no matching evictionSoft threshold",
    ),
    # networkInterfaces
    Case(
        NODE_CLASS,
        "spec.networkInterfaces",
        "networkInterfaces must include a primary interface with interfaceType='interface'",
        _set("spec.networkInterfaces", [{**_IFACE, "interfaceType": "efa-only"}]),
        "networkInterfaces must include the primary interface",
    ),
    Case(
        NODE_CLASS,
        "spec.networkInterfaces",
        "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at "
        "most one efa device per network card",
        _set("spec.networkInterfaces", [_IFACE, _IFACE]),
        "networkInterfaces repeat networkCardIndex 0 / deviceIndex 0",
    ),
    # placementGroupSelector, role
    Case(
        NODE_CLASS,
        "spec.placementGroupSelector",
        "expected at least one, got none, ['name', 'id']",
        _set("spec.placementGroupSelector", {}),
        "placementGroupSelector needs 'name' or 'id'",
    ),
    Case(
        NODE_CLASS,
        "spec.placementGroupSelector",
        "'name' and 'id' are mutually exclusive",
        _set("spec.placementGroupSelector", {"name": "gpu-cluster", "id": "pg-0123456789abcdef0"}),
        "takes 'name' or 'id', not both",
    ),
    Case(NODE_CLASS, "spec.role", "role cannot be empty", _set("spec.role", ""), "role cannot be empty"),
    # securityGroupSelectorTerms
    Case(
        NODE_CLASS,
        "spec.securityGroupSelectorTerms[*].tags",
        "empty tag keys or values aren't supported",
        _set("spec.securityGroupSelectorTerms", [{"tags": {"karpenter.sh/discovery": ""}}]),
        "has an empty key or value",
    ),
    Case(
        NODE_CLASS,
        "spec.securityGroupSelectorTerms",
        "securityGroupSelectorTerms cannot be empty",
        _set("spec.securityGroupSelectorTerms", []),
        "securityGroupSelectorTerms needs at least one term",
    ),
    Case(
        NODE_CLASS,
        "spec.securityGroupSelectorTerms",
        "expected at least one, got none, ['tags', 'id', 'name']",
        _set("spec.securityGroupSelectorTerms", [{}]),
        "needs at least one of 'tags', 'id' or 'name'",
    ),
    Case(
        NODE_CLASS,
        "spec.securityGroupSelectorTerms",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group "
        "selector term",
        _set("spec.securityGroupSelectorTerms", [{"id": "sg-0123456789abcdef0", "tags": {"team": "ml"}}]),
        "securityGroupSelectorTerm 'id' cannot be combined",
    ),
    Case(
        NODE_CLASS,
        "spec.securityGroupSelectorTerms",
        "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group "
        "selector term",
        _set("spec.securityGroupSelectorTerms", [{"name": "nodes", "tags": {"team": "ml"}}]),
        "securityGroupSelectorTerm 'name' cannot be combined",
    ),
    # subnetSelectorTerms
    Case(
        NODE_CLASS,
        "spec.subnetSelectorTerms[*].tags",
        "empty tag keys or values aren't supported",
        _set("spec.subnetSelectorTerms", [{"tags": {"": "private"}}]),
        "has an empty key or value",
    ),
    Case(
        NODE_CLASS,
        "spec.subnetSelectorTerms",
        "subnetSelectorTerms cannot be empty",
        _set("spec.subnetSelectorTerms", []),
        "subnetSelectorTerms needs at least one term",
    ),
    Case(
        NODE_CLASS,
        "spec.subnetSelectorTerms",
        "expected at least one, got none, ['tags', 'id']",
        _set("spec.subnetSelectorTerms", [{}]),
        "a subnetSelectorTerm needs 'tags' or 'id'",
    ),
    Case(
        NODE_CLASS,
        "spec.subnetSelectorTerms",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector "
        "term",
        _set("spec.subnetSelectorTerms", [{"id": "subnet-0123456789abcdef0", "tags": {"team": "ml"}}]),
        "subnetSelectorTerm 'id' cannot be combined with 'tags'",
    ),
    # tags
    Case(
        NODE_CLASS, _TAG_RULES, "empty tag keys aren't supported", _set("spec.tags", {"": "x"}), "empty key"
    ),
    *(
        Case(
            NODE_CLASS,
            _TAG_RULES,
            f"tag contains a restricted tag matching {tag}",
            _set("spec.tags", {key: "x"}),
            f"tag {key!r} is restricted",
        )
        for tag, key in (
            ("eks:eks-cluster-name", "eks:eks-cluster-name"),
            ("kubernetes.io/cluster/", "kubernetes.io/cluster/gpu-eks-dev"),
            ("karpenter.sh/nodepool", "karpenter.sh/nodepool"),
            ("karpenter.sh/nodeclaim", "karpenter.sh/nodeclaim"),
            ("karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/ec2nodeclass"),
        )
    ),
    # spec
    Case(
        NODE_CLASS,
        "spec",
        "must specify exactly one of ['role', 'instanceProfile']",
        _set("spec.instanceProfile", "KarpenterNodeInstanceProfile"),
        "set exactly one of 'role' and 'instanceProfile' (got both)",
    ),
    *(
        Case(
            NODE_CLASS,
            "spec",
            f"if set, amiFamily must be '{family}' or 'Custom' when using {_ALIAS_FAMILY_MESSAGE[family]} "
            f"alias",
            _ami_terms({"alias": alias}, family=wrong),
            f"with it, amiFamily must be '{family}' or 'Custom'",
        )
        for family, alias, wrong in _ALIAS_FAMILY_CASES
    ),
    Case(
        NODE_CLASS,
        "spec",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
        _ami_terms({"tags": {"team": "ml"}}, family=None),
        "amiFamily is required when no amiSelectorTerm uses an 'alias'",
    ),
]

OV_REQ = "spec.requirements"
NODE_OVERLAY_CASES = [
    Case(
        NODE_OVERLAY,
        "spec.capacity",
        "invalid resource restricted",
        _set("spec.capacity", {"nvidia.com/gpu": "4", "memory": "1Gi"}),
        "capacity may not set memory",
    ),
    Case(
        NODE_OVERLAY,
        f"{OV_REQ}[*].key",
        'label domain "karpenter.sh" is restricted',
        _overlay_requirement({"key": "karpenter.sh/nodeclaim", "operator": "Exists"}),
        "uses the restricted label domain 'karpenter.sh'",
    ),
    Case(
        NODE_OVERLAY,
        f"{OV_REQ}[*].key",
        'label "kubernetes.io/hostname" is restricted',
        _overlay_requirement({"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-0-1"]}),
        "'kubernetes.io/hostname' is restricted",
    ),
    Case(
        NODE_OVERLAY,
        f"{OV_REQ}[*].key",
        'label domain "karpenter.k8s.aws" is restricted',
        # A NodePool may select on it; the NodeOverlay CRD's list of karpenter.k8s.aws labels is shorter.
        _overlay_requirement({"key": "karpenter.k8s.aws/instance-tenancy", "operator": "Exists"}),
        "uses the restricted label domain 'karpenter.k8s.aws'",
    ),
    Case(
        NODE_OVERLAY,
        OV_REQ,
        "requirements with operator 'NotIn' must have a value defined",
        _overlay_requirement({"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": []}),
        "with operator 'NotIn' must list at least one value",
    ),
    Case(
        NODE_OVERLAY,
        OV_REQ,
        "requirements with operator 'In' must have a value defined",
        _set(f"{OV_REQ}.1.values", []),
        "with operator 'In' must list at least one value",
    ),
    Case(
        NODE_OVERLAY,
        OV_REQ,
        "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",
        _set(f"{OV_REQ}.2.values", ["-1"]),
        "with operator 'Gte' takes exactly one value",
    ),
    Case(
        NODE_OVERLAY,
        "spec",
        "cannot set both 'price' and 'priceAdjustment'",
        _set("spec.price", "1.5"),
        "set 'price' or 'priceAdjustment', not both",
    ),
]

CASES = NODE_POOL_CASES + NODE_CLASS_CASES + NODE_OVERLAY_CASES
_RULES: dict[tuple[str, str, str, str], Rule] = {
    (r.api_version, r.kind, r.schema_path, r.message): r for crd in CRDS for r in rules(*crd)
}


def _case_id(case: Case) -> str:
    return f"{case.crd[1]}:{case.path}:{case.message[:60]}"


# --------------------------------------------------------------------------------------------------------
# Coverage
# --------------------------------------------------------------------------------------------------------
def test_rules_are_identified_uniquely_by_path_and_message() -> None:
    all_rules = [r for crd in CRDS for r in rules(*crd)]
    assert len(_RULES) == len(all_rules) == 82


def test_every_crd_rule_has_exactly_one_negative_case() -> None:
    keys = [case.key for case in CASES]
    assert len(keys) == len(set(keys)), "a rule has two cases"
    uncovered = sorted(set(_RULES) - set(keys))
    stale = sorted(set(keys) - set(_RULES))
    assert uncovered == [], f"CRD rules without a negative case: {uncovered}"
    assert stale == [], f"cases for rules that are not (or no longer) in the CRDs: {stale}"


# --------------------------------------------------------------------------------------------------------
# The offline API server refuses each case by its rule
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_api_server_refuses_by_the_rule(case: Case) -> None:
    rule = _RULES[case.key]
    violations = check(case.manifest(), old=case.old_manifest())
    by_rule = [v for v in violations if v.rule == rule]
    assert by_rule, f"not refused by {rule.rule!r}; got {[str(v) for v in violations]}"
    assert all(v.message == rule.message for v in by_rule), "the rule evaluated to false, not to an error"


@pytest.mark.parametrize("case", [c for c in CASES if c.old is not None], ids=_case_id)
def test_transition_rules_do_not_run_on_create(case: Case) -> None:
    assert check(case.manifest()) == []
    old = case.old_manifest()
    assert old is not None
    assert check(old) == [], "the old object is valid on its own"


# --------------------------------------------------------------------------------------------------------
# The models refuse the same
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", [c for c in CASES if c.model_error is not None], ids=_case_id)
def test_model_refuses_what_the_api_server_refuses(case: Case) -> None:
    assert case.model_error is not None
    with pytest.raises(ValidationError) as raised:
        _MODELS[case.crd].model_validate(case.manifest())
    assert case.model_error in str(raised.value)


def test_only_transition_rules_lack_a_model_validator() -> None:
    without = [case.key for case in CASES if case.model_error is None]
    assert without == [case.key for case in CASES if _RULES[case.key].transition]
    assert len(without) == 3


# --------------------------------------------------------------------------------------------------------
# Where a rule is odder than its message, model and API server agree on the odd behaviour
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("crd", "change", "accepted"),
    [
        pytest.param(
            NODE_CLASS,
            _set(
                "spec.subnetSelectorTerms",
                [{"id": "subnet-0123456789abcdef0", "tags": {"team": "ml"}}, {"tags": {"team": "ml"}}],
            ),
            True,
            id="subnet-id-with-tags-passes-when-another-term-does-not-mix",
        ),
        pytest.param(
            NODE_CLASS,
            _set("spec.capacityReservationSelectorTerms", []),
            False,
            id="empty-capacity-reservation-terms-are-refused",
        ),
        pytest.param(
            NODE_CLASS,
            _ami_terms({"id": "ami-0123456789abcdef0", "ssmParameter": "/my/ami"}),
            True,
            id="ami-id-with-ssm-parameter-is-allowed",
        ),
        pytest.param(
            NODE_CLASS,
            _set("spec.networkInterfaces", []),
            True,
            id="empty-network-interfaces-are-allowed",
        ),
        pytest.param(
            NODE_CLASS,
            _set(
                "spec.networkInterfaces",
                [
                    _IFACE,
                    {**_IFACE, "deviceIndex": 1, "interfaceType": "efa-only"},
                    {**_IFACE, "deviceIndex": 2, "interfaceType": "efa-only"},
                ],
            ),
            False,
            id="two-efa-only-interfaces-on-one-card-are-refused",
        ),
        pytest.param(
            NODE_POOL,
            _requirement({"key": "kubernetes.io/os", "operator": "NotIn", "values": []}),
            True,
            id="not-in-without-values-is-allowed",
        ),
        pytest.param(
            NODE_POOL,
            _requirement({"key": "karpenter.sh/capacity-type", "operator": "In"}),
            False,
            id="in-without-values-key-is-refused",
        ),
        pytest.param(
            NODE_POOL,
            _set(f"{REQ}.0.values", ["+2"]),
            True,
            id="gt-accepts-a-plus-sign-like-go",
        ),
        pytest.param(
            NODE_POOL,
            _set(f"{REQ}.0.values", [" 2"]),
            False,
            id="gt-refuses-spaces-like-go",
        ),
        pytest.param(
            NODE_POOL,
            _label("notkarpenter.sh/team"),
            False,
            id="label-domain-rule-matches-any-domain-ending-in-karpenter-sh",
        ),
        pytest.param(
            NODE_POOL,
            _requirement({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}),
            True,
            id="capacity-type-is-the-usable-karpenter-sh-label",
        ),
        pytest.param(
            NODE_POOL,
            _set(f"{REQ}.1.values", ["x" * 64 + "-"]),
            True,
            id="array-level-max-length-on-values-is-ignored",
        ),
        pytest.param(
            NODE_OVERLAY,
            _overlay_requirement({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}),
            True,
            id="overlay-may-select-capacity-type",
        ),
        pytest.param(
            NODE_OVERLAY,
            _overlay_requirement({"key": "kubernetes.io/os", "operator": "NotIn"}),
            False,
            id="overlay-not-in-without-values-key-is-refused",
        ),
        pytest.param(
            NODE_OVERLAY,
            _overlay_requirement({"key": "kubernetes.io/os", "operator": "Matches", "values": ["linux"]}),
            False,
            id="overlay-operator-outside-the-enum-is-refused",
        ),
        pytest.param(
            NODE_OVERLAY,
            _overlay_requirement({"key": "gpu-eks.io/pool", "operator": "DoesNotExist"}),
            True,
            id="overlay-may-select-a-pool-label",
        ),
        pytest.param(NODE_OVERLAY, _set("spec.weight", 0), False, id="overlay-weight-below-1-is-refused"),
        pytest.param(NODE_OVERLAY, _set("spec.weight", 10000), True, id="overlay-weight-10000-is-allowed"),
        pytest.param(
            NODE_OVERLAY, _set("spec.weight", 10001), False, id="overlay-weight-above-10000-is-refused"
        ),
        pytest.param(NODE_OVERLAY, _delete("spec.weight"), True, id="overlay-weight-may-be-left-out"),
        pytest.param(
            NODE_OVERLAY, _set("spec.priceAdjustment", "-100%"), True, id="price-adjustment-minus-100-percent"
        ),
        pytest.param(
            NODE_OVERLAY,
            _set("spec.priceAdjustment", "-100.5%"),
            False,
            id="price-adjustment-below-minus-100",
        ),
        pytest.param(
            NODE_OVERLAY, _set("spec.priceAdjustment", "+150%"), True, id="price-adjustment-plus-150-percent"
        ),
        pytest.param(
            NODE_OVERLAY,
            _all(_delete("spec.priceAdjustment"), _set("spec.price", "-1")),
            False,
            id="negative-price-is-refused",
        ),
        pytest.param(
            NODE_OVERLAY, _set("spec.capacity", {"nvidia.com/gpu": 4}), True, id="capacity-as-an-integer"
        ),
        pytest.param(
            NODE_OVERLAY, _set("spec.capacity", {"nvidia.com/gpu": "4x"}), False, id="capacity-not-a-quantity"
        ),
        pytest.param(NODE_OVERLAY, _set("spec.requirements", []), True, id="overlay-for-every-simulation"),
        pytest.param(NODE_OVERLAY, _delete("spec.requirements"), False, id="overlay-requirements-required"),
    ],
)
def test_model_and_api_server_agree_on_edge_cases(
    crd: tuple[str, str], change: Change, accepted: bool
) -> None:
    manifest = copy.deepcopy(_BASES[crd])
    change(manifest)
    server_accepts = check(manifest) == []
    try:
        _MODELS[crd].model_validate(manifest)
        model_accepts = True
    except ValidationError:
        model_accepts = False
    assert (server_accepts, model_accepts) == (accepted, accepted)
