"""EfaDevicePlugin: the AWS EFA device plugin chart, declared only for stacks with an `efa: true` pool.

The values are checked against the vendored chart (`tests/fixtures/aws-efa-k8s-device-plugin-v0.5.20/`):
every key set exists there, and what the chart's defaults mean for these values is pinned.
"""

import functools
from pathlib import Path
from typing import Any

import pytest

from components import yaml_text
from components.efa_device_plugin import (
    CHART_TOLERATIONS,
    EFA_NODE_SELECTOR,
    NAMESPACE,
    RELEASE_NAME,
    NoEfaPoolError,
    efa_device_plugin_values,
    efa_instance_types,
)
from components.gpu_operator_values import tolerates
from components.node_pools import EFA_LABEL
from config.efa_device_plugin import CHART_NAME, CHART_REPOSITORY, DEFAULT_VERSION
from config.errors import ConfigError
from config.kubernetes import Taint
from config.node_pools import NodePoolConfig
from config.stack import StackConfig, parse_stack_config
from synth.runner import ProgramRun, Registration, stack_config
from tests.gpu_operator.helpers import merged, unknown_keys
from tests.helpers import run, run_failing

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "aws-efa-k8s-device-plugin-v0.5.20"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
COMPONENT = "gpu-eks:efa_device_plugin:EfaDevicePlugin"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

TRAINING_POOL: dict[str, Any] = {
    "name": "train",
    "instanceFamilies": ["p5"],
    "efa": True,
    "zone": "us-west-2a",
    "taints": [{"key": "nvidia.com/gpu", "value": "true"}, {"key": "example.com/team"}],
    "mig": {"profile": "all-1g.10gb"},
    "limits": {"nvidia.com/gpu": "16"},
}
"""An EFA pool with a valueless taint and (MIG) a startup taint; p5 without a GPU count includes
p5.4xlarge."""
INFERENCE_POOL: dict[str, Any] = {
    "name": "serve",
    "instanceFamilies": ["g6"],
    "limits": {"nvidia.com/gpu": "8"},
}


@functools.cache
def chart_values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml_text.load((FIXTURES / "chart-values.yaml").read_text())
    return loaded


@functools.cache
def chart_metadata() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml_text.load((FIXTURES / "Chart.yaml").read_text())
    return loaded


def _config(stack: str) -> StackConfig:
    return parse_stack_config(stack_config(stack))


def _pools(*raw: dict[str, Any]) -> tuple[NodePoolConfig, ...]:
    return tuple(NodePoolConfig.model_validate(p) for p in raw)


def _release(result: ProgramRun) -> Registration:
    return result.one(RELEASE, "efa-device-plugin")


def _affinity_terms(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The node affinity the chart's template renders from `supportedInstanceLabels` (one term per key)."""
    labels = merged(chart_values(), values)["supportedInstanceLabels"]
    return [
        {
            "matchExpressions": [
                {"key": key, "operator": "In", "values": labels["values"]},
                {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]},
            ]
        }
        for key in labels["keys"]
    ]


# --- the vendored chart -------------------------------------------------------------------------


def test_vendored_chart_is_the_default_version() -> None:
    assert chart_metadata()["name"] == CHART_NAME
    assert chart_metadata()["version"] == DEFAULT_VERSION


def test_chart_defaults_these_values_rely_on() -> None:
    """A chart bump that changes one of these shows here."""
    chart = chart_values()
    assert [dict(t) for t in CHART_TOLERATIONS] == chart["tolerations"] == []
    assert chart["nodeSelector"] == {}  # runs on every node whose instance type is in the list
    assert chart["supportedInstanceLabels"]["keys"] == [INSTANCE_TYPE]
    # The chart's list lags Karpenter's instance-type data: an EFA pool may launch types missing from it.
    assert {"p5.4xlarge", "p6-b300.48xlarge"}.isdisjoint(chart["supportedInstanceLabels"]["values"])


