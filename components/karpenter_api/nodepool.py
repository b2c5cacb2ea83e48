"""`karpenter.sh/v1` NodePool as of Karpenter 1.14.1: every spec field of the CRD, and its CEL rules.

Source of truth: `tests/fixtures/karpenter-1.14.1/crds/karpenter.sh_nodepools.yaml`. `status` is written
by the controller only and is deliberately not modelled (a manifest we apply never carries it). Fields the
API server defaults are optional here and stay out of the dump unless set; their server default is in the
docstring (see `components.karpenter_api.common` for why).

CEL rules of the CRD and where they live here:

- budgets: `schedule` and `duration` together -> `Budget`
- template labels: restricted domains `karpenter.sh` and `karpenter.k8s.aws`, restricted labels
  `karpenter.sh/nodepool` and `kubernetes.io/hostname` -> `NodeClaimTemplateMetadata`; the same four on
  requirement keys -> `NodeSelectorRequirement` (both through `label_key_problem()`)
- `nodeClassRef.group/kind/name` not empty -> `NodeClassReference`; `group` and `kind` immutable
  (transition rules on `oldSelf`) -> cannot be checked without the old object; the API server does on update
- requirements: `In` needs values, `Gt`/`Lt`/`Gte`/`Lte` exactly one non-negative integer, at least
  `minValues` values -> `NodeSelectorRequirement`
- static pools (`replicas` set): only `limits.nodes`, no `weight` -> `NodePoolSpec`; no switching between
  static and dynamic (transition rule) -> API server only.
"""

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, AwareDatetime, Field, model_validator

from components.karpenter_api.common import (
    INT32,
    INT64,
    KARPENTER_K8S_AWS_INSTANCE_LABELS,
    TAINT_PART,
    KarpenterModel,
    LabelValue,
    ObjectMeta,
    Quantity,
    go_int,
    label_domain,
)

__all__ = [
    "Budget",
    "ConsolidationPolicy",
    "Disruption",
    "DisruptionReason",
    "NodeClaimTemplate",
    "NodeClaimTemplateMetadata",
    "NodeClaimTemplateSpec",
    "NodeClassReference",
    "NodePool",
    "NodePoolSpec",
    "NodeSelectorRequirement",
    "RequirementOperator",
    "Taint",
    "TaintEffect",
    "label_key_problem",
]

