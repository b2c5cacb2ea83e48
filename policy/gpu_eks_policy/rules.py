"""The guardrails as pure functions: resource inputs in, violation messages out (empty list = compliant).

Inputs arrive as the Pulumi engine passes them to a policy pack: camelCase keys, `Mapping`/`Sequence`
objects that are not necessarily `dict`/`list` (pulumi_policy wraps them in proxies that raise on values
unknown during preview), numbers possibly as floats. Every function here reads through `Mapping` and
`Sequence` and never mutates what it is given.

- NodePool: `kubernetes:karpenter.sh/v1:NodePool` props `apiVersion`, `kind`, `metadata`, `spec`.
- EC2NodeClass: `kubernetes:karpenter.k8s.aws/v1:EC2NodeClass`, same shape.
- Helm: `kubernetes:helm.sh/v3:Release` (and v4 `Chart`) props `chart`, `version`, `repositoryOpts`, `values`.
- IAM: a policy document as a JSON string or as an object.
"""

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
"""Extended resource name of NVIDIA GPUs, used both as the taint key and as the NodePool limit key."""

GPU_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep non-GPU pods off a GPU node (PreferNoSchedule does not)."""

DEFAULT_PRODUCTION_STACKS = ("prod", "production")
DEFAULT_PINNED_CHARTS = (
    "karpenter",
    "karpenter-crd",
    "gpu-operator",
    "aws-efa-k8s-device-plugin",
    "kube-prometheus-stack",
    "prometheus-operator-crds",
)
PRODUCTION_STACK_TAG = "environment"
"""A stack whose Pulumi stack tag `environment` is `production` is production whatever its name."""

_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
_INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
_INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
_INSTANCE_TYPE = "node.kubernetes.io/instance-type"

# EC2 families with NVIDIA GPUs: g4dn, g5, g5g, g6, g6e, g6f, g7, g7e, gr6, gr6f, p3, p3dn, p4d, p4de, p5,
# p5e, p5en, p6-b200, ... (Karpenter 1.14.1 instance-type reference). g4ad carries AMD Radeon GPUs.
_NVIDIA_FAMILY = re.compile(r"^(g|gr|p)\d")
_NON_NVIDIA_FAMILIES = frozenset({"g4ad"})
_GPU_CATEGORIES = frozenset({"g", "p"})

# Exact SemVer 2.0 (Helm requires chart versions to be SemVer), with the optional `v` prefix some charts
# use (the GPU Operator publishes `v26.7.0`; Karpenter publishes `1.14.1`).
_EXACT_SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$"
)
_RANGE_MARKERS = ("^", "~", ">", "<", "=", "*", "|", " ", ",")
_WILDCARD_PARTS = frozenset({"x", "X", "*"})


# --- reading engine-shaped values ---------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> Sequence[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return ()


def _path(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = _mapping(obj).get(key)
    return obj


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _strings(value: Any) -> list[str]:
    """A string or a sequence of strings as a list (IAM `Action` and requirement `values` take both)."""
    if isinstance(value, str):
        return [value]
    return [item for item in _sequence(value) if isinstance(item, str)]


# --- Karpenter NodePool -------------------------------------------------------------------------


def _is_nvidia_family(family: str) -> bool:
    family = family.strip().lower()
    return bool(_NVIDIA_FAMILY.match(family)) and family not in _NON_NVIDIA_FAMILIES


def _numeric_requirement_admits_gpus(operator: str, values: list[str]) -> bool:
    """Whether a numeric GPU requirement (count or memory) admits instance types that have GPUs.

    `Gt`/`Gte` have no upper bound, so they always admit GPU types; `Lt`/`Lte` admit them when the bound
    lets a value of 1 through; `In` when one of its values is positive.
    """
    numbers = [n for n in (_number(v) for v in values) if n is not None]
    if operator in ("Gt", "Gte"):
        return True
    if operator == "In":
        return any(n > 0 for n in numbers)
    if operator == "Lt":
        return any(n > 1 for n in numbers)
    if operator == "Lte":
        return any(n >= 1 for n in numbers)
    return False


def _name_selects_gpus(operator: str, values: list[str]) -> bool:
    return operator == "Exists" or (operator == "In" and bool(values))


def _manufacturer_selects_gpus(operator: str, values: list[str]) -> bool:
    return operator == "Exists" or (operator == "In" and any(v.lower() == "nvidia" for v in values))


def _family_selects_gpus(operator: str, values: list[str]) -> bool:
    return operator == "In" and any(_is_nvidia_family(v) for v in values)


def _category_selects_gpus(operator: str, values: list[str]) -> bool:
    return operator == "In" and any(v.strip().lower() in _GPU_CATEGORIES for v in values)


def _instance_type_selects_gpus(operator: str, values: list[str]) -> bool:
    return operator == "In" and any(_is_nvidia_family(v.split(".", 1)[0]) for v in values)


_GPU_SELECTORS: dict[str, Callable[[str, list[str]], bool]] = {
    _GPU_COUNT: _numeric_requirement_admits_gpus,
    _GPU_MEMORY: _numeric_requirement_admits_gpus,
    _GPU_NAME: _name_selects_gpus,
    _GPU_MANUFACTURER: _manufacturer_selects_gpus,
    _INSTANCE_FAMILY: _family_selects_gpus,
    _INSTANCE_CATEGORY: _category_selects_gpus,
    _INSTANCE_TYPE: _instance_type_selects_gpus,
}


def gpu_requirement(requirement: Mapping[str, Any]) -> bool:
    """Whether one NodePool requirement (`{key, operator, values}`) selects GPU instances.

    Conservative: a requirement that admits any GPU instance type counts (`instance-category In [c, g]`
    makes a pool that can launch GPU nodes). `NotIn` and `DoesNotExist` never select GPUs, nor does
    `instance-gpu-count Exists` (some non-GPU types carry the label with the value 0).
    """
    key = requirement.get("key")
    operator = requirement.get("operator")
    if not isinstance(key, str) or not isinstance(operator, str) or key not in _GPU_SELECTORS:
        return False
    return _GPU_SELECTORS[key](operator, _strings(requirement.get("values")))


def _requirements(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for requirement in _sequence(_path(spec, "template", "spec", "requirements")):
        if isinstance(requirement, Mapping):
            yield requirement


def is_gpu_nodepool(spec: Mapping[str, Any]) -> bool:
    """Whether a NodePool `spec` selects GPU instances through any of its requirements."""
    return any(gpu_requirement(r) for r in _requirements(spec))


def _describe(requirement: Mapping[str, Any]) -> str:
    text = f"{requirement.get('key')} {requirement.get('operator')}"
    values = _strings(requirement.get("values"))
    return f"{text} [{', '.join(values)}]" if values else text


def nodepool_limits_violations(props: Mapping[str, Any]) -> list[str]:
    """Every NodePool carries `spec.limits`, so that a runaway scale-up has a ceiling."""
    limits = _path(props, "spec", "limits")
    if not isinstance(limits, Mapping) or not limits:
        return [
            "NodePool has no spec.limits: set at least a cpu (and for GPU pools an nvidia.com/gpu) limit "
            "so that Karpenter cannot scale it without bound."
        ]
    return []


def gpu_nodepool_violations(props: Mapping[str, Any]) -> list[str]:
    """A GPU NodePool taints `nvidia.com/gpu` (NoSchedule/NoExecute) and limits `nvidia.com/gpu`."""
    spec = _mapping(props.get("spec"))
    selecting = [r for r in _requirements(spec) if gpu_requirement(r)]
    if not selecting:
        return []
    why = f"NodePool selects GPU instances ({'; '.join(_describe(r) for r in selecting)})"
    violations = []
    taints = [_mapping(t) for t in _sequence(_path(spec, "template", "spec", "taints"))]
    if not any(t.get("key") == GPU_RESOURCE and t.get("effect") in GPU_TAINT_EFFECTS for t in taints):
        violations.append(
            f"{why} but spec.template.spec.taints has no '{GPU_RESOURCE}' taint with effect NoSchedule or "
            "NoExecute: non-GPU pods would land on (and keep alive) expensive GPU nodes."
        )
    limit = _mapping(spec.get("limits")).get(GPU_RESOURCE)
    number = _number(limit)
    if limit is None or (isinstance(limit, str) and not limit.strip()):
        violations.append(f"{why} but spec.limits has no '{GPU_RESOURCE}' limit.")
    elif number is not None and number <= 0:
        violations.append(
            f"{why} but its spec.limits['{GPU_RESOURCE}'] is {limit}: it could never launch a node."
        )
    return violations


# --- Karpenter EC2NodeClass ---------------------------------------------------------------------


def imdsv2_violations(props: Mapping[str, Any]) -> list[str]:
    """The node class states `spec.metadataOptions.httpTokens: required` (IMDSv2 only).

    The v1 CRD defaults it to `required`, but the pack asks for it explicitly so that the guardrail does
    not depend on the CRD version installed in the cluster.
    """
    tokens = _path(props, "spec", "metadataOptions", "httpTokens")
    if tokens == "required":
        return []
    found = "is missing" if tokens is None else f"is '{tokens}'"
    return [
        f"EC2NodeClass spec.metadataOptions.httpTokens {found}: set it to 'required' so that nodes only "
        "serve IMDSv2 and pods cannot read the node role's credentials through IMDSv1."
    ]


def ebs_encryption_violations(props: Mapping[str, Any]) -> list[str]:
    """Every `spec.blockDeviceMappings[].ebs` sets `encrypted: true`.

    No `blockDeviceMappings` at all is compliant: Karpenter's default root volume is encrypted gp3.
    """
    violations = []
    for index, mapping in enumerate(_sequence(_path(props, "spec", "blockDeviceMappings"))):
        device = _mapping(mapping).get("deviceName") or f"#{index}"
        if _path(mapping, "ebs", "encrypted") is not True:
            violations.append(
                f"EC2NodeClass spec.blockDeviceMappings[{index}] ({device}) does not set ebs.encrypted: true."
            )
    return violations


def latest_ami_alias_violations(props: Mapping[str, Any]) -> list[str]:
    """No `spec.amiSelectorTerms[].alias` ends with `@latest` (call it only for production stacks)."""
    violations = []
    for index, term in enumerate(_sequence(_path(props, "spec", "amiSelectorTerms"))):
        alias = _mapping(term).get("alias")
        if isinstance(alias, str) and alias.strip().lower().endswith("@latest"):
            violations.append(
                f"EC2NodeClass spec.amiSelectorTerms[{index}].alias is '{alias}' in a production stack: pin "
                "an AMI release (for example al2023@v20260714) so that a new AMI rolls out through a "
                "reviewed change, not as drift that replaces every node."
            )
    return violations


def is_production_stack(
    stack: str | None, stack_tags: Mapping[str, str], production_stacks: Sequence[str]
) -> bool:
    """Whether a stack is production: its name is in `production_stacks` or its `environment` tag says so.

    `stack` may be fully qualified (`org/project/stack`). An unknown stack name counts as production
    (fail closed): a guardrail that silently switches off is worse than one that asks for a pin.
    """
    if (stack_tags.get(PRODUCTION_STACK_TAG) or "").strip().lower() == "production":
        return True
    if not stack:
        return True
    return stack.rsplit("/", 1)[-1] in production_stacks


# --- Helm releases ------------------------------------------------------------------------------


def chart_name(chart: str) -> str:
    """The bare chart name of `karpenter`, `nvidia/gpu-operator` or `oci://public.ecr.aws/karpenter/karpenter`."""
    return chart.strip().rstrip("/").rsplit("/", 1)[-1]


def version_pin_problem(version: Any) -> str | None:
    """Why `version` is not an exact chart version, or None when it is one."""
    if version is None or (isinstance(version, str) and not version.strip()):
        return "has no version: Helm would install whatever is newest"
    if not isinstance(version, str):
        return f"has a non-string version {version!r}"
    text = version.strip()
    if "latest" in text.lower():
        return f"asks for '{text}'"
    core = re.split(r"[-+]", text.removeprefix("v"), maxsplit=1)[0]
    if any(marker in text for marker in _RANGE_MARKERS) or _WILDCARD_PARTS & set(core.split(".")):
        return f"has the version range '{text}'"
    if not _EXACT_SEMVER.match(text):
        return f"has '{text}', which is not an exact SemVer version"
    return None


def helm_version_violations(props: Mapping[str, Any], charts: Sequence[str]) -> list[str]:
    """A release of one of `charts` pins an exact version."""
    chart = props.get("chart")
    if not isinstance(chart, str) or chart_name(chart) not in charts:
        return []
    problem = version_pin_problem(props.get("version"))
    if problem is None:
        return []
    return [f"Helm release of chart '{chart}' {problem}; pin an exact version such as 1.14.1 or v26.7.0."]


# --- IAM ----------------------------------------------------------------------------------------


def wildcard_action_problem(action: str, allowed_service_wildcards: Sequence[str]) -> str | None:
    """Why an Allow action is too broad: `*` always, `service:*` unless allowed; None otherwise.

    Partial wildcards (`ec2:Describe*`) are accepted. IAM action names are case-insensitive.
    """
    text = action.strip()
    if text and set(text) <= {"*", "?"}:
        return f"'{action}' allows every action of every service"
    service, sep, name = text.partition(":")
    if not sep or not name or not set(name) <= {"*", "?"}:
        return None
    if set(service) <= {"*", "?"}:
        return f"'{action}' allows every action of every service"
    allowed = {a.strip().lower() for a in allowed_service_wildcards}
    if f"{service.lower()}:*" in allowed:
        return None
    return f"'{action}' allows every {service} action"


def policy_document_violations(document: Any, allowed_service_wildcards: Sequence[str]) -> list[str]:
    """Violations of one IAM policy document (JSON string or object): wildcard actions in Allow statements.

    Deny statements may use wildcards (they only take permissions away). `NotAction` in an Allow statement
    allows everything except the listed actions, so it counts as a wildcard too.
    """
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError as exc:
            return [f"the policy document is not valid JSON ({exc.msg})"]
    if not isinstance(document, Mapping):
        return ["the policy document is not a JSON object"]
    statements = document.get("Statement")
    if isinstance(statements, Mapping):
        statements = [statements]
    violations = []
    for index, item in enumerate(_sequence(statements)):
        statement = _mapping(item)
        if str(statement.get("Effect", "Allow")).strip().lower() == "deny":
            continue
        label = f"statement {statement['Sid']!r}" if statement.get("Sid") else f"statement #{index}"
        if "NotAction" in statement:
            violations.append(f"{label} combines Allow with NotAction, which allows every other action")
        for action in _strings(statement.get("Action")):
            problem = wildcard_action_problem(action, allowed_service_wildcards)
            if problem:
                violations.append(f"{label}: {problem}")
    return violations


IAM_POLICY_TYPES = frozenset(
    {
        "aws:iam/policy:Policy",
        "aws:iam/rolePolicy:RolePolicy",
        "aws:iam/userPolicy:UserPolicy",
        "aws:iam/groupPolicy:GroupPolicy",
    }
)
IAM_ROLE_TYPE = "aws:iam/role:Role"


def iam_policy_documents(resource_type: str, props: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The permission-policy documents a resource carries, each with a label for messages.

    A role's `assumeRolePolicy` is a trust policy (who may assume it), not a permission policy: not checked.
    """
    if resource_type in IAM_POLICY_TYPES:
        return [("policy", props["policy"])] if props.get("policy") is not None else []
    if resource_type == IAM_ROLE_TYPE:
        documents = []
        for index, item in enumerate(_sequence(props.get("inlinePolicies"))):
            inline = _mapping(item)
            if inline.get("policy") is not None:
                documents.append((f"inlinePolicies[{index}] ({inline.get('name', '')})", inline["policy"]))
        return documents
    return []


def iam_wildcard_violations(
    resource_type: str, props: Mapping[str, Any], allowed_service_wildcards: Sequence[str] = ()
) -> list[str]:
    """Wildcard-action violations across every permission-policy document of an IAM resource."""
    return [
        f"IAM {label}: {violation}"
        for label, document in iam_policy_documents(resource_type, props)
        for violation in policy_document_violations(document, allowed_service_wildcards)
    ]