@pytest.mark.parametrize(
    "values",
    [
        efa_device_plugin_values(_pools(TRAINING_POOL)),
        efa_device_plugin_values(_pools(TRAINING_POOL, INFERENCE_POOL, {**TRAINING_POOL, "name": "b"})),
    ],
    ids=["one-pool", "mixed-pools"],
)
def test_every_key_exists_in_the_vendored_chart(values: dict[str, Any]) -> None:
    assert list(unknown_keys(values, chart_values())) == []
    for key, value in values.items():
        assert type(value) is type(chart_values()[key]), key


def test_misspelt_keys_are_caught() -> None:
    assert list(unknown_keys({"toleration": []}, chart_values())) == ["toleration"]
    assert list(unknown_keys({"supportedInstanceLabels": {"value": []}}, chart_values())) == [
        "supportedInstanceLabels.value"
    ]
    assert list(unknown_keys({"nodeSelector": {"any/label": "x"}}, chart_values())) == []


# --- values -------------------------------------------------------------------------------------


def test_values_for_an_efa_pool() -> None:
    values = efa_device_plugin_values(_pools(TRAINING_POOL, INFERENCE_POOL))
    assert values["nodeSelector"] == {EFA_LABEL: "true"} == EFA_NODE_SELECTOR
    assert values["tolerations"] == [
        {"key": "example.com/team", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "gpu-eks.io/mig-pending", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    ]
    # Only the EFA pool's types (p5 sizes with EFA), not the inference pool's g6.
    assert values["supportedInstanceLabels"] == {"values": ["p5.48xlarge", "p5.4xlarge"]}


def test_every_taint_and_startup_taint_of_every_efa_pool_is_tolerated() -> None:
    other = {
        **TRAINING_POOL,
        "name": "other",
        "instanceFamilies": ["p4d"],
        "taints": [{"key": "example.com/team", "value": "research"}, {"key": "x/y", "effect": "NoExecute"}],
    }
    del other["mig"]
    pools = _pools(TRAINING_POOL, other)
    tolerations = efa_device_plugin_values(pools)["tolerations"]
    for pool in pools:
        for taint in (*pool.effective_taints, *pool.effective_startup_taints):
            assert tolerates(tolerations, taint), (pool.name, taint)
    # `example.com/team` Exists already covers the valued taint: no redundant entry.
    assert [t["key"] for t in tolerations].count("example.com/team") == 1


def test_efa_pool_with_default_taint_gets_the_gpu_toleration() -> None:
    (pool,) = _pools({k: v for k, v in TRAINING_POOL.items() if k not in ("taints", "mig")})
    assert efa_device_plugin_values([pool])["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]


def test_the_affinity_covers_every_type_an_efa_pool_may_launch() -> None:
    pools = _pools(TRAINING_POOL, {**TRAINING_POOL, "name": "b300", "instanceFamilies": ["p6-b300"]})
    (term,) = _affinity_terms(efa_device_plugin_values(pools))
    allowed = set(term["matchExpressions"][0]["values"])
    launchable = {it.name for pool in pools for it in pool.candidates()}
    assert launchable == allowed
    assert {"p5.4xlarge", "p6-b300.48xlarge"} <= allowed  # missing from the chart's own list


def test_without_an_efa_pool_there_are_no_values() -> None:
    with pytest.raises(NoEfaPoolError, match="no pool has efa: true"):
        efa_device_plugin_values(_pools(INFERENCE_POOL))
    assert efa_instance_types(_pools(INFERENCE_POOL)) == []


# --- the committed stacks -----------------------------------------------------------------------


def test_prod_declares_the_release(prod: ProgramRun) -> None:
    release = _release(prod)
    inputs = release.inputs
    assert inputs["name"] == RELEASE_NAME == "aws-efa-k8s-device-plugin"
    assert inputs["chart"] == "aws-efa-k8s-device-plugin"
    assert inputs["version"] == "v0.5.20"
    assert inputs["repositoryOpts"] == {"repo": CHART_REPOSITORY}
    assert CHART_REPOSITORY == "https://aws.github.io/eks-charts"
    assert inputs["namespace"] == NAMESPACE == "kube-system"
    assert inputs["createNamespace"] is False
    assert inputs["cleanupOnFail"] is True
    for off in ("skipAwait", "atomic", "reuseValues", "allowNullValues"):
        assert not inputs.get(off), off
    assert inputs["values"] == efa_device_plugin_values(_config("prod").efa_pools)
    provider = prod.one("pulumi:providers:kubernetes")
    assert release.provider == provider.name
    node_group = prod.one("aws:eks/nodeGroup:NodeGroup")
    # Exactly the system node group: anything else added here is an ordering decision for review.
    assert release.dependencies == [node_group.urn]
    component = prod.one(COMPONENT)
    assert release.parent == component.urn
    assert component.name == "efa-device-plugin"


def test_prod_training_pool_taints_are_tolerated(prod: ProgramRun) -> None:
    tolerations = _release(prod).inputs["values"]["tolerations"]
    (training,) = _config("prod").efa_pools
    assert training.name == "gpu-training"
    for taint in (
        Taint(key="nvidia.com/gpu", value="true"),
        Taint(key="gpu-eks.io/workload", value="training"),
    ):
        assert taint in training.effective_taints
        assert tolerates(tolerations, taint), taint
    for taint in (*training.effective_taints, *training.effective_startup_taints):
        assert tolerates(tolerations, taint), taint


def test_prod_plugin_lands_on_the_training_nodes_only(prod: ProgramRun) -> None:
    values = _release(prod).inputs["values"]
    pools = {p.inputs["metadata"]["name"]: p.inputs["spec"]["template"] for p in prod.of_type(NODEPOOL)}
    selector = values["nodeSelector"].items()
    assert selector <= pools["gpu-training"]["metadata"]["labels"].items()
    assert not selector <= pools["gpu-inference"]["metadata"]["labels"].items()
    (required,) = (r for r in pools["gpu-training"]["spec"]["requirements"] if r["key"] == INSTANCE_TYPE)
    (term,) = _affinity_terms(values)
    assert term["matchExpressions"][0]["values"] == required["values"] == ["p4d.24xlarge", "p5.48xlarge"]


def test_dev_has_no_efa_pool_and_no_plugin(dev: ProgramRun) -> None:
    assert _config("dev").efa_pools == ()
    assert dev.of_type(COMPONENT) == []
    assert [r.name for r in dev.of_type(RELEASE) if r.inputs["chart"] == CHART_NAME] == []


# --- config -------------------------------------------------------------------------------------


def test_version_follows_config() -> None:
    result = run(nodePools=[TRAINING_POOL], efaDevicePlugin={"version": "v0.5.29"})
    assert _release(result).inputs["version"] == "v0.5.29"


def test_without_an_efa_pool_the_section_declares_nothing() -> None:
    result = run(nodePools=[INFERENCE_POOL], efaDevicePlugin={"version": "v0.5.20"})
    assert result.of_type(COMPONENT) == []


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"version": "v0.6.0"},
            "gpu-eks:efaDevicePlugin.version = 'v0.6.0': the EFA device plugin values are built and tested "
            "for the v0.5 series",
        ),
        ({"version": "latest"}, "gpu-eks:efaDevicePlugin.version = 'latest': must be an exact chart version"),
        (
            {"version": "^0.5.20"},
            "gpu-eks:efaDevicePlugin.version = '^0.5.20': must be an exact chart version",
        ),
        ({"versoin": "v0.5.20"}, "gpu-eks:efaDevicePlugin.versoin = 'v0.5.20': unknown key"),
    ],
    ids=["other-series", "latest", "range", "misspelt-key"],
)
def test_config_mistakes_stop_the_program_before_anything_is_registered(
    section: dict[str, Any], message: str
) -> None:
    error, monitor = run_failing(nodePools=[TRAINING_POOL], efaDevicePlugin=section)
    assert isinstance(error, ConfigError)
    (problem,) = error.problems
    assert str(problem).startswith(message), str(problem)
    assert monitor.registrations == []
