"""MIG facts per GPU model: which partition profiles each MIG-capable GPU offers (pure data)."""

# Base MIG profiles (GPU slices, memory GB) per GPU model, as mig-parted names them (the MIG manager v0.15
# generates `all-<profile>` configs from these on each node, `+` written `.`). Source: NVIDIA/mig-parted
# deployments/systemd/config-default.yaml @ 1400787269cadb4f91db863a4b9f9af5c8fabcd7. Keyed by the
# instance-type table's gpu-name and gpu-memory-MiB; GPUs not listed (a30, b300) get a syntax check only.
MIG_BASE_PROFILES: dict[tuple[str, int], frozenset[tuple[int, int]]] = {
    ("a100", 40960): frozenset({(1, 5), (1, 10), (2, 10), (3, 20), (4, 20), (7, 40)}),
    ("a100", 81920): frozenset({(1, 10), (1, 20), (2, 20), (3, 40), (4, 40), (7, 80)}),
    ("h100", 81920): frozenset({(1, 10), (1, 20), (2, 20), (3, 40), (4, 40), (7, 80)}),
    ("h200", 144384): frozenset({(1, 18), (1, 35), (2, 35), (3, 71), (4, 71), (7, 141)}),
    ("b200", 183359): frozenset({(1, 23), (1, 45), (2, 45), (3, 90), (4, 90), (7, 180)}),
}
"""Base MIG profiles per GPU model, keyed by the instance-type table's (gpu-name, gpu-memory-MiB)."""
