"""Operands and NFD workers must tolerate every taint a GPU pool puts on its nodes, keeping chart defaults."""

import json
from collections.abc import Mapping
from typing import Any

import pytest

from components.gpu_operator_values import (
    CHART_DAEMONSETS_TOLERATIONS,
    CHART_NFD_WORKER_TOLERATIONS,
    nfd_worker_tolerations,
    operand_tolerations,
    tolerates,
)
from config.kubernetes import GPU_TAINT, Taint
from tests.gpu_operator.builders import pool, taint, values


@pytest.mark.parametrize(
    ("toleration", "tainted", "expected"),
    [
        ({"key": "a", "operator": "Exists", "effect": "NoSchedule"}, taint("a", "x"), True),
        ({"key": "a", "operator": "Exists", "effect": "NoSchedule"}, taint("a"), True),
        ({"key": "a", "operator": "Exists", "effect": "NoSchedule"}, taint("a", "x", "NoExecute"), False),
        ({"key": "a", "operator": "Exists"}, taint("a", "x", "NoExecute"), True),
        ({"key": "a", "operator": "Exists", "effect": ""}, taint("a", "x", "PreferNoSchedule"), True),
        ({"key": "a", "operator": "Equal", "value": "x", "effect": "NoSchedule"}, taint("a", "x"), True),
        ({"key": "a", "operator": "Equal", "value": "y", "effect": "NoSchedule"}, taint("a", "x"), False),
        ({"key": "a", "value": "x"}, taint("a", "x"), True),  # no operator means Equal
        ({"key": "a", "operator": "Equal", "value": ""}, taint("a"), True),  # no taint value is ""
        ({"key": "a", "operator": "Equal"}, taint("a"), True),
        ({"key": "a", "operator": "Equal"}, taint("a", "x"), False),
        ({"key": "b", "operator": "Exists"}, taint("a"), False),
        ({"operator": "Exists"}, taint("anything", "x", "NoExecute"), True),  # empty key + Exists: all
        ({"operator": "Exists", "effect": "NoSchedule"}, taint("anything", "x", "NoExecute"), False),
        ({"key": "a", "operator": "Lt", "value": "5"}, taint("a", "3"), False),
    ],
)
def test_tolerates_has_kubernetes_semantics(
    toleration: dict[str, str], tainted: Taint, expected: bool
) -> None:
    assert tolerates([toleration], tainted) is expected


def test_tolerates_any_of_several() -> None:
    assert tolerates([{"key": "b", "operator": "Exists"}, {"key": "a", "operator": "Exists"}], taint("a"))
    assert not tolerates([], taint("a"))


def _no_duplicates(tolerations: list[dict[str, Any]]) -> bool:
    dumped = [json.dumps(t, sort_keys=True) for t in tolerations]
    return len(dumped) == len(set(dumped))


POOLS = [
    pool("default-gpu"),  # GPU_TAINT nvidia.com/gpu=true:NoSchedule
    pool(
        "team-ml",
        taints=(
            GPU_TAINT,
            taint("example.com/team", "ml"),
            taint("example.com/dedicated", effect="NoExecute"),
        ),
        startup_taints=(taint("node.cilium.io/agent-not-ready", "true", "NoExecute"),),
    ),
    pool(
        "inference",
        "bottlerocket",
        taints=(
            taint("example.com/team", "inference"),
            taint("example.com/spot", "true", "PreferNoSchedule"),
        ),
        startup_taints=(taint("example.com/warming"),),
    ),
]
ALL_TAINTS = [t for p in POOLS for t in (*p.taints, *p.startup_taints)]


@pytest.mark.parametrize(
    ("build", "defaults"),
    [
        (operand_tolerations, CHART_DAEMONSETS_TOLERATIONS),
        (nfd_worker_tolerations, CHART_NFD_WORKER_TOLERATIONS),
    ],
)
def test_every_pool_taint_is_tolerated_and_defaults_kept(
    build: Any, defaults: tuple[Mapping[str, str], ...]
) -> None:
    tolerations = build(POOLS)
    for t in ALL_TAINTS:
        assert tolerates(tolerations, t), t
    assert tolerations[: len(defaults)] == [dict(d) for d in defaults]
    assert _no_duplicates(tolerations)


def test_operand_tolerations_exact() -> None:
    # The GPU taint is covered by the chart's nvidia.com/gpu Exists toleration; the rest sorted by key.
    assert operand_tolerations(POOLS) == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "example.com/dedicated", "operator": "Exists", "effect": "NoExecute"},
        {"key": "example.com/spot", "operator": "Equal", "value": "true", "effect": "PreferNoSchedule"},
        {"key": "example.com/team", "operator": "Equal", "value": "inference", "effect": "NoSchedule"},
        {"key": "example.com/team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "example.com/warming", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "node.cilium.io/agent-not-ready",
            "operator": "Equal",
            "value": "true",
            "effect": "NoExecute",
        },
    ]


def test_an_exists_toleration_covers_valued_taints_of_its_key() -> None:
    pools = [
        pool("a", taints=(taint("example.com/team", "x"),)),
        pool("b", taints=(taint("example.com/team"),)),
    ]
    assert operand_tolerations(pools) == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "example.com/team", "operator": "Exists", "effect": "NoSchedule"},
    ]


def test_a_gpu_taint_with_another_effect_is_added() -> None:
    pools = [pool("a", taints=(taint("nvidia.com/gpu", "true", "NoExecute"),))]
    assert operand_tolerations(pools)[1:] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoExecute"}
    ]


def test_values_carry_both_lists() -> None:
    v = values(POOLS)
    assert v["daemonsets"]["tolerations"] == operand_tolerations(POOLS)
    assert v["node-feature-discovery"]["worker"]["tolerations"] == nfd_worker_tolerations(POOLS)
    for t in ALL_TAINTS:
        assert tolerates(v["daemonsets"]["tolerations"], t)
        assert tolerates(v["node-feature-discovery"]["worker"]["tolerations"], t)


def test_no_pools_keeps_the_chart_defaults() -> None:
    assert operand_tolerations([]) == [dict(t) for t in CHART_DAEMONSETS_TOLERATIONS]
    assert nfd_worker_tolerations([]) == [dict(t) for t in CHART_NFD_WORKER_TOLERATIONS]
