"""What declared NodePools may cost at once, read from the Karpenter objects themselves (pure; the standard
library only).

`pools.cost` prices a pool from its configuration. This module prices what a stack actually declares: the
`karpenter.sh/v1` NodePool manifests and the `karpenter.sh/v1alpha1` NodeOverlays, as a committed snapshot
records them (`synth plan` compares an old state's worst case with the new one's) and as the policy pack sees
them (which bounds a stack's spend even if the program's own check is bypassed). The tests check that both
ways agree on every committed pool.

Karpenter 1.14.1 semantics (kubernetes-sigs/karpenter v1.14.1):

- a pool may launch each instance type whose labels satisfy every requirement of
  `spec.template.spec.requirements` (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`, `Gte`, `Lte`,
  as `pkg/scheduling/requirement.go` evaluates them: a missing label satisfies only `NotIn` and
  `DoesNotExist`); the labels are the ones `facts.instance_types.instance_labels` knows. A requirement on a
  label the tables do not carry (hypervisor, bandwidth, zone, capacity type, ...) is taken as satisfied, so
  the worst case can only come out higher than Karpenter's, never lower;
- a node counts against each resource of `spec.limits` with its capacity (`pools.capacity`): vCPUs, memory
  less the VM overhead, its GPUs, and for an extended resource what the NodeOverlays matching it say
  (`pkg/controllers/nodeoverlay/store.go`: per resource the overlay of highest weight wins, then the first
  by name). An overlay requirement on a label the tables do not carry does not match (fewer units per node
  again means more nodes under the GPU limit: a higher worst case). A limit on a resource no candidate
  has counts nothing against it;
- prices as in `pools.cost`: us-east-1 on-demand list prices for every capacity type. An overlay's `price`
  or `priceAdjustment` changes what Karpenter prefers, not the bill, and is ignored.
"""

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from facts.instance_types import gpu_instance_types, instance_labels, instance_types
from facts.pricing import on_demand_prices
from facts.quantity import parse_quantity
from pools.spend import GPU, PoolSpend, pool_spend

__all__ = ["DeclaredNode", "candidates", "declared_spend", "declared_spends", "requirement_admits"]

NODEPOOL_KIND = "NodePool"
NODEOVERLAY_KIND = "NodeOverlay"
KARPENTER_GROUP = "karpenter.sh"
"""The API group of both, whatever its version (NodeOverlay is v1alpha1 in Karpenter 1.14.1)."""
NODEPOOL_LABEL = "karpenter.sh/nodepool"


