"""Upstream facts, each with its source: the lowest layer, imported by `config/` and `components/` alike.

- `facts.eks`: EKS add-on names and version shapes, access policies, upgrade policy, control-plane logs,
  the EBS CSI driver.
- `facts.instance_types`: EC2 instance types (the Karpenter 1.14.1 instance-type reference; the names
  pulumi-aws knows), their sizes and NVIDIA GPUs.
- `facts.mig`: MIG partition profiles per GPU model and how many of each a GPU holds (NVIDIA mig-parted).
- `facts.partitions`: AWS partitions, their DNS suffixes, and ARN/region checks.
- `facts.regions`: AWS regions and their partitions (pulumi-aws's `Region` enum).
- `facts.aws_provider`: the AWS provider's own `aws:` config keys (the installed pulumi-aws SDK).
- `facts.cron`: disruption-budget schedules as Karpenter 1.14.1 parses them (robfig/cron v3.0.1).
- `facts.quantity`: Kubernetes resource quantities as numbers.
- `facts.pricing`: EC2 on-demand list prices (Karpenter 1.14.1's compiled us-east-1 table).
- `facts.gpu_operator`: GPU Operator v26.7.0 and MIG manager labels, operands and their tolerations; who
  writes the device plugin's deploy label; the MIG manager's entrypoint and its kubelet restart.
- `facts.karpenter_lifecycle`: when Karpenter 1.14.1 initializes, times out and repairs nodes; its leader
  Lease.
- `facts.al2023_nvidia`: the EKS AL2023 NVIDIA AMI's container runtime and user-data ordering.
- `facts.bottlerocket`: where the Bottlerocket NVIDIA variants keep nvidia-smi; their runtime default.
- `facts.replacement`: per resource type, which changes make its provider replace it (read by `synth.plan`).
- `facts.metrics`: metric names the DCGM exporter, Karpenter 1.14, kube-state-metrics and the GPU node guard
  really export.
- `facts.prometheus_stack`: pins of kube-prometheus-stack and the Prometheus Operator CRD chart; the default
  scrape interval.
- `facts.controller_runtime`: how controller-runtime v0.23.1 backs off a failing reconcile (5 ms to 1000 s).

Nothing here imports from `config/` or `components/`.
"""
