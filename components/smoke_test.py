"""SmokeTest: a CUDA Job on a GPU pool, the "test ML pod" that proves the whole path works after `pulumi up`:
Karpenter launches a GPU node for it, the GPU Operator makes `nvidia.com/gpu` allocatable, the job runs a
CUDA check and finishes, and Kubernetes deletes it so Karpenter can consolidate the node away."""

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import MANAGED_BY
from components.karpenter_api import to_manifest
from components.node_pools import pool_objects
from config.gpu_operator import GpuOperatorConfig
from config.node_pools import NodePoolConfig
from config.smoke_test import SmokeTestConfig
from pools.sharing import pool_gpu_resource

JOB_NAME = "cuda-smoke-test"
"""The Job's name prefix and its pods' `app.kubernetes.io/name` label."""
DIGEST_LENGTH = 10
"""Hex digits of `tested_digest` in the Job's name (`cuda-smoke-test-0123456789`)."""
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
            "labels": {**MANAGED_BY, **POD_SECURITY},
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
            "labels": {**MANAGED_BY},
        },
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": JOB_NAME}},
            "policyTypes": ["Ingress", "Egress"],
        },
    }


def tested_digest(
    pod_template: Mapping[str, Any],
    pool: NodePoolConfig,
    *,
    gpu_operator: GpuOperatorConfig,
    kubernetes_version: str,
    cluster_name: str,
) -> str:
    """A digest of what the smoke test tests: its pod (image, command, what it requests and tolerates), the
    nodes the pool launches (its EC2NodeClass and NodePool template: AMI, volumes, kubelet, user data,
    requirements, taints, labels), the GPU Operator's settings and the Kubernetes version. Not the pool's
    limits or disruption, nor the Job's deadline or TTL: they change nothing the test proves."""
    (objects,) = pool_objects([pool], cluster_name=cluster_name, tags={}, gpu_operator=gpu_operator)
    tested = {
        "pod": pod_template,
        "nodeClass": to_manifest(objects.node_class)["spec"],
        "nodeTemplate": to_manifest(objects.node_pool)["spec"]["template"],
        "gpuOperator": gpu_operator.model_dump(mode="json", by_alias=True),
        "kubernetesVersion": kubernetes_version,
    }
    return hashlib.sha256(json.dumps(tested, sort_keys=True).encode()).hexdigest()


def smoke_job(
    pool: NodePoolConfig,
    config: SmokeTestConfig,
    *,
    gpu_operator: GpuOperatorConfig,
    kubernetes_version: str,
    cluster_name: str,
) -> dict[str, Any]:
    """The Job manifest: pinned to the pool, tolerating its taints, asking for one GPU (or slice). Named
    `cuda-smoke-test-<digest>` after what it tests (`tested_digest`): the Job is replaced, so the test runs
    again, exactly when one of those changes; otherwise the finished Job stays as it is."""
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
    template = {
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
    }
    digest = tested_digest(
        template,
        pool,
        gpu_operator=gpu_operator,
        kubernetes_version=kubernetes_version,
        cluster_name=cluster_name,
    )
    spec: dict[str, Any] = {
        # Retries cover a spot interruption mid-run; the deadline covers node launch and image pull.
        "backoffLimit": 2,
        "activeDeadlineSeconds": config.timeout_seconds,
        "template": template,
    }
    if config.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = config.ttl_seconds_after_finished
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{JOB_NAME}-{digest[:DIGEST_LENGTH]}",
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/name": JOB_NAME, **MANAGED_BY},
            "annotations": CHECKOV_SKIPS,
        },
        "spec": spec,
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
        kubernetes_version: str,
        cluster_name: str,
        provider: k8s.Provider,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`depends_on`: the pool's NodePool and the GPU Operator release. The job is then created after
        them and, on `pulumi destroy`, deleted before them. `kubernetes_version` and `cluster_name` (with
        the pool and the operator) say what the test tests, and so name the Job."""
        super().__init__("gpu-eks:smoke_test:SmokeTest", name, None, opts)
        manifest = smoke_job(
            pool,
            config,
            gpu_operator=gpu_operator,
            kubernetes_version=kubernetes_version,
            cluster_name=cluster_name,
        )
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
