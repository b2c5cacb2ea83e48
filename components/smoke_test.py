"""SmokeTest: a CUDA Job on a GPU pool, the "test ML pod" that proves the whole path works after `pulumi up`:
Karpenter launches a GPU node for it, the GPU Operator makes `nvidia.com/gpu` allocatable, the job runs a
CUDA check and finishes, and Kubernetes deletes it so Karpenter can consolidate the node away."""

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from config.gpu_operator import GpuOperatorConfig
from config.node_pools import NodePoolConfig
from config.smoke_test import SmokeTestConfig
from pools.sharing import pool_gpu_resource

JOB_NAME = "cuda-smoke-test"
RUN_AS = 65534
"""`nobody`: the image needs no user of its own, and a UID above 10000 matches no host account."""
POD_SECURITY = {
    f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")
} | {f"pod-security.kubernetes.io/{mode}-version": "latest" for mode in ("enforce", "audit", "warn")}
"""Pod Security Admission labels of the namespace: the `restricted` level, the hardened profile."""
CHECKOV_SKIPS = {
    "checkov.io/skip1": "CKV_K8S_15=the image is pinned by digest, so IfNotPresent runs the same image "
    "without a registry round trip on every start",
}
"""Findings of checkov that do not apply, each with its reason, next to the object (checkov's syntax)."""


def smoke_namespace(config: SmokeTestConfig) -> dict[str, Any]:
    """The namespace of the job: only pods meeting the Pod Security `restricted` level are admitted."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": config.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpu-eks", **POD_SECURITY},
        },
    }


def smoke_network_policy(config: SmokeTestConfig) -> dict[str, Any]:
    """No traffic to or from the job's pod: vectorAdd needs no network (the kubelet pulls the image)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": JOB_NAME,
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpu-eks"},
        },
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": JOB_NAME}},
            "policyTypes": ["Ingress", "Egress"],
        },
    }


def smoke_job(
    pool: NodePoolConfig, config: SmokeTestConfig, *, gpu_operator: GpuOperatorConfig
) -> dict[str, Any]:
    """The Job manifest: pinned to the pool, tolerating its taints, asking for one GPU (or slice)."""
    resource = pool_gpu_resource(pool, gpu_operator)
    if resource is None:
        raise ValueError(
            f"pool {pool.name} has no single GPU resource to request (MIG mixed with several sizes)"
        )
    container: dict[str, Any] = {
        "name": "cuda-check",
        "image": config.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "512Mi", resource: "1"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # CUDA caches JIT-compiled kernels under $HOME/.nv; the root filesystem is read-only.
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {"name": "CUDA_CACHE_PATH", "value": "/tmp/.nv/ComputeCache"},
        ],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    if config.command:
        container["command"] = list(config.command)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": JOB_NAME,
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/name": JOB_NAME, "app.kubernetes.io/managed-by": "gpu-eks"},
            "annotations": CHECKOV_SKIPS,
        },
        "spec": {
            # Retries cover a spot interruption mid-run; the deadline covers node launch and image pull.
            "backoffLimit": 2,
            "activeDeadlineSeconds": config.timeout_seconds,
            "ttlSecondsAfterFinished": config.ttl_seconds_after_finished,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": JOB_NAME}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,  # it never talks to the API server
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "nodeSelector": {"karpenter.sh/nodepool": pool.name},
                    "tolerations": [t.toleration() for t in pool.effective_taints],
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


class SmokeTest(pulumi.ComponentResource):
    """Namespace and Job of the GPU smoke test."""

    job: k8s.batch.v1.Job

    def __init__(
        self,
        name: str,
        *,
        config: SmokeTestConfig,
        pool: NodePoolConfig,
        gpu_operator: GpuOperatorConfig,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`depends_on`: the pool's NodePool and the GPU Operator release. The job is then created after
        them and, on `pulumi destroy`, deleted before them."""
        super().__init__("gpu-eks:smoke_test:SmokeTest", name, None, opts)
        manifest = smoke_job(pool, config, gpu_operator=gpu_operator)
        namespace = k8s.core.v1.Namespace(
            name,
            metadata=smoke_namespace(config)["metadata"],
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        policy = smoke_network_policy(config)
        policy_metadata: Any = {**policy["metadata"], "namespace": namespace.metadata["name"]}
        k8s.networking.v1.NetworkPolicy(
            name,
            metadata=policy_metadata,
            spec=policy["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        # The namespace Output makes the Job wait for (and be deleted before) its namespace.
        metadata: Any = {**manifest["metadata"], "namespace": namespace.metadata["name"]}
        # Pulumi waits for the Job to complete: `pulumi up` fails when the GPU does not work.
        self.job = k8s.batch.v1.Job(
            name,
            metadata=metadata,
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                depends_on=list(depends_on),
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=f"{config.timeout_seconds + 300}s"),
            ),
        )
        self.register_outputs({"job": self.job.metadata["name"], "namespace": namespace.metadata["name"]})
