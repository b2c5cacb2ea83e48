"""Shared helpers of the observability tests: vendored chart values, PromQL metric names, sample rules."""

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import promql_parser

from components.observability.alerts import alert_groups
from components.observability.dashboards import dashboards, queries
from components.observability.queries import Targets
from config.node_pools import NodePoolConfig
from config.stack import StackConfig, parse_stack_config
from facts.metrics import exporter_of
from pools.alerting import PoolAlerting, pool_alerting
from synth.runner import ProgramRun, stack_config
from synth.snapshot import from_yaml
from tests.helpers import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube-prometheus-stack-88.5.3"

MIG_POOL: dict[str, Any] = {
    "name": "gpu-mig",
    "instanceFamilies": ["p4d"],
    "limits": {"nvidia.com/gpu": "56"},
    "mig": {"profile": "all-1g.5gb"},
}
"""A MIG pool (single strategy: 7 devices per A100 40GB, so a p4d.24xlarge counts 56)."""
BOTTLEROCKET_POOL: dict[str, Any] = {
    "name": "gpu-br",
    "instanceFamilies": ["g6"],
    "ami": "bottlerocket@v1.40.0",
    "limits": {"nvidia.com/gpu": "8"},
}
"""A Bottlerocket pool: no GPU Operator operand runs there, so no DCGM metrics."""
POOLS = ("gpu-inference", "gpu-training", "gpu-mig")
"""prod's two pools as committed, and a MIG pool."""
MIG_POOLS = ("gpu-mig",)
"""The sample pools that partition their GPUs with MIG (so that both utilisation panels are checked)."""
CLUSTER = "ml-prod"


@functools.cache
def prod_config() -> StackConfig:
    """The committed prod stack's configuration, as the program reads it."""
    return parse_stack_config(stack_config("prod"))


@functools.cache
def sample_pools() -> dict[str, PoolAlerting]:
    """prod's GPU pools, the MIG pool and the Bottlerocket pool, as the alerts see them."""
    config = prod_config()
    pools = [*config.gpu_pools, *(NodePoolConfig.model_validate(p) for p in (MIG_POOL, BOTTLEROCKET_POOL))]
    return {p.name: pool_alerting(p, config.gpu_operator, config.gpu_node_guard) for p in pools}


IN_CLUSTER_POOL: dict[str, Any] = {
    "name": "gpu-a",
    "instanceFamilies": ["g6"],
    "limits": {"nvidia.com/gpu": "8"},
}


@functools.cache
def in_cluster_stack() -> ProgramRun:
    """The real program with the `inCluster` backend and one GPU pool (no committed stack uses it)."""
    return run(nodePools=[IN_CLUSTER_POOL], observability={"backend": "inCluster"})


def _load(relative: str) -> dict[str, Any]:
    loaded: dict[str, Any] = from_yaml((FIXTURES / relative).read_text())
    return loaded


@functools.cache
def chart_values() -> dict[str, Any]:
    """`charts/kube-prometheus-stack/values.yaml` of 88.5.3."""
    return _load("chart-values.yaml")


@functools.cache
def grafana_values() -> dict[str, Any]:
    """The Grafana 12.11.1 subchart's `values.yaml`."""
    return _load("grafana/chart-values.yaml")


@functools.cache
def kube_state_metrics_values() -> dict[str, Any]:
    """The kube-state-metrics 8.4.0 subchart's `values.yaml`."""
    return _load("kube-state-metrics/chart-values.yaml")


def _vector_selectors(expr: str) -> Iterator[Any]:
    """Every vector selector of a PromQL expression, parsed by a real PromQL parser."""

    def walk(node: Any) -> Iterator[Any]:
        if type(node).__name__ == "VectorSelector":
            yield node
        for child in ("lhs", "rhs", "expr", "vector_selector", "param"):
            if getattr(node, child, None) is not None and not isinstance(
                getattr(node, child), (int, float, str)
            ):
                yield from walk(getattr(node, child))
        for arg in getattr(node, "args", None) or []:
            yield from walk(arg)

    return walk(promql_parser.parse(expr))


def selected_metrics(expr: str) -> set[str]:
    """Metric names of every vector selector in a PromQL expression."""
    return {selector.name for selector in _vector_selectors(expr)}


def label_matchers(expr: str, metric: str) -> list[dict[str, tuple[str, str]]]:
    """Per selector of `metric` in an expression: label -> (operator, value), e.g. `("=~", "a|b")`."""
    operators = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}
    return [
        {m.name: (operators[str(m.op)], m.value) for m in selector.matchers.matchers}
        for selector in _vector_selectors(expr)
        if selector.name == metric
    ]


def unknown_metrics(expr: str) -> list[str]:
    """Metric names an expression selects that no pinned exporter exports and no recording rule of the
    stack records."""
    recorded = {rule["record"] for rule in all_recording_rules()}
    return sorted(n for n in selected_metrics(expr) if exporter_of(n) is None and n not in recorded)


def targets(
    interruption_handling: bool = True, gpu_pools: Sequence[str] = POOLS, *, managed: bool = True
) -> Targets:
    """What a stack with `gpu_pools` (of `sample_pools`), Karpenter in `kube-system` and the defaults
    elsewhere scrapes."""
    return Targets(
        pools=tuple(sample_pools()[name] for name in gpu_pools),
        cluster=CLUSTER,
        managed=managed,
        monitoring_namespace="monitoring",
        gpu_operator_namespace="gpu-operator",
        gpu_node_guard_namespace="gpu-node-guard",
        gpu_node_guard_job="gpu-node-guard-metrics",
        karpenter_namespace="kube-system",
        karpenter_job="karpenter",
        interruption_handling=interruption_handling,
    )


def sample_alert_groups(
    interruption_handling: bool = True, gpu_pools: Sequence[str] = POOLS, *, managed: bool = True
) -> list[dict[str, Any]]:
    """The alert groups of a stack with `gpu_pools` and Karpenter in `kube-system`."""
    return alert_groups(targets(interruption_handling, gpu_pools, managed=managed))


def all_alert_rules(interruption_handling: bool = True, *, managed: bool = True) -> list[dict[str, Any]]:
    """The alerting rules (not the recording rules they read)."""
    return [
        rule
        for group in sample_alert_groups(interruption_handling, managed=managed)
        for rule in group["rules"]
        if "alert" in rule
    ]


def all_recording_rules() -> list[dict[str, Any]]:
    return [rule for group in sample_alert_groups() for rule in group["rules"] if "record" in rule]


def all_dashboards() -> dict[str, dict[str, Any]]:
    return dashboards(targets(gpu_pools=(*POOLS, "gpu-br")), datasource_type="prometheus")


def every_expression() -> Iterator[tuple[str, str]]:
    """(where, expression) of every alert rule and dashboard query the program writes."""
    for rule in all_alert_rules():
        yield f"alert {rule['alert']}", rule["expr"]
    for rule in all_recording_rules():
        yield f"recording rule {rule['record']}", rule["expr"]
    for name, dashboard in all_dashboards().items():
        for expr in queries(dashboard):
            yield f"dashboard {name}", expr
