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

from examples.gpu_workload.workload import gpu_job, select_pool, team_namespace

config = pulumi.Config()
gpu_eks = pulumi.StackReference(config.require("gpuEksStack"))
kubeconfig = gpu_eks.require_output("kubeconfig")
provider = k8s.Provider(
    "gpu-eks",
    kubeconfig=kubeconfig.apply(lambda kc: kc if isinstance(kc, str) else json.dumps(kc)),
)
# With a team (gpu-eks:teams of the platform stack), the job goes to its namespace: the only one its roles
# may write to.
team = config.get("team") or ""
namespace = gpu_eks.require_output("teams").apply(lambda t: team_namespace(t, team)) if team else None
job: pulumi.Output[dict[str, Any]] = pulumi.Output.all(gpu_eks.require_output("gpuPools"), namespace).apply(
    lambda args: gpu_job(select_pool(args[0], config.get("pool") or ""), namespace=args[1])
)
k8s.batch.v1.Job(
    "gpu-batch",
    metadata=job.apply(lambda j: j["metadata"]),
    spec=job.apply(lambda j: j["spec"]),
    opts=pulumi.ResourceOptions(provider=provider),
)
pulumi.export("pool", job.apply(lambda j: j["spec"]["template"]["spec"]["nodeSelector"]))
