"""The `gpu-eks:smokeTest` section: an optional CUDA job that proves a GPU pool works end to end."""

from typing import Self

from pydantic import Field, model_validator

from config.base import ConfigModel
from config.types import Flag, KubernetesName, PinnedImage, WholeNumber

DEFAULT_IMAGE = (
    "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
    "@sha256:7c7540bdf1f942d4fb6db97069fd6c289471b54ac29e3c7fcdf914cf77af7d41"
)
"""NVIDIA's public CUDA vector-add sample (amd64 and arm64): allocates on the GPU, checks the result, prints
`Test PASSED` and exits 0 only when CUDA works. Pinned by digest: the digest is what `docker pull` of the tag
`vectoradd-cuda12.5.0` reported (github.com/bigstack-oss/cubecos issue #312), and the one NVIDIA's NemoClaw
uses as its "immutable multi-architecture CUDA vectorAdd image" (NVIDIA_CONTAINER_GPU_PROOF_IMAGE).
Kubernetes pulls by the digest; the tag only tells a reader what it is."""


class SmokeTestConfig(ConfigModel):
    """A Kubernetes Job on one GPU pool: Karpenter launches a node, the GPU Operator makes the GPU usable,
    the job runs a CUDA check and finishes, and Karpenter consolidates the empty node away."""

    enabled: Flag = False
    """Declare the job (`pulumi up` then waits for it to succeed)."""
    node_pool: KubernetesName | None = None
    """The GPU pool (a `nodePools[].name`) to run on; required when enabled."""
    image: PinnedImage = DEFAULT_IMAGE
    """Container image of the check, pinned by digest (`repo:tag@sha256:...`). It runs as an unprivileged
    user (65534) with a read-only root filesystem and a writable `/tmp`."""
    command: tuple[str, ...] | None = None
    """Command of the check (default: the image's own, which runs vectorAdd)."""
    namespace: KubernetesName = "gpu-smoke-test"
    """Namespace created for the job."""
    timeout_seconds: WholeNumber = Field(default=1800, ge=300, le=7200)
    """Deadline of the job: node launch, image pull and GPU Operator setup take several minutes."""
    ttl_seconds_after_finished: WholeNumber | None = Field(default=None, ge=0)
    """Unset (the default): the finished Job stays, so `pulumi refresh` finds it and the test runs again only
    when what it tests changes (the pool's nodes, the GPU Operator, the Kubernetes version, the check
    itself: they name the Job). Set: Kubernetes deletes the finished Job after that many seconds, and every
    later `pulumi refresh` (or `up --refresh`) sees it gone and runs it again, on a new GPU node."""

    @model_validator(mode="after")
    def _pool_when_enabled(self) -> Self:
        if self.enabled and self.node_pool is None:
            raise ValueError("enabled is true but nodePool is not set: name the GPU pool to test")
        return self
