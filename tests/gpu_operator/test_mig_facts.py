"""The MIG facts behind the NodeOverlays: every MIG-capable GPU of the instance-type table is covered, and
`all-balanced` is built like mig-parted builds it."""

import pytest

from facts.instance_types import MIG_CAPABLE_GPUS, gpu_instance_types
from facts.mig import MIG_BASE_PROFILES, MIG_PROFILE_INSTANCES, balanced_mig_devices

STATIC_ALL_BALANCED = {
    ("a100", 40960): {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    ("a100", 81920): {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    ("h100", 81920): {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    ("h200", 144384): {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    ("b200", 183359): {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    ("b300", 275040): {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1},
}
"""The `all-balanced` entries of mig-parted v0.15.0 `deployments/systemd/config-default.yaml`, by device
filter: A100-40GB, A100-80GB/H100-80GB, H200 141GB, B200, B300 (written out here, not derived)."""


def test_every_mig_capable_instance_type_has_profile_facts() -> None:
    """Else its MIG pools could get no NodeOverlay (a30 has no EC2 instance type)."""
    models = {
        (it.gpu_name, it.gpu_memory_mib)
        for it in gpu_instance_types().values()
        if it.gpu_name in MIG_CAPABLE_GPUS
    }
    assert models == set(MIG_PROFILE_INSTANCES)


@pytest.mark.parametrize("model", sorted(MIG_PROFILE_INSTANCES))
def test_all_balanced_matches_mig_parteds_static_config(model: tuple[str, int]) -> None:
    assert balanced_mig_devices(model) == STATIC_ALL_BALANCED[model]


@pytest.mark.parametrize("model", sorted(MIG_PROFILE_INSTANCES))
def test_profiles_fit_the_seven_compute_slices_of_a_gpu(model: tuple[str, int]) -> None:
    for profile, count in MIG_PROFILE_INSTANCES[model].items():
        slices = int(profile.split("g.", 1)[0])
        assert count >= 1, profile
        assert slices * count <= 7, profile
        if "+me" in profile:
            assert count == 1, "a GPU has one set of media engines"
    assert max(g for g, _ in MIG_BASE_PROFILES[model]) == 7


def test_the_a100_40gb_holds_four_1g_10gb_not_seven() -> None:
    """1g.10gb on an A100-40GB is memory-bound: 4 instances (config-default.yaml, filter 0x20B010DE)."""
    assert MIG_PROFILE_INSTANCES["a100", 40960]["1g.10gb"] == 4
    assert MIG_PROFILE_INSTANCES["h100", 81920]["1g.10gb"] == 7
