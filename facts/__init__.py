"""Upstream facts, each with its source: the lowest layer, imported by `config/` and `components/` alike.

- `facts.instance_types`: NVIDIA GPU instance types (the Karpenter 1.14.1 instance-type table).
- `facts.mig`: MIG partition profiles per GPU model (NVIDIA mig-parted).
- `facts.partitions`: AWS partitions, their DNS suffixes, and ARN/region checks.
- `facts.metrics`: metric names the DCGM exporter, Karpenter 1.14 and kube-state-metrics really export.
- `facts.prometheus_stack`: pins of kube-prometheus-stack and the Prometheus Operator CRD chart.

Nothing here imports from `config/` or `components/`.
"""
