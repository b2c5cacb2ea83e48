"""Read the vendored CloudFormation template and resolve it for one cluster, region, account and partition.

A small YAML loader for the three intrinsic-function tags the template uses (`!Sub`, `!GetAtt`, `!Ref`).
Any other tag fails to load, and a `${...}` or reference without a value fails to resolve, so a template
that starts using something new breaks the tests instead of being half-compared.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).parent.parent / "fixtures" / "karpenter-1.14.1"
TEMPLATE = FIXTURES / "cloudformation.yaml"
_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass(frozen=True)
class Intrinsic:
    """An intrinsic function as written in the template: `!<function> <argument>`."""

    function: str
    argument: Any


class _TemplateLoader(yaml.SafeLoader):
    pass


def _scalar(function: str) -> Any:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Intrinsic:
        if isinstance(node, yaml.ScalarNode):
            return Intrinsic(function, loader.construct_scalar(node))
        if isinstance(node, yaml.SequenceNode):
            return Intrinsic(function, loader.construct_sequence(node, deep=True))
        raise yaml.constructor.ConstructorError(None, None, f"unexpected !{function} node", node.start_mark)

    return construct


for _function in ("Sub", "GetAtt", "Ref"):
    _TemplateLoader.add_constructor(f"!{_function}", _scalar(_function))


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as plain YAML data, intrinsic functions kept as `Intrinsic`."""
    with path.open(encoding="utf-8") as stream:
        data: dict[str, Any] = yaml.load(stream, Loader=_TemplateLoader)
    return data


def resolve(value: Any, parameters: dict[str, str]) -> Any:
    """`value` with every intrinsic function evaluated against `parameters`.

    `parameters` maps `${...}` names (`AWS::Partition`, `ClusterName`, `KarpenterNodeRole.Arn`, ...) and
    `!Ref` / `!GetAtt` targets to their values. A policy document written as a `!Sub` JSON string is
    returned parsed.
    """
    if isinstance(value, Intrinsic):
        if value.function == "Sub":
            if not isinstance(value.argument, str):
                raise ValueError(f"!Sub with variables is not supported: {value.argument!r}")
            text = _VARIABLE.sub(lambda match: _lookup(match.group(1), parameters), value.argument)
            stripped = text.strip()
            return json.loads(stripped) if stripped.startswith("{") else text
        return _lookup(value.argument, parameters)
    if isinstance(value, dict):
        return {key: resolve(item, parameters) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, parameters) for item in value]
    return value


def _lookup(name: str, parameters: dict[str, str]) -> str:
    if name not in parameters:
        raise KeyError(
            f"the template uses {name!r}, which the test does not map; map it in the code and test"
        )
    return parameters[name]


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical ID -> properties of every resource of `resource_type`, in template order."""
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }
