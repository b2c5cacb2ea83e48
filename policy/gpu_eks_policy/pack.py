"""The policy objects: each binds resource types and config to a pure rule from `rules`.

`build_policies()` is what `__main__.py` registers; tests call it too, since constructing a `PolicyPack`
starts the analyzer's gRPC server and blocks forever.
"""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from . import rules, spend

POLICY_PACK_NAME = "gpu-eks-guardrails"
ENFORCEMENT_LEVEL = EnforcementLevel.MANDATORY
"""Default for every policy; a policy pack config file can lower one (`"<policy>": "advisory"`)."""

NODEPOOL_TYPE = "kubernetes:karpenter.sh/v1:NodePool"
EC2NODECLASS_TYPE = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
HELM_RELEASE_TYPES = frozenset({"kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"})
IAM_TYPES = rules.IAM_POLICY_TYPES | {rules.IAM_ROLE_TYPE}

STACK_ENV_VAR = "PULUMI_STACK"
"""Set by the Pulumi CLI on the policy pack process (with PULUMI_PROJECT, PULUMI_ORGANIZATION, ...)."""

Rule = Callable[[ResourceValidationArgs], list[str]]


def _string_list(config: Mapping[str, Any], key: str, default: Sequence[str]) -> list[str]:
    value = config.get(key)
    if value is None:
        return list(default)
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"policy config '{key}' must be a list of strings, not {value!r}")
    return [str(item) for item in value]


def _string_array_schema(description: str, default: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "string"},
        "default": list(default),
        "description": description,
    }


def _validation(
    resource_types: frozenset[str], rule: Rule
) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type not in resource_types:
            return
        for message in rule(args):
            report_violation(message, None)

    return validate


def _policy(  # noqa: PLR0917 (positional: the table in build_policies reads better without keywords)
    name: str,
    description: str,
    resource_types: frozenset[str],
    rule: Rule,
    severity: Severity,
    remediation: str,
    config_schema: PolicyConfigSchema | None = None,
) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=_validation(resource_types, rule),
        enforcement_level=ENFORCEMENT_LEVEL,
        config_schema=config_schema,
        severity=severity,
        remediation_steps=remediation,
        tags=["gpu-eks"],
    )


def _latest_ami_rule(args: ResourceValidationArgs) -> list[str]:
    production_stacks = _string_list(args.get_config(), "productionStacks", rules.DEFAULT_PRODUCTION_STACKS)
    stack = os.environ.get(STACK_ENV_VAR)
    if not rules.is_production_stack(stack, args.stack_tags, production_stacks):
        return []
    return rules.latest_ami_alias_violations(args.props)


def _helm_rule(args: ResourceValidationArgs) -> list[str]:
    charts = _string_list(args.get_config(), "charts", rules.DEFAULT_PINNED_CHARTS)
    return rules.helm_version_violations(args.props, charts)


def _iam_rule(args: ResourceValidationArgs) -> list[str]:
    allowed = _string_list(args.get_config(), "allowedServiceWildcards", ())
    return rules.iam_wildcard_violations(args.resource_type, args.props, allowed)


