"""Smoke job: a real CUDA check pinned to a GPU pool, valid against the Kubernetes schema."""

import re
from typing import Any

import kubernetes_validate
import pytest

from components.smoke_test import smoke_job, smoke_namespace, smoke_network_policy
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
    return smoke_job(
        pool, smoke_config, gpu_operator=GpuOperatorConfig(), kubernetes_version="1.35", cluster_name="ml"
    )


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
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["restartPolicy"] == "Never"


def test_the_default_check_is_nvidias_cuda_sample_and_the_finished_job_stays() -> None:
    manifest = job()
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    assert (
        container["image"] == DEFAULT_IMAGE == "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
        "@sha256:7c7540bdf1f942d4fb6db97069fd6c289471b54ac29e3c7fcdf914cf77af7d41"
    )
    assert "command" not in container  # the image's entrypoint runs vectorAdd
    # Kept, so that `pulumi refresh` finds it and does not run it again (a TTL is opt-in).
    assert "ttlSecondsAfterFinished" not in manifest["spec"]
    assert job(ttlSecondsAfterFinished=600)["spec"]["ttlSecondsAfterFinished"] == 600
    assert manifest["spec"]["activeDeadlineSeconds"] == 1800


PINNED = "example.com/cuda-check:1@sha256:" + "ab" * 32


def test_image_and_command_are_configurable() -> None:
    (container,) = job(image=PINNED, command=["nvidia-smi"])["spec"]["template"]["spec"]["containers"]
    assert container["image"] == PINNED
    assert container["command"] == ["nvidia-smi"]


def test_the_job_runs_hardened_and_its_namespace_admits_only_restricted_pods() -> None:
    pod = job()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "512Mi", "nvidia.com/gpu": "1"},
    }
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]  # the only writable path
    settings = SmokeTestConfig.model_validate(ENABLED)
    labels = smoke_namespace(settings)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert smoke_network_policy(settings)["spec"]["policyTypes"] == ["Ingress", "Egress"]
    for manifest in (smoke_namespace(settings), smoke_network_policy(settings)):
        kubernetes_validate.validate(manifest, "1.35", strict=True)


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04",
        "nvcr.io/nvidia/k8s/cuda-sample@sha256:1234",
        "cuda-sample:latest",
    ],
)
def test_an_image_not_pinned_by_digest_is_refused_before_anything_exists(image: str) -> None:
    error, monitor = run_failing(nodePools=[POOL], smokeTest={**ENABLED, "image": image})
    assert isinstance(error, ConfigError)
    assert str(error).splitlines()[1] == (
        f"  - gpu-eks:smokeTest.image = {image!r}: must be an image pinned by digest, such as "
        "registry/repo:tag@sha256:<64 hex digits>, so every pod runs the same image (find the digest with "
        "`docker buildx imagetools inspect <image>` or `crane digest <image>`)"
    )
    assert monitor.registrations == []


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
    manifest = smoke_job(
        pool,
        SmokeTestConfig.model_validate(ENABLED),
        gpu_operator=mixed,
        kubernetes_version="1.35",
        cluster_name="ml",
    )
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/mig-1g.5gb"] == "1"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]


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


# --- the Job runs again only when what it tests changes -------------------------------------------


def job_name(pool: dict[str, Any] = POOL, version: str = "1.35", **smoke: Any) -> str:
    smoke_config = SmokeTestConfig.model_validate({**ENABLED, **smoke})
    manifest = smoke_job(
        NodePoolConfig.model_validate(pool),
        smoke_config,
        gpu_operator=GpuOperatorConfig(),
        kubernetes_version=version,
        cluster_name="ml",
    )
    return str(manifest["metadata"]["name"])


def test_the_job_is_named_after_what_it_tests() -> None:
    name = job_name()
    assert re.fullmatch(r"cuda-smoke-test-[0-9a-f]{10}", name)
    assert job_name() == name  # deterministic
    for changed in (
        job_name({**POOL, "ami": "al2023@v20260801"}),  # the nodes
        job_name({**POOL, "taints": []}),
        job_name(version="1.36"),  # the cluster
        job_name(image=PINNED),  # the check
    ):
        assert changed != name
    # What the test does not prove leaves the finished Job alone: no GPU node launched for nothing.
    assert job_name({**POOL, "limits": {"nvidia.com/gpu": "8"}}) == name
    assert job_name({**POOL, "disruption": {"consolidateAfter": "30m"}}) == name
    assert job_name(timeoutSeconds=3600, ttlSecondsAfterFinished=60) == name


def test_the_digest_covers_the_gpu_operator() -> None:
    pool = NodePoolConfig.model_validate(POOL)
    smoke_config = SmokeTestConfig.model_validate(ENABLED)
    names = {
        smoke_job(pool, smoke_config, gpu_operator=operator, kubernetes_version="1.35", cluster_name="ml")[
            "metadata"
        ]["name"]
        for operator in (GpuOperatorConfig(), GpuOperatorConfig.model_validate({"version": "v26.7.1"}))
    }
    assert len(names) == 2
