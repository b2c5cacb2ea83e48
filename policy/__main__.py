"""Entry point of the gpu-eks policy pack: `pulumi preview --policy-pack policy`.

The Pulumi CLI runs this directory with runpy, which puts it first on sys.path: `gpu_eks_policy` is
imported as a top-level package. Constructing the PolicyPack serves the policies to the engine over gRPC
and does not return.
"""

from gpu_eks_policy import ENFORCEMENT_LEVEL, POLICY_PACK_NAME, build_policies
from pulumi_policy import PolicyPack

PolicyPack(
    name=POLICY_PACK_NAME,
    policies=list(build_policies()),
    enforcement_level=ENFORCEMENT_LEVEL,
    description="Guardrails for gpu-eks: Karpenter GPU pools, node classes, pinned charts, IAM wildcards.",
)
