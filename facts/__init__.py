"""Upstream facts, each with its source: the lowest layer, imported by `config/` and `components/` alike.

- `facts.eks`: EKS add-on names and version shapes, access policies, upgrade policy, control-plane logs,
  the EBS CSI driver.
- `facts.instance_types`: NVIDIA GPU instance types (the Karpenter 1.14.1 instance-type table).
- `facts.mig`: MIG partition profiles per GPU model (NVIDIA mig-parted).
- `facts.partitions`: AWS partitions, their DNS suffixes, and ARN/region checks.

Nothing here imports from `config/` or `components/`.
"""