DisruptionReason = Literal["Underutilized", "Empty", "Drifted"]
ConsolidationPolicy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]
RequirementOperator = Literal["Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

_DURATION_OR_NEVER: Final = r"^(([0-9]+(s|m|h))+|Never)$"

# ----------------------------------------------------------------------------------------------------
# Label keys: the four CEL rules the CRD puts on template labels and on requirement keys.
# ----------------------------------------------------------------------------------------------------
_KARPENTER_SH_ALLOWED: Final = frozenset({"karpenter.sh/capacity-type", "karpenter.sh/nodepool"})
_KARPENTER_K8S_AWS_ALLOWED: Final = KARPENTER_K8S_AWS_INSTANCE_LABELS | {
    "karpenter.k8s.aws/" + name
    for name in (
        "instance-tenancy",
        "capacity-reservation-type",
        "capacity-reservation-id",
        "capacity-reservation-interruptible",
        "placement-group-id",
        "placement-group-partition",
    )
}


def label_key_problem(key: str) -> str | None:
    """Why Karpenter's CRD refuses `key` as a node label or requirement key, or None when it accepts it."""
    if key not in _KARPENTER_SH_ALLOWED and label_domain(key).endswith("karpenter.sh"):
        return (
            f"{key!r} uses the restricted label domain 'karpenter.sh'; "
            "of that domain only 'karpenter.sh/capacity-type' may be used"
        )
    if key == "karpenter.sh/nodepool":
        return (
            "'karpenter.sh/nodepool' is set by Karpenter itself (to the pool's name); it cannot be set here"
        )
    if key == "kubernetes.io/hostname":
        return "'kubernetes.io/hostname' is restricted: the node's hostname is not known before it launches"
    if key not in _KARPENTER_K8S_AWS_ALLOWED and label_domain(key).endswith("karpenter.k8s.aws"):
        return (
            f"{key!r} uses the restricted label domain 'karpenter.k8s.aws'; only the well-known labels "
            "Karpenter defines there may be used (such as 'karpenter.k8s.aws/instance-gpu-count')"
        )
    return None


def _check_label_key(key: str) -> str:
    if problem := label_key_problem(key):
        raise ValueError(problem)
    return key


def _check_node_labels(labels: dict[str, str]) -> dict[str, str]:
    for key in labels:
        _check_label_key(key)
    return labels


def _check_unique(values: list[DisruptionReason]) -> list[DisruptionReason]:
    duplicates = sorted({value for value in values if values.count(value) > 1})
    if duplicates:
        raise ValueError(f"reasons is a set; remove the duplicate {', '.join(map(repr, duplicates))}")
    return values


# ----------------------------------------------------------------------------------------------------
# spec.disruption
# ----------------------------------------------------------------------------------------------------
class Budget(KarpenterModel):
    """How many of the pool's nodes may be disrupted at once, optionally only in a cron window."""

    duration: Annotated[str, Field(pattern=r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")] | None = None
    """How long the budget stays active after each `schedule` hit (`8h`, `1h30m`); needs `schedule`."""
    nodes: Annotated[
        str, Field(pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$", json_schema_extra={"serverDefault": "10%"})
    ]
    """Maximum nodes disrupted at once: a count (`"0"`, `"5"`) or a percentage (`"10%"`); always a string.

    Required by the CRD when a budget is written (the server would default it to `10%`)."""
    reasons: (
        Annotated[
            list[DisruptionReason],
            Field(max_length=50, json_schema_extra={"uniqueItems": True}),
            AfterValidator(_check_unique),
        ]
        | None
    ) = None
    """Disruption methods the budget applies to (a set); unset means all of them."""
    schedule: (
        Annotated[
            str,
            Field(
                pattern=(
                    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
                )
            ),
        ]
        | None
    ) = None
    """Cron schedule (UTC, five fields or `@daily` and friends) at which the budget becomes active."""

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> "Budget":
        if (self.schedule is None) != (self.duration is None):
            given, missing = ("schedule", "duration") if self.duration is None else ("duration", "schedule")
            raise ValueError(
                f"a disruption budget with '{given}' also needs '{missing}': "
                "'schedule' says when the budget starts and 'duration' how long it lasts"
            )
        return self


class Disruption(KarpenterModel):
    """When and how Karpenter may disrupt (consolidate, expire, drift) the pool's nodes."""

    budgets: (
        Annotated[list[Budget], Field(max_length=50, json_schema_extra={"serverDefault": [{"nodes": "10%"}]})]
        | None
    ) = None
    """Disruption budgets; the most restrictive active one wins. Server default: `[{nodes: "10%"}]`."""
    consolidate_after: Annotated[str, Field(pattern=_DURATION_OR_NEVER)] = Field(alias="consolidateAfter")
    """How long a node must be empty/underutilized before consolidation (`30s`, `10m`, `Never`).

    Required whenever a disruption block is written."""
    consolidation_policy: (
        Annotated[ConsolidationPolicy, Field(json_schema_extra={"serverDefault": "WhenEmptyOrUnderutilized"})]
        | None
    ) = Field(default=None, alias="consolidationPolicy")
    """Which nodes consolidation may remove. Server default: `WhenEmptyOrUnderutilized`."""


# ----------------------------------------------------------------------------------------------------
# spec.template
# ----------------------------------------------------------------------------------------------------
class NodeClaimTemplateMetadata(KarpenterModel):
    """Labels and annotations Karpenter puts on every node of the pool."""

    annotations: dict[str, str] | None = None
    """Annotations for the nodes."""
    labels: (
        Annotated[dict[str, LabelValue], Field(max_length=100), AfterValidator(_check_node_labels)] | None
    ) = None
    """Labels for the nodes (at most 100); keys in Karpenter's own domains are restricted."""


class NodeClassReference(KarpenterModel):
    """Reference to the provider node class (for AWS an `EC2NodeClass`). `group` and `kind` are immutable."""

    group: Annotated[str, Field(pattern=r"^[^/]*$")]
    """API group of the node class, `karpenter.k8s.aws` for an EC2NodeClass."""
    kind: str
    """Kind of the node class, `EC2NodeClass`."""
    name: str
    """Name of the node class."""

    @model_validator(mode="after")
    def _not_empty(self) -> "NodeClassReference":
        for field in ("group", "kind", "name"):
            if getattr(self, field) == "":
                raise ValueError(f"nodeClassRef.{field} may not be empty")
        return self


class NodeSelectorRequirement(KarpenterModel):
    """A scheduling requirement on a node label, with Karpenter's optional `minValues` flexibility."""

    key: Annotated[str, Field(max_length=316, pattern=TAINT_PART), AfterValidator(_check_label_key)]
    """Label key, e.g. `karpenter.k8s.aws/instance-gpu-count` or `karpenter.sh/capacity-type`."""
    min_values: Annotated[int, Field(ge=1, le=50)] | None = Field(default=None, alias="minValues")
    """(Alpha) minimum number of distinct values of `key` the launch must stay flexible across (`In` only)."""
    operator: RequirementOperator
    """Relation of the label to `values`."""
    values: list[str] | None = None
    """Values: non-empty for `In`; a single non-negative integer for `Gt`/`Lt`/`Gte`/`Lte`.

    The CRD also writes `maxLength: 63` and a label-value `pattern` on this *array*; those keywords apply
    to strings only, so the API server ignores them here, and so does this model."""

    @model_validator(mode="after")
    def _operator_values(self) -> "NodeSelectorRequirement":
        values = self.values or []
        if self.operator == "In" and not values:
            raise ValueError(
                f"requirement on {self.key!r} with operator 'In' must list at least one value "
                "(use 'Exists' to accept any value)"
            )
        number = go_int(values[0]) if len(values) == 1 else None
        if self.operator in ("Gt", "Lt", "Gte", "Lte") and (number is None or number < 0):
            raise ValueError(
                f"requirement on {self.key!r} with operator {self.operator!r} takes exactly one value, "
                f"a non-negative integer written as a string such as '0' (got {values!r})"
            )
        if self.operator == "In" and self.min_values is not None and len(values) < self.min_values:
            raise ValueError(
                f"requirement on {self.key!r} has minValues {self.min_values} but lists only {len(values)} "
                "value(s): list at least minValues values"
            )
        return self


class Taint(KarpenterModel):
    """A node taint (core `v1.Taint`)."""

    effect: TaintEffect
    """What happens to pods that do not tolerate the taint."""
    key: Annotated[str, Field(min_length=1, pattern=TAINT_PART)]
    """Taint key, e.g. `nvidia.com/gpu`."""
    time_added: Annotated[AwareDatetime, Field(strict=False)] | None = Field(default=None, alias="timeAdded")
    """When the taint was added (set by the system for NoExecute taints; programs normally leave it out)."""
    value: Annotated[str, Field(pattern=TAINT_PART)] | None = None
    """Taint value."""

    @classmethod
    def of(cls, key: str, value: str | None = None, effect: TaintEffect = "NoSchedule") -> "Taint":
        """A taint from its three parts, in the usual `key=value:effect` order."""
        return cls(key=key, value=value, effect=effect)


class NodeClaimTemplateSpec(KarpenterModel):
    """The desired shape of every node the pool launches."""

    expire_after: (
        Annotated[str, Field(pattern=_DURATION_OR_NEVER, json_schema_extra={"serverDefault": "720h"})] | None
    ) = Field(default=None, alias="expireAfter")
    """Node lifetime before Karpenter replaces it (`720h`, `Never`). Server default: `720h`."""
    node_class_ref: NodeClassReference = Field(alias="nodeClassRef")
    """The node class (EC2NodeClass) with the AWS-specific settings."""
    requirements: Annotated[list[NodeSelectorRequirement], Field(max_length=100)]
    """Label requirements every node satisfies (instance type, GPU count, capacity type, zone, ...)."""
    startup_taints: list[Taint] | None = Field(default=None, alias="startupTaints")
    """Taints present only while the node starts; a daemon removes them. Pods need not tolerate them."""
    taints: list[Taint] | None = None
    """Taints every node keeps; pods must tolerate them to land on the pool."""
    termination_grace_period: Annotated[str, Field(pattern=r"^([0-9]+(s|m|h))+$")] | None = Field(
        default=None, alias="terminationGracePeriod"
    )
    """Longest drain of a node before pods are deleted regardless of PDBs; unset waits indefinitely."""


class NodeClaimTemplate(KarpenterModel):
    """Template of the NodeClaims (and so nodes) the pool creates."""

    metadata: NodeClaimTemplateMetadata | None = None
    """Labels and annotations for the nodes."""
    spec: NodeClaimTemplateSpec
    """Node shape."""


# ----------------------------------------------------------------------------------------------------
# spec and object
# ----------------------------------------------------------------------------------------------------
class NodePoolSpec(KarpenterModel):
    """Spec of a NodePool."""

    disruption: (
        Annotated[Disruption, Field(json_schema_extra={"serverDefault": {"consolidateAfter": "0s"}})] | None
    ) = None
    """Disruption settings. Server default: `{consolidateAfter: 0s}` (consolidate immediately, 10% budget)."""
    limits: dict[str, int | Quantity] | None = None
    """Upper bounds of the pool's total capacity (`cpu`, `memory`, `nvidia.com/gpu`, `nodes`)."""
    replicas: Annotated[int, Field(ge=0), INT64] | None = None
    """(Alpha) fixed node count: makes the pool static; then only `limits.nodes` and no `weight`."""
    template: NodeClaimTemplate
    """Template of the nodes."""
    weight: Annotated[int, Field(ge=1, le=100), INT32] | None = None
    """Priority among pools (1-100, higher first); unset counts as 0."""

    @model_validator(mode="after")
    def _static_pool(self) -> "NodePoolSpec":
        if self.replicas is None:
            return self
        if self.limits and set(self.limits) != {"nodes"}:
            others = sorted(set(self.limits) - {"nodes"})
            raise ValueError(
                f"a static NodePool (replicas set) supports only 'limits.nodes'; remove limits {others}"
            )
        if self.weight is not None:
            raise ValueError("'weight' is not supported on a static NodePool (replicas set); remove it")
        return self


class NodePool(KarpenterModel):
    """A `karpenter.sh/v1` NodePool. `status` is controller-owned and deliberately not modelled."""

    api_version: Literal["karpenter.sh/v1"] = Field(default="karpenter.sh/v1", alias="apiVersion")
    """Always `karpenter.sh/v1`."""
    kind: Literal["NodePool"] = "NodePool"
    """Always `NodePool`."""
    metadata: ObjectMeta
    """Name, labels and annotations of the NodePool (cluster-scoped)."""
    spec: NodePoolSpec
    """Spec."""
