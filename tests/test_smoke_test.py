"""Smoke job: a real CUDA check pinned to a GPU pool, valid against the Kubernetes schema."""

from typing import Any

import kubernetes_validate
import pytest

from components.smoke_test import smoke_job
from config.errors import ConfigError
from config.gpu_operator import GpuOperatorConfig
from config.node_pools import NodePoolConfig
from config.smoke_test import DEFAULT_IMAGE, SmokeTestConfig
from config.stack import parse_stack_config
from tests.helpers import config, run_failing

POOL: dict[str, Any] = {
    "name": "gpu-inference",
    "instanceFamilies": ["g6"],
    "limits": {"nvidia.com/gpu": "4"},
    "taints": [
        {"key": "nvidia.com/gpu", "value": "true"},
        {"key": "team", "value": "ml", "effect": "NoExecute"},
    ],
}
ENABLED = {"enabled": True, "nodePool": "gpu-inference"}


def job(**smoke: Any) -> dict[str, Any]:
    pool = NodePoolConfig.model_validate(POOL)
    smoke_config = SmokeTestConfig.model_validate({**ENABLED, **smoke})
    return smoke_job(pool, smoke_config, gpu_operator=GpuOperatorConfig())


def test_the_job_passes_the_kubernetes_schema() -> None:
    manifest = job()
    kubernetes_validate.validate(manifest, "1.35", strict=True)


def test_the_job_is_placed_on_the_pool_tolerates_its_taints_and_asks_for_one_gpu() -> None:
    pod = job()["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-inference"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoExecute"},
    ]
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert pod["restartPolicy"] == "Never"


def test_the_default_check_is_nvidias_cuda_sample_and_the_job_cleans_itself_up() -> None:
    manifest = job()
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    assert (
        container["image"]
        == DEFAULT_IMAGE
        == "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
    )
    assert "command" not in container  # the image's entrypoint runs vectorAdd
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 600
    assert manifest["spec"]["activeDeadlineSeconds"] == 1800


def test_image_and_command_are_configurable() -> None:
    (container,) = job(image="example.com/cuda-check:1", command=["nvidia-smi"])["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["image"] == "example.com/cuda-check:1"
    assert container["command"] == ["nvidia-smi"]


def test_mixed_mig_pools_request_their_mig_resource() -> None:
    pool = NodePoolConfig.model_validate(
        {
            **POOL,
            "instanceFamilies": ["p4d"],
            "mig": {"profile": "all-1g.5gb"},
            "limits": {"nvidia.com/gpu": "8"},
        }
    )
    mixed = GpuOperatorConfig.model_validate({"mig": {"strategy": "mixed"}})
    manifest = smoke_job(pool, SmokeTestConfig.model_validate(ENABLED), gpu_operator=mixed)
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/mig-1g.5gb": "1"}


@pytest.mark.parametrize(
    ("smoke", "expected"),
    [
        ({"enabled": True}, "gpu-eks:smokeTest: enabled is true but nodePool is not set"),
        (
            {"enabled": True, "nodePool": "gpu-training"},
            "gpu-eks:smokeTest.nodePool = 'gpu-training': names no pool of nodePools; "
            "GPU pools: gpu-inference",
        ),
        ({"enabled": True, "timeoutSeconds": 10}, "gpu-eks:smokeTest.timeoutSeconds = 10: must be greater"),
    ],
)
def test_smoke_test_config_mistakes_are_refused(smoke: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(config(nodePools=[POOL], smokeTest=smoke))
    assert str(caught.value.problems[0]).startswith(expected)


def test_a_cpu_pool_cannot_host_the_smoke_test() -> None:
    cpu = {"name": "burst", "kind": "cpu", "limits": {"cpu": "8"}}
    error, monitor = run_failing(nodePools=[POOL, cpu], smokeTest={"enabled": True, "nodePool": "burst"})
    assert isinstance(error, ConfigError)
    assert "gpu-eks:smokeTest.nodePool = 'burst': names a CPU pool" in str(error)
    assert monitor.registrations == []
