"""GpuOperator component: what the real program declares for the namespace and the Helm release."""

from typing import Any

import pytest

from components import yaml_text
from components.cluster import SYSTEM_NODE_SELECTOR
from components.gpu_operator_values import (
    CDI_MIN_KUBERNETES_VERSION,
    DEVICE_PLUGIN_CONFIG_LABEL,
    DEVICE_PLUGIN_DEFAULT_CONFIG,
    gpu_operator_values,
    pool_node_labels,
    tolerates,
)
from config.errors import ConfigError
from config.stack import StackConfig, parse_stack_config
from synth.runner import ProgramRun, Registration, stack_config
from tests.conftest import STACKS, stack_run
from tests.gpu_operator.helpers import chart_key_problems, merged, nfd_effective_defaults, nfd_validator
from tests.helpers import run, run_failing

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
COMPONENT = "gpu-eks:gpu_operator:GpuOperator"


def _release(result: ProgramRun) -> Registration:
    return result.one(RELEASE, "gpu-operator")


def _values(result: ProgramRun) -> dict[str, Any]:
    values: dict[str, Any] = _release(result).inputs["values"]
    return values


def _config(stack: str) -> StackConfig:
    return parse_stack_config(stack_config(stack))


def test_namespace_is_labelled_privileged(any_stack: ProgramRun) -> None:
    namespace = any_stack.one(NAMESPACE, "gpu-operator")
    metadata = namespace.inputs["metadata"]
    assert metadata["name"] == "gpu-operator"
    assert metadata["labels"] == {
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/audit": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
    }
    assert namespace.parent is not None
    assert namespace.parent.endswith(f"{COMPONENT}::gpu-operator")


