"""gpu-eks guardrails: pure rules (`rules`) and the pulumi_policy objects built on them (`pack`)."""

from .pack import ENFORCEMENT_LEVEL, POLICY_PACK_NAME, build_policies

__all__ = ["ENFORCEMENT_LEVEL", "POLICY_PACK_NAME", "build_policies"]
