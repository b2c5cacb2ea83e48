"""`karpenter.sh/v1alpha1` NodeOverlay as of Karpenter 1.14.1: every spec field of the CRD, and its CEL rules.

Source of truth: `tests/fixtures/karpenter-1.14.1/crds/karpenter.sh_nodeoverlays.yaml`. A NodeOverlay changes
what Karpenter's scheduling simulation believes about the instance types its `requirements` select (their
price, and extended resources in `capacity`); nothing on the nodes changes. The controller applies overlays
only with the alpha `nodeOverlay` feature gate on. `status` is controller-owned and not modelled.

CEL rules of the CRD and where they live here:

- requirement keys: restricted domain `karpenter.sh` (but `karpenter.sh/capacity-type` and
  `karpenter.sh/nodepool` allowed), restricted `kubernetes.io/hostname`, restricted domain `karpenter.k8s.aws`
  (but its well-known instance labels allowed, a shorter list than a NodePool's) -> `NodeOverlayRequirement`
- requirements: `In` and `NotIn` need values, `Gt`/`Lt`/`Gte`/`Lte` exactly one non-negative integer
  -> `NodeOverlayRequirement`
- capacity: not `cpu`, `memory`, `ephemeral-storage` or `pods` -> `NodeOverlaySpec`
- `price` and `priceAdjustment` not together -> `NodeOverlaySpec`

How the 1.14.1 controller merges overlays (sigs.k8s.io/karpenter @ 6e7eab7a0f48, the version Karpenter AWS
1.14.1 vendors; `pkg/controllers/nodeoverlay/`, `pkg/cloudprovider/types.go`): per NodePool and instance type,
overlays are applied in descending `weight` (unset = 0); a resource already set by a heavier overlay is kept;
two overlays of equal weight setting the same resource of the same instance type conflict, and the later one
(by name) is marked `ValidationSucceeded=False` and not applied. `capacity` is merged with `lo.Assign` over
the instance type's own capacity, so it also *replaces* an extended resource the instance type already reports
(such as `nvidia.com/gpu`), despite the CRD's description saying it only adds.
"""

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, model_validator

from components.karpenter_api.common import (
    INT32,
    KARPENTER_K8S_AWS_INSTANCE_LABELS,
    TAINT_PART,
    KarpenterModel,
    ObjectMeta,
    Quantity,
    go_int,
    label_domain,
)
from components.karpenter_api.nodepool import RequirementOperator

__all__ = [
    "NodeOverlay",
    "NodeOverlayRequirement",
    "NodeOverlaySpec",
    "overlay_label_key_problem",
]

_KARPENTER_SH_ALLOWED: Final = frozenset({"karpenter.sh/capacity-type", "karpenter.sh/nodepool"})
_KARPENTER_K8S_AWS_ALLOWED: Final = KARPENTER_K8S_AWS_INSTANCE_LABELS
"""The `karpenter.k8s.aws` labels the NodeOverlay CRD accepts in requirements (verbatim from its CEL rule)."""

RESTRICTED_CAPACITY: Final = ("cpu", "memory", "ephemeral-storage", "pods")
"""Resources `capacity` may not set (the CRD's rule; the controller's `WellKnownResources` are the same)."""

PRICE_PATTERN: Final = r"^\d+(\.\d+)?$"
PRICE_ADJUSTMENT_PATTERN: Final = (
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)"  # split to fit the line length
    r"|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
)


def overlay_label_key_problem(key: str) -> str | None:
    """Why the NodeOverlay CRD refuses `key` in a requirement, or None when it accepts it."""
    if key not in _KARPENTER_SH_ALLOWED and label_domain(key).endswith("karpenter.sh"):
        return (
            f"{key!r} uses the restricted label domain 'karpenter.sh'; of that domain a NodeOverlay may "
            "select only 'karpenter.sh/capacity-type' and 'karpenter.sh/nodepool'"
        )
    if key == "kubernetes.io/hostname":
        return "'kubernetes.io/hostname' is restricted: an overlay applies to instance types, not to nodes"
    if key not in _KARPENTER_K8S_AWS_ALLOWED and label_domain(key).endswith("karpenter.k8s.aws"):
        return (
            f"{key!r} uses the restricted label domain 'karpenter.k8s.aws'; a NodeOverlay may select only "
            "its well-known instance labels (such as 'karpenter.k8s.aws/instance-gpu-count'), a shorter list "
            "than a NodePool's"
        )
    return None