def test_release_chart_repository_version_and_namespace(any_stack: ProgramRun) -> None:
    release = _release(any_stack)
    namespace = any_stack.one(NAMESPACE, "gpu-operator")
    inputs = release.inputs
    assert inputs["chart"] == "gpu-operator"
    assert inputs["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    assert inputs["version"] == "v26.7.0"
    assert inputs["name"] == "gpu-operator"
    assert inputs["namespace"] == namespace.inputs["metadata"]["name"]
    assert namespace.urn in release.property_dependencies["namespace"]  # the Output, not a copied string
    assert inputs["createNamespace"] is False
    assert release.parent is not None
    assert release.parent.endswith(f"{COMPONENT}::gpu-operator")


def test_release_options_suit_an_operator_with_crd_hooks(any_stack: ProgramRun) -> None:
    inputs = _release(any_stack).inputs
    assert inputs["timeout"] == 900
    assert inputs["cleanupOnFail"] is True
    assert inputs["atomic"] is False
    assert inputs["waitForJobs"] is True
    assert inputs["disableOpenapiValidation"] is True  # NVIDIA's upgrade path with the CRD hook
    assert inputs["allowNullValues"] is True
    # Helm waits for the chart's workloads, and hooks (the pre-upgrade CRD Job) run.
    for off in ("skipAwait", "disableWebhooks", "disableCrdHooks", "skipCrds", "reuseValues"):
        assert not inputs.get(off), off


def test_namespace_and_release_use_the_cluster_provider(any_stack: ProgramRun) -> None:
    provider = any_stack.one("pulumi:providers:kubernetes")
    assert provider.parent is not None
    assert provider.parent.endswith("gpu-eks:cluster:Cluster::cluster")
    assert _release(any_stack).provider == provider.name
    assert any_stack.one(NAMESPACE, "gpu-operator").provider == provider.name


def test_release_waits_for_the_system_nodes_and_nothing_of_karpenter(any_stack: ProgramRun) -> None:
    release = _release(any_stack)
    node_group = any_stack.one("aws:eks/nodeGroup:NodeGroup")
    namespace = any_stack.one(NAMESPACE, "gpu-operator")
    assert node_group.urn in release.dependencies
    dependencies = [any_stack.by_urn(urn) for urn in release.dependencies]
    karpenter = [
        d.name
        for d in dependencies
        if (d.type == RELEASE and "karpenter" in d.name.lower())
        or (d.type.startswith("aws:iam/") and "karpenter" in d.name.lower())
        or d.type.startswith("gpu-eks:karpenter")
    ]
    assert karpenter == []
    # Exactly these (and the monitoring CRDs the DCGM ServiceMonitor needs, with a backend): anything else
    # added here is an ordering decision for review.
    crds = [r.urn for r in any_stack.of_type(RELEASE) if r.name == "observability-crds"]
    assert set(release.dependencies) == {node_group.urn, namespace.urn, *crds}


@pytest.mark.parametrize("stack", STACKS)
def test_registered_values_are_the_values_for_the_stacks_pools(stack: str) -> None:
    config = _config(stack)
    expected = gpu_operator_values(
        [p.gpu_profile() for p in config.gpu_pools],
        kubernetes_version=config.cluster.kubernetes_version,
        config=config.gpu_operator,
        system_node_selector=SYSTEM_NODE_SELECTOR,
        scraped=config.observability.enabled,
    )
    assert _values(stack_run(stack)) == expected


@pytest.mark.parametrize("stack", STACKS)
def test_every_pool_taint_is_tolerated_by_operands_and_nfd_workers(stack: str) -> None:
    config = _config(stack)
    assert config.gpu_pools, f"{stack} has no GPU pool for the operator to serve"
    values = _values(stack_run(stack))
    operands = values["daemonsets"]["tolerations"]
    nfd_workers = values["node-feature-discovery"]["worker"]["tolerations"]
    for pool in config.gpu_pools:
        for taint in (*pool.effective_taints, *pool.effective_startup_taints):
            assert tolerates(operands, taint), (pool.name, taint)
            assert tolerates(nfd_workers, taint), (pool.name, taint)


def test_prod_training_taint_is_tolerated(prod: ProgramRun) -> None:
    """The non-default taint of prod's training pool is the case the replaced toleration lists miss."""
    training = next(p for p in _config("prod").gpu_pools if p.name == "gpu-training")
    (workload,) = (t for t in training.effective_taints if t.key == "gpu-eks.io/workload")
    expected = {
        "key": "gpu-eks.io/workload",
        "operator": "Equal",
        "value": "training",
        "effect": "NoSchedule",
    }
    assert workload.toleration() == expected
    values = _values(prod)
    assert expected in values["daemonsets"]["tolerations"]
    assert expected in values["node-feature-discovery"]["worker"]["tolerations"]


@pytest.mark.parametrize("stack", STACKS)
def test_operands_for_nvidia_amis_and_controllers_on_system_nodes(stack: str) -> None:
    config = _config(stack)
    values = _values(stack_run(stack))
    # Both stacks use the EKS AL2023 NVIDIA AMI: driver and toolkit come with it.
    assert {p.ami_family for p in config.gpu_pools} == {"al2023"}
    assert values["driver"]["enabled"] is False
    assert values["toolkit"]["enabled"] is False
    assert values["devicePlugin"]["enabled"] is True
    assert values["nfd"]["enabled"] is True
    assert values["operator"]["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert values["node-feature-discovery"]["master"]["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert values["node-feature-discovery"]["gc"]["nodeSelector"] == SYSTEM_NODE_SELECTOR
    major, minor = (int(x) for x in config.cluster.kubernetes_version.split("."))
    assert values["cdi"]["enabled"] is ((major, minor) >= CDI_MIN_KUBERNETES_VERSION)
    # The ServiceMonitor follows the stack's observability backend (dev: none; prod: managed).
    assert values["dcgmExporter"]["enabled"] is True
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is config.observability.enabled


def test_dev_time_slicing_has_its_device_plugin_config_entry(dev: ProgramRun) -> None:
    (pool,) = _config("dev").gpu_pools
    label = pool_node_labels(pool.gpu_profile())[DEVICE_PLUGIN_CONFIG_LABEL]
    config = _values(dev)["devicePlugin"]["config"]
    assert config["create"] is True
    assert config["default"] == DEVICE_PLUGIN_DEFAULT_CONFIG
    assert {DEVICE_PLUGIN_DEFAULT_CONFIG, label} <= set(config["data"])
    entry = yaml_text.load(config["data"][label])
    assert entry["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert "sharing" not in yaml_text.load(config["data"][DEVICE_PLUGIN_DEFAULT_CONFIG])


def test_prod_nodes_use_the_default_device_plugin_config(prod: ProgramRun) -> None:
    config = _values(prod)["devicePlugin"]["config"]
    assert config["default"] == DEVICE_PLUGIN_DEFAULT_CONFIG
    assert "sharing" not in yaml_text.load(config["data"][DEVICE_PLUGIN_DEFAULT_CONFIG])
    for pool in _config("prod").gpu_pools:
        assert DEVICE_PLUGIN_CONFIG_LABEL not in pool_node_labels(pool.gpu_profile())


@pytest.mark.parametrize("stack", STACKS)
def test_every_registered_key_exists_in_the_vendored_chart(stack: str) -> None:
    values = _values(stack_run(stack))
    assert chart_key_problems(values) == []
    final = merged(nfd_effective_defaults(), values["node-feature-discovery"])
    nfd_validator().validate(final)


def test_namespace_timeout_and_extra_values_follow_config() -> None:
    result = run(
        cluster={"name": "ml-test", "kubernetesVersion": "1.33"},
        gpuOperator={
            "namespace": "nvidia",
            "timeoutSeconds": 1800,
            "extraValues": {"gfd": {"enabled": False}, "operator": {"logging": {"level": "debug"}}},
        },
        nodePools=[
            {
                "name": "br",
                "ami": "bottlerocket@v1.40.0",
                "instanceFamilies": ["g6"],
                "limits": {"nvidia.com/gpu": "4"},
            }
        ],
    )
    namespace = result.one(NAMESPACE, "gpu-operator")
    release = _release(result)
    assert namespace.inputs["metadata"]["name"] == "nvidia"
    assert release.inputs["namespace"] == "nvidia"
    assert result.outputs["gpuOperatorNamespace"] == "nvidia"
    assert release.inputs["timeout"] == 1800
    values = release.inputs["values"]
    assert values["gfd"] == {"enabled": False}
    assert values["operator"]["logging"] == {"level": "debug"}
    assert values["operator"]["nodeSelector"] == SYSTEM_NODE_SELECTOR  # merged, not replaced
    # Only Bottlerocket pools: its own device plugin serves them, so no operator device plugin and no CDI.
    assert values["devicePlugin"]["enabled"] is False
    assert values["cdi"]["enabled"] is False


def test_without_gpu_pools_the_operator_is_still_installed() -> None:
    values = _values(run())
    assert values["daemonsets"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert values["driver"]["enabled"] is False


def test_stack_output(any_stack: ProgramRun) -> None:
    assert any_stack.outputs["gpuOperatorNamespace"] == "gpu-operator"
    assert "gpuOperatorNamespace" not in any_stack.secret_outputs


@pytest.mark.parametrize(
    ("sections", "key"),
    [
        (
            {
                "nodePools": [
                    {
                        "name": "a10g-mig",
                        "instanceFamilies": ["g5"],
                        "limits": {"nvidia.com/gpu": "8"},
                        "mig": {"profile": "all-1g.10gb"},
                    }
                ]
            },
            "gpu-eks:nodePools[0].mig.profile",
        ),
        ({"gpuOperator": {"version": "26.7.0"}}, "gpu-eks:gpuOperator.version"),
        ({"gpuOperator": {"version": "v26.8.0"}}, "gpu-eks:gpuOperator.version"),
        ({"gpuOperator": {"extraValues": ["gfd.enabled=false"]}}, "gpu-eks:gpuOperator.extraValues"),
    ],
    ids=["mig-on-g5", "version-without-v", "version-of-another-series", "extra-values-not-a-mapping"],
)
def test_config_mistakes_stop_the_program_before_anything_is_registered(
    sections: dict[str, Any], key: str
) -> None:
    error, monitor = run_failing(**sections)
    assert isinstance(error, ConfigError)
    assert [p.key for p in error.problems] == [key]
    assert monitor.registrations == []


def test_mig_on_g5_names_the_pool_and_the_reason() -> None:
    error, _ = run_failing(
        nodePools=[
            {
                "name": "a10g-mig",
                "instanceFamilies": ["g5"],
                "limits": {"nvidia.com/gpu": "8"},
                "mig": {"profile": "all-1g.10gb"},
            }
        ]
    )
    assert isinstance(error, ConfigError)
    message = str(error.problems[0])
    assert "a10g-mig" in message
    assert "MIG" in message
