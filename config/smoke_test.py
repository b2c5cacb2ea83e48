"""The `gpu-eks:smokeTest` section: an optional CUDA job that proves a GPU pool works end to end."""

from typing import Self

from pydantic import Field, model_validator

from config.base import ConfigModel
from config.types import KubernetesName

DEFAULT_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
"""NVIDIA's public CUDA vector-add sample: allocates on the GPU, checks the result, prints
`Test PASSED` and exits 0 only when CUDA works."""


class SmokeTestConfig(ConfigModel):
    """A Kubernetes Job on one GPU pool: Karpenter launches a node, the GPU Operator makes the GPU usable,
    the job runs a CUDA check, finishes and is deleted so Karpenter can consolidate the node away."""

    enabled: bool = False
    """Declare the job (`pulumi up` then waits for it to succeed)."""
    node_pool: KubernetesName | None = None
    """The GPU pool (a `nodePools[].name`) to run on; required when enabled."""
    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    """Container image of the check."""
    command: tuple[str, ...] | None = None
    """Command of the check (default: the image's own, which runs vectorAdd)."""
    namespace: KubernetesName = "gpu-smoke-test"
    """Namespace created for the job."""
    timeout_seconds: int = Field(default=1800, ge=300, le=7200)
    """Deadline of the job: node launch, image pull and GPU Operator setup take several minutes."""
    ttl_seconds_after_finished: int = Field(default=600, ge=0)
    """How long the finished job (and its pod) stay for `kubectl logs` before Kubernetes deletes them."""

    @model_validator(mode="after")
    def _pool_when_enabled(self) -> Self:
        if self.enabled and self.node_pool is None:
            raise ValueError("enabled is true but nodePool is not set: name the GPU pool to test")
        return self
