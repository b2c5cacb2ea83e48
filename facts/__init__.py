"""Upstream facts, each with its source: the lowest layer, imported by `config/` and `components/` alike.

- `facts.instance_types`: NVIDIA GPU instance types (the Karpenter 1.14.1 instance-type table).
- `facts.mig`: MIG partition profiles per GPU model and how many of each a GPU holds (NVIDIA mig-parted).
- `facts.partitions`: AWS partitions, their DNS suffixes, and ARN/region checks.

Nothing here imports from `config/` or `components/`.
"""
