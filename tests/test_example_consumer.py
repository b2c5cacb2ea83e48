"""The example consumer stack: reads a real gpu-eks stack's outputs through StackReference and puts a GPU
job on a pool with the pool's selector, tolerations and GPU request."""

import runpy
from typing import Any

import kubernetes_validate
import pulumi
import pytest

from examples.gpu_workload.workload import gpu_job, select_pool, team_namespace
from synth.mocks import AwsMocks
from synth.runner import ROOT, ProgramRun, RecordingMonitor, run_program


class ConsumerMocks(AwsMocks):
    """AWS mocks plus a StackReference answering with a gpu-eks stack's outputs."""

    def __init__(self, outputs: dict[str, Any]) -> None:
        super().__init__("us-west-2")
        self.outputs = outputs

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            name = args.resource_id or args.name
            return name, {"name": name, "outputs": self.outputs, "secretOutputNames": ["kubeconfig"]}
        return super().new_resource(args)


def run_consumer(outputs: dict[str, Any], pool: str = "", team: str = "") -> ProgramRun:
    values = {
        "gpu-workload:gpuEksStack": "acme/gpu-eks/prod",
        **({"gpu-workload:pool": pool} if pool else {}),
        **({"gpu-workload:team": team} if team else {}),
    }
    return run_program(
        values,
        project="gpu-workload",
        program=lambda: runpy.run_path(str(ROOT / "examples" / "gpu_workload" / "__main__.py")),
        monitor=RecordingMonitor(ConsumerMocks(outputs)),
    )


def test_the_consumer_runs_a_gpu_job_on_the_chosen_pool(prod: ProgramRun) -> None:
    result = run_consumer(prod.outputs, pool="gpu-training")
    job = result.one("kubernetes:batch/v1:Job")
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-training"}
    assert {t["key"] for t in pod["tolerations"]} == {"nvidia.com/gpu", "gpu-eks.io/workload"}
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    provider = result.one("pulumi:providers:kubernetes")
    assert job.provider == provider.urn.split("::")[-2] or job.provider == provider.name
    assert "get-token" in provider.inputs["kubeconfig"]  # the gpu-eks stack's kubeconfig


def test_the_default_pool_is_the_first_gpu_pool(dev: ProgramRun) -> None:
    pod = run_consumer(dev.outputs).one("kubernetes:batch/v1:Job").inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-inference"}


def test_the_job_passes_the_kubernetes_schema(prod: ProgramRun) -> None:
    manifest = gpu_job(select_pool(prod.outputs["gpuPools"], "gpu-inference"))
    kubernetes_validate.validate(manifest, "1.35", strict=True)


def test_an_unknown_pool_is_reported_with_the_pools_there_are(prod: ProgramRun) -> None:
    with pytest.raises(ValueError, match="its GPU pools: gpu-inference, gpu-training"):
        select_pool(prod.outputs["gpuPools"], "gpu-nope")


def test_a_team_runs_its_job_in_its_own_namespace(prod: ProgramRun) -> None:
    """A team's roles may write only in its namespace (gpu-eks:teams): the job goes there."""
    job = run_consumer(prod.outputs, pool="gpu-training", team="training").one("kubernetes:batch/v1:Job")
    assert job.inputs["metadata"]["namespace"] == "training"
    manifest = gpu_job(select_pool(prod.outputs["gpuPools"], "gpu-training"), namespace="training")
    kubernetes_validate.validate(manifest, "1.35", strict=True)
    with pytest.raises(ValueError, match="no team 'vision' in the gpu-eks stack's teams; its teams: "):
        team_namespace(prod.outputs["teams"], "vision")
