"""Spend read from the declared NodePools and NodeOverlays (`pools.declared`, what `synth plan` and the
policy pack use) agrees with spend from the configuration (`pools.cost`): two derivations of the candidates
and their counts, one from the config's own instance-type filters, one by evaluating the objects'
requirements as Karpenter does."""

from types import MappingProxyType
from typing import Any

import pytest

from components.karpenter_api import to_manifest
from components.node_pools import pool_objects
from config.stack import StackConfig, parse_stack_config
from pools.cost import stack_cost
from pools.declared import candidates, declared_spends, requirement_admits
from pools.spend import PoolSpend
from synth.runner import ROOT, stack_config, stacks
from synth.snapshot import from_yaml
from tests.helpers import config


def manifests(stack: StackConfig) -> list[dict[str, Any]]:
    """The NodePools and NodeOverlays the program would declare for `stack` (its pure translation)."""
    objects = pool_objects(stack.node_pools, cluster_name="ml-test", tags={}, gpu_operator=stack.gpu_operator)
    return [to_manifest(o.node_pool) for o in objects] + [to_manifest(o) for o in stack.node_overlays]


def summary(spend: PoolSpend) -> tuple[Any, ...]:
    worst, fill = spend.worst_case, spend.cheapest_fill
    return (
        spend.pool,
        spend.bounded,
        worst.usd_per_hour if worst else None,
        dict(worst.nodes) if worst else None,
        fill.usd_per_hour if fill else None,
        tuple(spend.unpriced),
    )


def by_config(stack: StackConfig) -> list[tuple[Any, ...]]:
    cost = stack_cost(stack.node_pools, stack.gpu_operator, overlays=stack.karpenter.gpu_sharing_overlays)
    return [summary(p.spend) for p in cost.pools]


@pytest.mark.parametrize("name", stacks())
def test_the_committed_snapshots_objects_price_as_the_configuration_does(name: str) -> None:
    entries = from_yaml((ROOT / "snapshots" / name / "resources.yaml").read_text())
    declared = [e["inputs"] for e in entries if e["type"].startswith("kubernetes:karpenter.sh/")]
    assert [summary(s) for s in declared_spends(declared)] == by_config(
        parse_stack_config(stack_config(name))
    )


VARIANTS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "time-slicing": (
        [{"name": "ts", "instanceFamilies": ["g6", "g5"], "timeSlicing": {"replicas": 3},
          "limits": {"nvidia.com/gpu": "30", "cpu": "300"}}],
        {},
    ),
    "mig single": (
        [{"name": "mig", "instanceFamilies": ["p4d", "p5"], "mig": {"profile": "all-1g.10gb"},
          "limits": {"nvidia.com/gpu": "112"}}],
        {},
    ),
    "mig mixed": (
        [{"name": "mig", "instanceFamilies": ["p4d", "p5"], "mig": {"profile": "all-1g.10gb"},
          "limits": {"nvidia.com/gpu": "112"}}],
        {"gpuOperator": {"mig": {"strategy": "mixed"}}},
    ),
    "no overlays": (
        [{"name": "ts", "instanceFamilies": ["g6"], "timeSlicing": {"replicas": 4},
          "limits": {"nvidia.com/gpu": "16"}}],
        {"karpenter": {"gpuSharingOverlays": False}},
    ),
    "efa, gpu names and counts": (
        [{"name": "train", "gpuNames": ["h100", "a100"], "gpuCount": {"min": 8}, "efa": True,
          "zone": "us-west-2a", "placementGroup": True, "limits": {"nvidia.com/gpu": "24", "memory": "5Ti"}}],
        {},
    ),
    "cpu pools": (
        [{"name": "burst", "kind": "cpu", "limits": {"cpu": "200", "memory": "800Gi"}},
         {"name": "m7", "kind": "cpu", "instanceFamilies": ["m7i", "m7a"], "limits": {"cpu": "96"}},
         {"name": "arm", "kind": "cpu", "architecture": "arm64",
          "instanceTypes": ["c7g.large", "c7g.2xlarge"], "limits": {"cpu": "10"}}],
        {},
    ),
    "unpriced candidates": (
        [{"name": "g7", "instanceFamilies": ["g7", "g6e"], "limits": {"nvidia.com/gpu": "8"}}],
        {},
    ),
}  # fmt: skip


@pytest.mark.parametrize("variant", VARIANTS)
def test_declared_objects_price_as_their_configuration_does(variant: str) -> None:
    pools, sections = VARIANTS[variant]
    stack = parse_stack_config(config(nodePools=pools, **sections))
    assert [summary(s) for s in declared_spends(manifests(stack))] == by_config(stack)


def test_a_label_the_tables_lack_admits_every_type_and_keeps_an_overlay_from_applying() -> None:
    stack = parse_stack_config(config(nodePools=VARIANTS["time-slicing"][0]))
    (node_pool, overlay) = manifests(stack)[:2]
    requirements = node_pool["spec"]["template"]["spec"]["requirements"]
    before = candidates(node_pool)
    requirements.append(
        {"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "In", "values": ["nitro"]}
    )
    assert candidates(node_pool) == before
    # An overlay that only applies with a label the tables lack does not apply: each node counts one GPU,
    # not three slices, so the pool may hold more nodes under its limit.
    with_overlay = declared_spends([node_pool, overlay])[0]
    overlay["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "In", "values": ["nitro"]}
    )
    without = declared_spends([node_pool, overlay])[0]
    assert with_overlay.worst_case is not None
    assert without.worst_case is not None
    assert without.worst_case.usd_per_hour > with_overlay.worst_case.usd_per_hour


def _frozen(value: Any) -> Any:
    """`value` as the policy engine hands objects over: mappings that are not dicts, tuples for lists."""
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def test_objects_in_other_containers_price_as_their_dicts_and_lists_do() -> None:
    """`declared_spend` remembers what it priced by the objects' JSON: the same objects in other containers
    are the same pool, and a pool whose limit changes is priced anew."""
    stack = parse_stack_config(config(nodePools=VARIANTS["time-slicing"][0]))
    objects = manifests(stack)
    frozen = [summary(s) for s in declared_spends(_frozen(objects))]
    assert frozen == [summary(s) for s in declared_spends(objects)] == by_config(stack)
    objects[0]["spec"]["limits"]["nvidia.com/gpu"] = "60"
    (raised,) = declared_spends(objects)
    assert summary(raised) != frozen[0]
    assert raised.limits["nvidia.com/gpu"] == 60


@pytest.mark.parametrize(
    ("operator", "values", "labels", "admits"),
    [
        ("In", ["g5", "g6"], {"k": "g6"}, True),
        ("In", ["g5"], {}, False),
        ("NotIn", ["g5"], {}, True),
        ("NotIn", ["g5"], {"k": "g5"}, False),
        ("Exists", [], {"k": "0"}, True),
        ("DoesNotExist", [], {"k": "0"}, False),
        ("Gt", ["7"], {"k": "8"}, True),
        ("Gt", ["8"], {"k": "8"}, False),
        ("Lt", ["2"], {"k": "1"}, True),
        ("Gte", ["8"], {"k": "8"}, True),
        ("Lte", ["1"], {"k": "2"}, False),
        ("Gt", ["0"], {}, False),
        ("Gt", ["0"], {"k": "a10g"}, False),
    ],
)
def test_requirements_evaluate_as_kubernetes_node_selectors(
    operator: str, values: list[str], labels: dict[str, str], admits: bool
) -> None:
    assert requirement_admits({"key": "k", "operator": operator, "values": values}, labels) is admits
