"""A GPU job on a gpu-eks pool, wired through the stack's outputs (`StackReference.require_output`)."""

import json
import sys
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# The example lives inside the gpu-eks repository; in your own repository, vendor or install gpu-eks's
# `contract` package (and this module) instead of this path tweak.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.gpu_workload.workload import gpu_job, select_pool

config = pulumi.Config()
gpu_eks = pulumi.StackReference(config.require("gpuEksStack"))
kubeconfig = gpu_eks.require_output("kubeconfig")
provider = k8s.Provider(
    "gpu-eks",
    kubeconfig=kubeconfig.apply(lambda kc: kc if isinstance(kc, str) else json.dumps(kc)),
)
job: pulumi.Output[dict[str, Any]] = gpu_eks.require_output("gpuPools").apply(
    lambda pools: gpu_job(select_pool(pools, config.get("pool") or ""))
)
k8s.batch.v1.Job(
    "gpu-batch",
    metadata=job.apply(lambda j: j["metadata"]),
    spec=job.apply(lambda j: j["spec"]),
    opts=pulumi.ResourceOptions(provider=provider),
)
pulumi.export("pool", job.apply(lambda j: j["spec"]["template"]["spec"]["nodeSelector"]))
