"""The instance-type table behind the MIG check: a faithful copy of the reference, read correctly."""

import hashlib

import pytest

from facts.instance_types import (
    INSTANCE_TYPES_TSV,
    MIG_CAPABLE_GPUS,
    MigNotSupportedError,
    UnknownInstanceTypeError,
    candidate_instance_types,
    check_mig_capable,
    gpu_instance_types,
    mig_capable_instance_types,
)
from tests.gpu_operator.helpers import reference_dir

REFERENCE_SHA256 = "806e8b52f1826bd5e47afbc113db655c1fe8eee43015fb51d7a47ba4a6d17aa1"
"""sha256 of karpenter-1.14.1/accelerated-instance-types.tsv in the shared reference."""


def test_runtime_copy_is_the_reference() -> None:
    assert hashlib.sha256(INSTANCE_TYPES_TSV.read_bytes()).hexdigest() == REFERENCE_SHA256
    reference = reference_dir()
    if reference is None:
        pytest.skip("shared reference folder not found beside this checkout (the sha256 pin still applies)")
    upstream = reference / "karpenter-1.14.1" / "accelerated-instance-types.tsv"
    assert INSTANCE_TYPES_TSV.read_bytes() == upstream.read_bytes()


def test_table_rows() -> None:
    table = gpu_instance_types()
    p4d = table["p4d.24xlarge"]
    assert (p4d.family, p4d.arch, p4d.gpu_name, p4d.gpu_count, p4d.gpu_memory_mib) == (
        "p4d",
        "amd64",
        "a100",
        8,
        40960,
    )
    assert table["g5g.xlarge"].arch == "arm64"
    assert table["p6-b200.48xlarge"].family == "p6-b200"
    # AMD, Inferentia, Trainium and fractional-GPU (g6f, no nvidia.com/gpu) types are not NVIDIA GPU types.
    for name in ("g4ad.xlarge", "inf2.xlarge", "trn1.32xlarge", "g6f.large", "c5n.18xlarge"):
        assert name not in table


def test_mig_capable_instance_types() -> None:
    assert mig_capable_instance_types() == {
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.4xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
        "p6-b300.48xlarge",
    }
    assert {"a100", "a30", "h100", "h200", "b200", "b300"} == MIG_CAPABLE_GPUS


def test_candidates_intersect_requirements() -> None:
    assert [it.name for it in candidate_instance_types(instance_families=["p5"])] == [
        "p5.4xlarge",
        "p5.48xlarge",
    ]
    assert [
        it.name for it in candidate_instance_types(instance_families=["p5", "g5"], gpu_names=["h100"])
    ] == [
        "p5.4xlarge",
        "p5.48xlarge",
    ]
    assert candidate_instance_types(instance_types=["g5.xlarge"], instance_families=["p5"]) == ()
    assert len(candidate_instance_types()) == len(gpu_instance_types())


def test_unknown_names_are_reported() -> None:
    with pytest.raises(UnknownInstanceTypeError, match=r"p9\.48xlarge, family zz9, GPU a1000"):
        candidate_instance_types(["p9.48xlarge"], ["zz9"], ["a1000"])


@pytest.mark.parametrize(
    ("types", "families", "gpus"),
    [((), ("p4d", "p5"), ()), (("p5en.48xlarge",), (), ()), ((), (), ("h100", "b200"))],
)
def test_mig_capable_pools_pass(
    types: tuple[str, ...], families: tuple[str, ...], gpus: tuple[str, ...]
) -> None:
    candidates = check_mig_capable("train", instance_types=types, instance_families=families, gpu_names=gpus)
    assert candidates
    assert all(it.mig_capable for it in candidates)


def test_mig_refused_on_g5() -> None:
    with pytest.raises(MigNotSupportedError) as info:
        check_mig_capable("inference", instance_families=["g5"])
    message = str(info.value)
    assert message.startswith("A10G GPUs (g5) do not support MIG, and GPU pool 'inference' may launch them")
    assert "g5.xlarge (a10g)" in message
    assert "a100, a30, b200, b300, h100, h200" in message


def test_mig_refused_when_a_family_mix_includes_one_without_mig() -> None:
    with pytest.raises(MigNotSupportedError, match=r"g6e\.xlarge \(l40s\)"):
        check_mig_capable("mixed", instance_families=["p5", "g6e"])


def test_mig_refused_for_an_unrestricted_pool() -> None:
    with pytest.raises(MigNotSupportedError, match=r"and \d+ more"):
        check_mig_capable("any-gpu")


def test_mig_refused_when_nothing_matches() -> None:
    with pytest.raises(MigNotSupportedError, match="match no NVIDIA GPU"):
        check_mig_capable("empty", instance_types=["g5.xlarge"], instance_families=["p5"])
