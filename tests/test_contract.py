"""The output contract: the program exports exactly it, with values of its types."""

import pytest

import contract
from config.kubernetes import Taint
from synth.runner import ProgramRun, run_program
from tests.helpers import config


def test_the_program_exports_exactly_the_contract(any_stack: ProgramRun) -> None:
    # As a StackReference sees them: a None output is dropped, and only an optional one may be None.
    absent = set(contract.OUTPUT_NAMES) - set(any_stack.outputs)
    assert absent <= contract.OPTIONAL_OUTPUTS
    assert list(any_stack.outputs) == [n for n in contract.OUTPUT_NAMES if n not in absent]
    assert any_stack.secret_outputs == contract.SECRET_OUTPUTS
    parsed = contract.StackOutputs.model_validate(any_stack.outputs)
    assert parsed.cluster_endpoint.startswith("https://")
    assert parsed.gpu_toleration == contract.GPU_TOLERATION


def test_gpu_pools_tell_a_workload_how_to_land_there(prod: ProgramRun) -> None:
    pools = {p.name: p for p in contract.StackOutputs.model_validate(prod.outputs).gpu_pools}
    assert set(pools) == {"gpu-inference", "gpu-training"}
    training = pools["gpu-training"]
    assert training.node_selector == {"karpenter.sh/nodepool": "gpu-training"}
    assert training.capacity_types == ["on-demand"]
    assert training.gpu_limit == "64"
    assert training.gpu_resource == "nvidia.com/gpu"
    # One toleration per taint, and each tolerates its taint.
    assert len(training.tolerations) == len(training.taints) == 2
    for taint, toleration in zip(training.taints, training.tolerations, strict=True):
        assert Taint.model_validate(taint.model_dump()).toleration() == toleration.model_dump(
            exclude_none=True
        )


def test_time_slicing_is_visible_to_consumers(dev: ProgramRun) -> None:
    (pool,) = contract.StackOutputs.model_validate(dev.outputs).gpu_pools
    assert pool.time_slicing_replicas == 4
    assert pool.labels["nvidia.com/device-plugin.config"] == "time-slicing-4"
    # The cap is in slices, and consumers learn how many slices a GPU is.
    assert (pool.gpu_limit, pool.slices_per_gpu) == ("16", 4)


def test_whole_gpu_pools_have_one_slice_per_gpu(prod: ProgramRun) -> None:
    pools = contract.StackOutputs.model_validate(prod.outputs).gpu_pools
    assert {p.name: p.slices_per_gpu for p in pools} == {"gpu-inference": 1, "gpu-training": 1}


def test_gpu_pool_fields_are_exactly_these() -> None:
    """Consumers read these names; renaming or removing one is a breaking change."""
    assert [f.alias or n for n, f in contract.GpuPool.model_fields.items()] == [
        "name",
        "kind",
        "capacityTypes",
        "taints",
        "tolerations",
        "nodeSelector",
        "labels",
        "gpuLimit",
        "gpuResource",
        "slicesPerGpu",
        "timeSlicingReplicas",
        "migProfile",
    ]


def test_interruption_off_exports_no_queue() -> None:
    result = run_program(config(karpenter={"interruptionHandling": False}))
    assert "karpenterInterruptionQueueName" not in result.outputs  # None: dropped, as the SDK does
    parsed = contract.StackOutputs.model_validate(result.outputs)
    assert (parsed.karpenter_interruption_queue_name, parsed.gpu_pools) == (None, [])


def test_export_refuses_a_partial_or_extended_contract() -> None:
    with pytest.raises(ValueError, match=r"missing \['region'"):
        contract.export({})
    values = dict.fromkeys(contract.OUTPUT_NAMES, "x")
    with pytest.raises(ValueError, match=r"not in it \['extra'\]"):
        contract.export({**values, "extra": 1})


def test_oidc_provider_url_is_the_issuer_without_scheme_as_the_contract_promises(
    any_stack: ProgramRun,
) -> None:
    """Consumers write IRSA trust conditions `<oidcProviderUrl>:sub`; IAM matches them only without
    `https://`, and the issuer is what the OIDC provider's ARN names."""
    outputs = contract.StackOutputs.model_validate(any_stack.outputs)
    assert not outputs.oidc_provider_url.startswith("https://")
    assert outputs.oidc_provider_arn.endswith(f":oidc-provider/{outputs.oidc_provider_url}")


def test_a_part_that_is_off_leaves_its_output_out_as_pulumi_does(dev: ProgramRun) -> None:
    """dev has no observability backend and no MIG: a StackReference to it has no `monitoring` and its pool
    no `migProfile` (the SDK drops None outputs and None keys), which is why consumers read the optional
    outputs with `get_output` and the models default what is missing to None."""
    assert {"karpenterInterruptionQueueName", "monitoring"} == contract.OPTIONAL_OUTPUTS
    assert "monitoring" not in dev.outputs
    [pool] = dev.outputs["gpuPools"]
    assert "migProfile" not in pool
    assert contract.GpuPool.model_validate(pool).mig_profile is None
