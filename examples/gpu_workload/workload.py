"""The workload an ML team deploys on a gpu-eks pool: pure, so it is tested without a cluster."""

from typing import Any

from contract import GpuPool, Team

IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"


def select_pool(pools: list[dict[str, Any]], name: str = "") -> GpuPool:
    """The pool called `name`, or the first GPU pool; validated against the contract."""
    parsed = [GpuPool.model_validate(p) for p in pools]
    candidates = [p for p in parsed if p.kind == "gpu" and (not name or p.name == name)]
    if not candidates:
        names = ", ".join(p.name for p in parsed if p.kind == "gpu") or "none"
        raise ValueError(f"no GPU pool {name!r} in the gpu-eks stack; its GPU pools: {names}")
    return candidates[0]


def team_namespace(teams: list[dict[str, Any]], name: str) -> str:
    """The namespace of the gpu-eks team called `name` (its `teams` output): where its roles may work."""
    parsed = [Team.model_validate(t) for t in teams]
    found = next((t for t in parsed if t.name == name), None)
    if found is None:
        names = ", ".join(t.name for t in parsed) or "none"
        raise ValueError(f"no team {name!r} in the gpu-eks stack's teams; its teams: {names}")
    return found.namespace


def gpu_job(
    pool: GpuPool,
    *,
    name: str = "gpu-batch",
    namespace: str | None = None,
    gpus: int = 1,
    image: str = IMAGE,
) -> dict[str, Any]:
    """A batch Job that lands on `pool`: its node selector, a toleration per taint, the GPU request; in
    `namespace` (a team's) when given."""
    if pool.gpu_resource is None:
        raise ValueError(f"pool {pool.name} exposes several MIG resources; request one explicitly")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            **({"namespace": namespace} if namespace else {}),
            "labels": {"app.kubernetes.io/name": name},
        },
        "spec": {
            "backoffLimit": 1,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": dict(pool.node_selector),
                    "tolerations": [t.model_dump(exclude_none=True) for t in pool.tolerations],
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "resources": {"limits": {pool.gpu_resource: str(gpus)}},
                        }
                    ],
                },
            },
        },
    }