@dataclass(frozen=True)
class DeclaredNode:
    """An instance type a declared pool may launch and what a node of it counts against the pool's limits."""

    instance_type: str
    counts: Mapping[str, Decimal]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, Sequence) and not isinstance(value, str | bytes) else ()


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def requirement_admits(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool | None:
    """Whether a node with `labels` satisfies one requirement (`{key, operator, values}`); None when the
    requirement is on a label `labels` cannot say anything about (`known` labels decide that)."""
    key, operator = requirement.get("key"), requirement.get("operator")
    values = [str(v) for v in _sequence(requirement.get("values"))]
    value = labels.get(str(key))
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt", "Gte", "Lte"):
        have, bound = _integer(value or ""), _integer(values[0]) if len(values) == 1 else None
        if have is None or bound is None:
            return False
        return {"Gt": have > bound, "Lt": have < bound, "Gte": have >= bound, "Lte": have <= bound}[operator]
    return None  # an operator Karpenter's schema refuses: say nothing


def _admits(requirements: Iterable[Mapping[str, Any]], labels: Mapping[str, str], *, unknown: bool) -> bool:
    """Whether every requirement admits `labels`; one on a label outside `KNOWN_LABELS` (and not in `labels`)
    counts as `unknown`."""
    for requirement in requirements:
        key = str(requirement.get("key"))
        if key not in labels and key not in KNOWN_LABELS:
            if not unknown:
                return False
            continue
        if not requirement_admits(requirement, labels):
            return False
    return True


KNOWN_LABELS = frozenset(
    {
        "node.kubernetes.io/instance-type",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        *(
            f"karpenter.k8s.aws/instance-{name}"
            for name in (
                "family", "size", "category", "generation", "cpu", "memory",
                "gpu-name", "gpu-count", "gpu-memory", "gpu-manufacturer",
            )
        ),
        NODEPOOL_LABEL,
    }
)  # fmt: skip
"""Labels `facts.instance_types.instance_labels` (or the pool) gives: where one is missing from a node, that
is a fact (no GPU, no GPU labels), not a gap in the tables."""


def candidates(node_pool: Mapping[str, Any]) -> list[str]:
    """The instance types of the reference a NodePool (its manifest) may launch, in the table's order."""
    requirements = [
        _mapping(r) for r in _sequence(_path(node_pool, "spec", "template", "spec", "requirements"))
    ]
    return [name for name in instance_types() if _admits(requirements, instance_labels(name), unknown=True)]


def _path(value: Any, *keys: str) -> Any:
    for key in keys:
        value = _mapping(value).get(key)
    return value


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return None


def _capacity(name: str) -> dict[str, Decimal]:
    it = instance_types()[name]
    gpu = gpu_instance_types().get(name)
    return {
        "cpu": Decimal(it.vcpus),
        "memory": it.memory_capacity,
        "pods": Decimal(it.max_pods),
        "nvidia.com/gpu": Decimal(gpu.gpu_count if gpu else 0),
    }


def _overlaid(
    name: str, pool: str, template_labels: Mapping[str, str], overlays: Sequence[Mapping[str, Any]]
) -> dict[str, Decimal]:
    """The capacity of a node of `name` in `pool` once the matching NodeOverlays are applied."""
    capacity = _capacity(name)
    labels = {**instance_labels(name), **template_labels, NODEPOOL_LABEL: pool}
    ordered = sorted(
        overlays,
        key=lambda o: (-int(_path(o, "spec", "weight") or 0), str(_path(o, "metadata", "name") or "")),
    )
    set_by_overlay: set[str] = set()
    for overlay in ordered:
        requirements = [_mapping(r) for r in _sequence(_path(overlay, "spec", "requirements"))]
        if not _admits(requirements, labels, unknown=False):
            continue
        for resource, value in _mapping(_path(overlay, "spec", "capacity")).items():
            quantity = _quantity(value)
            if resource not in set_by_overlay and quantity is not None:
                capacity[resource] = quantity
                set_by_overlay.add(resource)
    return capacity


def declared_spend(node_pool: Mapping[str, Any], overlays: Sequence[Mapping[str, Any]] = ()) -> PoolSpend:
    """The worst case and cheapest fill of a declared NodePool (its manifest), with the stack's
    NodeOverlays, at us-east-1 on-demand list prices."""
    # Keyed by the objects' JSON (a value JSON cannot hold by its text, which is how it is read anyway): a
    # plan prices the pools a change leaves alone on both sides, and each search walks every instance type.
    return _declared_spend(json.dumps(_plain([node_pool, overlays]), sort_keys=True, default=str))


def _plain(value: Any) -> Any:
    """`value` with every mapping a dict and every sequence a list (the policy engine's are neither)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


@functools.lru_cache(maxsize=256)
def _declared_spend(objects: str) -> PoolSpend:
    node_pool, overlays = json.loads(objects)
    pool = str(_path(node_pool, "metadata", "name"))
    limits = {
        str(resource): amount
        for resource, value in _mapping(_path(node_pool, "spec", "limits")).items()
        if (amount := _quantity(value)) is not None
    }
    template_labels = {
        str(k): str(v)
        for k, v in _mapping(_path(node_pool, "spec", "template", "metadata", "labels")).items()
    }
    nodes = []
    for name in candidates(node_pool):
        capacity = _overlaid(name, pool, template_labels, overlays)
        nodes.append(DeclaredNode(name, {r: capacity.get(r, Decimal(0)) for r in limits}))
    # The GPU units: nvidia.com/gpu, or under the MIG mixed strategy (overlays zero it) a MIG resource.
    gpu = next(
        (
            r
            for r in sorted(limits, key=lambda r: r != GPU)
            if r.startswith("nvidia.com/") and any(n.counts[r] for n in nodes)
        ),
        GPU,
    )
    return pool_spend(pool, nodes, limits, on_demand_prices(), gpu)


def declared_spends(manifests: Iterable[Mapping[str, Any]]) -> tuple[PoolSpend, ...]:
    """Every Karpenter NodePool among `manifests` (the inputs of resources of any type), priced with the
    NodeOverlays among them, in the order given."""
    objects = list(manifests)
    overlays = [o for o in objects if _karpenter(o, NODEOVERLAY_KIND)]
    return tuple(declared_spend(o, overlays) for o in objects if _karpenter(o, NODEPOOL_KIND))


def _karpenter(obj: Mapping[str, Any], kind: str) -> bool:
    return obj.get("kind") == kind and str(obj.get("apiVersion", "")).split("/")[0] == KARPENTER_GROUP
