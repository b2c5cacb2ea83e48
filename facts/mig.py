"""MIG facts per GPU model: the partition profiles each MIG-capable GPU offers, and how many of each.

Source: NVIDIA/mig-parted `deployments/systemd/config-default.yaml` at tag v0.15.0
(e2d5ad1fc72b9d298ea6d04b885cf2d7dbe56941; unchanged since, up to bd7160f43f16), the release the GPU
Operator v26.7.0 runs as its MIG manager. Each `all-<profile>` config there creates, on every GPU, the
largest number of instances of that profile the GPU offers; the MIG manager v0.15 generates the same configs
from the hardware (`pkg/mig/builder/builder.go`: `mig-devices: {<profile>: <MaxCount>}`, `+` written `.` in
the config name).
The B300 profiles came with mig-parted commit 47c56d9689de ("add support for the B300 GPU node").
Keyed by the instance-type table's gpu-name and gpu-memory-MiB; GPUs not listed (a30) get a syntax check only.
"""

from collections.abc import Mapping
from typing import Final

_HOPPER_80GB: Final = {
    "1g.10gb": 7,
    "1g.10gb+me": 1,
    "1g.20gb": 4,
    "2g.20gb": 3,
    "3g.40gb": 2,
    "4g.40gb": 1,
    "7g.80gb": 1,
}

MIG_PROFILE_INSTANCES: Final[Mapping[tuple[str, int], Mapping[str, int]]] = {
    # A100-40GB (p4d)
    ("a100", 40960): {
        "1g.5gb": 7,
        "1g.5gb+me": 1,
        "1g.10gb": 4,
        "2g.10gb": 3,
        "3g.20gb": 2,
        "4g.20gb": 1,
        "7g.40gb": 1,
    },
    # A100-80GB (p4de) and H100-80GB (p5) offer the same profiles.
    ("a100", 81920): _HOPPER_80GB,
    ("h100", 81920): _HOPPER_80GB,
    # H200-141GB (p5e, p5en); 1g.35gb is 4 per GPU on H200 (device-filter 0x233510DE).
    ("h200", 144384): {
        "1g.18gb": 7,
        "1g.18gb+me": 1,
        "1g.35gb": 4,
        "2g.35gb": 3,
        "3g.71gb": 2,
        "4g.71gb": 1,
        "7g.141gb": 1,
    },
    # B200 (p6-b200)
    ("b200", 183359): {
        "1g.23gb": 7,
        "1g.23gb+me": 1,
        "1g.45gb": 4,
        "2g.45gb": 3,
        "3g.90gb": 2,
        "4g.90gb": 1,
        "7g.180gb": 1,
    },
    # B300 (p6-b300)
    ("b300", 275040): {
        "1g.34gb": 7,
        "1g.34gb+me": 1,
        "1g.67gb": 4,
        "2g.67gb": 3,
        "3g.135gb": 2,
        "4g.135gb": 1,
        "7g.269gb": 1,
    },
}
"""GPU model -> MIG profile (as NVML names it, `1g.10gb+me`) -> instances of it one GPU holds at most."""


def _base(profile: str) -> tuple[int, int] | None:
    """(slices, GB) of a profile without attributes (`3g.40gb` -> (3, 40)); None for `1g.10gb+me`."""
    if "+" in profile or "-" in profile:
        return None
    g, gb = profile.removesuffix("gb").split("g.")
    return int(g), int(gb)


MIG_BASE_PROFILES: Final[Mapping[tuple[str, int], frozenset[tuple[int, int]]]] = {
    gpu: frozenset(base for profile in profiles if (base := _base(profile)) is not None)
    for gpu, profiles in MIG_PROFILE_INSTANCES.items()
}
"""Base MIG profiles (GPU slices, memory GB) per GPU model, keyed like `MIG_PROFILE_INSTANCES`."""

MIG_BALANCED_FORMULA: Final[Mapping[int, Mapping[int, int]]] = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}
"""How mig-parted v0.15 builds `all-balanced` (`pkg/mig/builder/balanced.go`, `balancedFormula`): by the GPU's
slice count (its largest profile's `g`), instances per profile size, each size taking the base profile with
the most instances (1g.10gb over 1g.20gb). It matches the static `all-balanced` of config-default.yaml."""


def balanced_mig_devices(gpu: tuple[str, int]) -> dict[str, int]:
    """mig-parted's `all-balanced` mig-devices on a GPU model, e.g. `{"1g.10gb": 2, "2g.20gb": 1, ...}`."""
    profiles = MIG_PROFILE_INSTANCES[gpu]
    bases = {p: base for p in profiles if (base := _base(p)) is not None}
    slots = max(g for g, _ in bases.values())
    devices = {}
    for size, count in MIG_BALANCED_FORMULA[slots].items():
        choices = [p for p, (g, _) in bases.items() if g == size]
        devices[max(choices, key=lambda p: profiles[p])] = count
    return devices