def _check_key(key: str) -> str:
    if problem := overlay_label_key_problem(key):
        raise ValueError(problem)
    return key


def _check_capacity(capacity: dict[str, int | str]) -> dict[str, int | str]:
    restricted = sorted(set(capacity) & set(RESTRICTED_CAPACITY))
    if restricted:
        raise ValueError(
            f"capacity may not set {', '.join(restricted)}: a NodeOverlay adjusts extended resources only "
            f"(not {', '.join(RESTRICTED_CAPACITY)})"
        )
    return capacity


class NodeOverlayRequirement(KarpenterModel):
    """A requirement selecting the instance types (within NodePools) an overlay applies to."""

    key: Annotated[str, Field(max_length=316, pattern=TAINT_PART), AfterValidator(_check_key)]
    """Label key: a well-known label (`karpenter.sh/nodepool`, `karpenter.k8s.aws/instance-gpu-count`, ...) or
    a label of the NodePool's template."""
    operator: RequirementOperator
    """Relation of the label to `values`."""
    values: list[str] | None = None
    """Values: non-empty for `In` and `NotIn`; a single non-negative integer for `Gt`/`Lt`/`Gte`/`Lte`.

    As in the NodePool CRD, `maxLength` and `pattern` are written on this *array*, where the API server does
    not apply them."""

    @model_validator(mode="after")
    def _operator_values(self) -> "NodeOverlayRequirement":
        values = self.values or []
        if self.operator in ("In", "NotIn") and not values:
            raise ValueError(
                f"requirement on {self.key!r} with operator {self.operator!r} must list at least one value "
                "(use 'Exists' or 'DoesNotExist' to test the label alone)"
            )
        number = go_int(values[0]) if len(values) == 1 else None
        if self.operator in ("Gt", "Lt", "Gte", "Lte") and (number is None or number < 0):
            raise ValueError(
                f"requirement on {self.key!r} with operator {self.operator!r} takes exactly one value, "
                f"a non-negative integer written as a string such as '0' (got {values!r})"
            )
        return self


class NodeOverlaySpec(KarpenterModel):
    """What an overlay changes, and for which instance types."""

    capacity: Annotated[dict[str, int | Quantity], AfterValidator(_check_capacity)] | None = None
    """Extended resources (resource -> quantity) the selected instance types offer in the simulation; replaces
    a value the instance type reports itself (see the module docstring)."""
    price: Annotated[str, Field(pattern=PRICE_PATTERN)] | None = None
    """Price that replaces the selected offerings' price (`"5.00"`)."""
    price_adjustment: Annotated[str, Field(pattern=PRICE_ADJUSTMENT_PATTERN)] | None = Field(
        default=None, alias="priceAdjustment"
    )
    """Change of the selected offerings' price: `+0.5`, `-1.2`, `+10%`, `-15%` (at most `-100%`)."""
    requirements: Annotated[list[NodeOverlayRequirement], Field(max_length=100)]
    """Which instance types the overlay applies to (ANDed); an empty list applies it to every simulation."""
    weight: Annotated[int, Field(ge=1, le=10000), INT32] | None = None
    """Priority among overlays setting the same thing (higher first); unset counts as 0."""

    @model_validator(mode="after")
    def _one_price(self) -> "NodeOverlaySpec":
        if self.price is not None and self.price_adjustment is not None:
            raise ValueError(
                "set 'price' or 'priceAdjustment', not both: one replaces the price, the other changes it"
            )
        return self


class NodeOverlay(KarpenterModel):
    """A `karpenter.sh/v1alpha1` NodeOverlay (cluster-scoped); `status` is controller-owned, not modelled."""

    api_version: Literal["karpenter.sh/v1alpha1"] = Field(default="karpenter.sh/v1alpha1", alias="apiVersion")
    """Always `karpenter.sh/v1alpha1`."""
    kind: Literal["NodeOverlay"] = "NodeOverlay"
    """Always `NodeOverlay`."""
    metadata: ObjectMeta
    """Name, labels and annotations of the overlay."""
    spec: NodeOverlaySpec
    """Spec."""
