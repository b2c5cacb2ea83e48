"""Upstream facts, each with its source: the lowest layer, imported by `config/` and `components/` alike.

- `facts.instance_types`: EC2 instance types (the Karpenter 1.14.1 instance-type reference; the names
  pulumi-aws knows), their sizes and NVIDIA GPUs.
- `facts.mig`: MIG partition profiles per GPU model (NVIDIA mig-parted).
- `facts.partitions`: AWS partitions, their DNS suffixes, and ARN/region checks.
- `facts.regions`: AWS regions and their partitions (pulumi-aws's `Region` enum).
- `facts.aws_provider`: the AWS provider's own `aws:` config keys (the installed pulumi-aws SDK).
- `facts.cron`: disruption-budget schedules as Karpenter 1.14.1 parses them (robfig/cron v3.0.1).
- `facts.quantity`: Kubernetes resource quantities as numbers.

Nothing here imports from `config/` or `components/`.
"""
