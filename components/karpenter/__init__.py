"""Karpenter's AWS side and chart values as pure functions: IAM, interruption queue, Helm values.

Modules:
- `components.karpenter.iam`: node role trust and managed policies, the controller policies of upstream's
  CloudFormation template, Pod Identity and IRSA trust policies.
- `components.karpenter.interruption`: SQS queue settings and policy, the five EventBridge rules.
- `components.karpenter.chart_values`: chart coordinates and Helm values of `karpenter-crd` and `karpenter`.
- `facts.partitions`: partitions, DNS suffixes and the input checks shared by the above.

Everything returns plain JSON-able dicts and raises `ValueError` on inputs that cannot be right; the Pulumi
component calls these inside `Output.apply` and contains no decisions of its own.

- `components.karpenter.component`: the `Karpenter` component (`gpu-eks:karpenter:Karpenter`) that turns
  them into resources and installs both charts. Import it from there: this package's pure modules stay
  importable without the Pulumi provider SDKs.
"""