def _spend_rule(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    cap = spend.stack_cap(args.get_config().get("maxWorstCaseUsdPerHour"), os.environ.get(STACK_ENV_VAR))
    manifests = [r.props for r in args.resources]
    for message in spend.worst_case_violations(manifests, cap):
        report_violation(message, None)


def spend_policy() -> StackValidationPolicy:
    """The bound on the node pools' worst-case spend, over every NodePool and NodeOverlay of the stack."""
    return StackValidationPolicy(
        name="karpenter-worst-case-spend",
        description="The NodePools' worst-case spend (the most their limits admit at once, at on-demand list "
        "price) is bounded, and within the stack's cap.",
        validate=_spend_rule,
        enforcement_level=ENFORCEMENT_LEVEL,
        config_schema=PolicyConfigSchema(
            {
                "maxWorstCaseUsdPerHour": {
                    "type": "object",
                    "additionalProperties": {"type": "number", "exclusiveMinimum": 0},
                    "default": {},
                    "description": "Stack name -> the most its NodePools may cost per hour at once, in USD "
                    "('*' for every other stack); the same figure as the stack's "
                    "gpu-eks:cost.maxWorstCaseUsdPerHour.",
                }
            }
        ),
        severity=Severity.HIGH,
        remediation_steps="Lower the NodePools' spec.limits (nvidia.com/gpu, cpu, memory), or raise the cap "
        "in the policy configuration together with the stack's gpu-eks:cost.maxWorstCaseUsdPerHour.",
        tags=["gpu-eks", "cost"],
    )


def build_policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    """Every policy of the pack, in the order the engine reports them."""
    nodepool = frozenset({NODEPOOL_TYPE})
    nodeclass = frozenset({EC2NODECLASS_TYPE})
    return [
        _policy(
            "karpenter-nodepool-limits",
            "Every Karpenter NodePool sets spec.limits.",
            nodepool,
            lambda args: rules.nodepool_limits_violations(args.props),
            Severity.MEDIUM,
            "Add spec.limits (for example cpu and memory, and nvidia.com/gpu on GPU pools) to the NodePool.",
        ),
        _policy(
            "karpenter-gpu-nodepool-taint-and-limit",
            "A NodePool that selects GPU instances taints nvidia.com/gpu and limits nvidia.com/gpu.",
            nodepool,
            lambda args: rules.gpu_nodepool_violations(args.props),
            Severity.HIGH,
            "Add the taint {key: nvidia.com/gpu, effect: NoSchedule} to spec.template.spec.taints and an "
            "nvidia.com/gpu entry to spec.limits.",
        ),
        _policy(
            "karpenter-nodeclass-imdsv2",
            "Every EC2NodeClass requires IMDSv2 (spec.metadataOptions.httpTokens: required).",
            nodeclass,
            lambda args: rules.imdsv2_violations(args.props),
            Severity.HIGH,
            "Set spec.metadataOptions.httpTokens to 'required' (and keep httpPutResponseHopLimit at 1).",
        ),
        _policy(
            "karpenter-nodeclass-encrypted-ebs",
            "Every EBS volume of an EC2NodeClass is encrypted.",
            nodeclass,
            lambda args: rules.ebs_encryption_violations(args.props),
            Severity.HIGH,
            "Set ebs.encrypted: true on every entry of spec.blockDeviceMappings.",
        ),
        _policy(
            "karpenter-no-latest-ami-in-production",
            "EC2NodeClasses of production stacks pin their AMI alias (no '@latest').",
            nodeclass,
            _latest_ami_rule,
            Severity.HIGH,
            "Replace 'family@latest' with a released version such as 'al2023@v20260714'.",
            PolicyConfigSchema(
                {
                    "productionStacks": _string_array_schema(
                        "Stack names that are production (besides stacks tagged environment=production).",
                        rules.DEFAULT_PRODUCTION_STACKS,
                    )
                }
            ),
        ),
        _policy(
            "helm-release-pinned-version",
            "The Karpenter, GPU Operator and EFA device plugin Helm releases pin an exact chart version.",
            HELM_RELEASE_TYPES,
            _helm_rule,
            Severity.MEDIUM,
            "Set the release's version to an exact chart version (no range, no 'latest').",
            PolicyConfigSchema(
                {
                    "charts": _string_array_schema(
                        "Chart names (last path segment of `chart`) whose releases must pin a version.",
                        rules.DEFAULT_PINNED_CHARTS,
                    )
                }
            ),
        ),
        _policy(
            "iam-no-wildcard-actions",
            "IAM permission policies allow no '*' or 'service:*' action.",
            frozenset(IAM_TYPES),
            _iam_rule,
            Severity.CRITICAL,
            "List the actions the principal needs; a partial wildcard such as ec2:Describe* is accepted.",
            PolicyConfigSchema(
                {
                    "allowedServiceWildcards": _string_array_schema(
                        "Service-wide wildcards to accept, such as 'logs:*' ('*' itself is never accepted).",
                        (),
                    )
                }
            ),
        ),
        spend_policy(),
    ]
