"""The hand-written models against the vendored CRD schemas, property by property.

The CRD's `openAPIV3Schema` and the model's JSON schema (`by_alias=True`) are walked side by side. Every
property path must exist on both sides with the same key (alias), the same required-ness, type, enum values,
pattern, bounds, list semantics (`x-kubernetes-list-type: set` <-> `uniqueItems`) and default (the CRD's
`default` <-> the model's `serverDefault`, since the models leave server defaults out of their output).
`status` is the only part of the CRDs the models leave out, on purpose (it is controller-owned).
"""

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from components.karpenter_api import (
    EC2NodeClass,
    KarpenterModel,
    NodeOverlay,
    NodePool,
    common,
    ec2nodeclass,
    nodeoverlay,
    nodepool,
)
from tests.support.crd_check import CRD_DIR, rules

Schema = Mapping[str, Any]

_CASES = [
    pytest.param(NodePool, "karpenter.sh_nodepools.yaml", id="NodePool"),
    pytest.param(EC2NodeClass, "karpenter.k8s.aws_ec2nodeclasses.yaml", id="EC2NodeClass"),
    pytest.param(NodeOverlay, "karpenter.sh_nodeoverlays.yaml", id="NodeOverlay"),
]
_BOUNDS = ("pattern", "maxLength", "minLength", "minimum", "maximum", "minItems", "maxItems", "maxProperties")
_IGNORED_BY_THE_API_SERVER = {
    # String keywords the CRD writes on an *array*; validation keywords apply to their own type only.
    ("NodePool", "spec.template.spec.requirements[*].values"): {"maxLength", "pattern"},
    ("NodeOverlay", "spec.requirements[*].values"): {"maxLength", "pattern"},
}
_LEFT_OUT = {"status"}


@functools.cache
def _crd(file: str) -> tuple[str, Schema]:
    doc = yaml.load((CRD_DIR / file).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (version,) = [v for v in doc["spec"]["versions"] if v["served"]]
    return f"{doc['spec']['group']}/{version['name']}", version["schema"]["openAPIV3Schema"]


class _Walker:
    def __init__(self, kind: str, defs: Mapping[str, Schema]) -> None:
        self.kind = kind
        self.defs = defs
        self.problems: list[str] = []
        self.paths: list[str] = []

    def resolve(self, node: Schema) -> dict[str, Any]:
        """`node` without the `Optional` wrapper and with `$ref` followed; sibling keys are kept."""
        resolved = {k: v for k, v in node.items() if k not in ("default", "title", "description")}
        any_of = resolved.get("anyOf")
        if any_of and len(any_of) == 2 and {"type": "null"} in any_of:
            (branch,) = [b for b in any_of if b != {"type": "null"}]
            del resolved["anyOf"]
            resolved.update(branch)
        if "$ref" in resolved:
            target = self.defs[resolved.pop("$ref").rsplit("/", 1)[-1]]
            resolved = {**self.resolve(target), **resolved}
        return resolved

    def fail(self, path: str, problem: str) -> None:
        self.problems.append(f"{self.kind} {path}: {problem}")

    def compare(self, crd: Schema, model_node: Schema, path: str) -> None:
        self.paths.append(path)
        model = self.resolve(model_node)
        if crd.get("x-kubernetes-int-or-string"):
            branches = sorted(
                (self.resolve(b) for b in model.get("anyOf", [])), key=lambda b: str(b.get("type"))
            )
            if [b.get("type") for b in branches] != ["integer", "string"]:
                self.fail(path, f"int-or-string in the CRD, model has {model}")
            elif branches[1].get("pattern") != crd.get("pattern"):
                self.fail(path, f"pattern {crd.get('pattern')!r} != model {branches[1].get('pattern')!r}")
            return
        if crd.get("type") != model.get("type"):
            self.fail(path, f"type {crd.get('type')!r} != model {model.get('type')!r}")
        model_enum = model.get("enum", [model["const"]] if "const" in model else None)
        if crd.get("enum") != model_enum:
            self.fail(path, f"enum {crd.get('enum')} != model {model_enum}")
        ignored = _IGNORED_BY_THE_API_SERVER.get((self.kind, path), set())
        for keyword in _BOUNDS:
            if keyword not in ignored and crd.get(keyword) != model.get(keyword):
                self.fail(path, f"{keyword} {crd.get(keyword)!r} != model {model.get(keyword)!r}")
        if crd.get("format") != model.get("format"):
            self.fail(path, f"format {crd.get('format')!r} != model {model.get('format')!r}")
        if crd.get("default") != model.get("serverDefault"):
            self.fail(
                path, f"default {crd.get('default')!r} != model serverDefault {model.get('serverDefault')!r}"
            )
        if (crd.get("x-kubernetes-list-type") == "set") != bool(model.get("uniqueItems")):
            self.fail(path, "x-kubernetes-list-type set <-> uniqueItems disagree")
        if "properties" in crd:
            self.compare_object(crd, model, path)
        if isinstance(crd.get("additionalProperties"), Mapping):
            if not isinstance(model.get("additionalProperties"), Mapping):
                self.fail(path, "a map in the CRD, not in the model")
            else:
                self.compare(crd["additionalProperties"], model["additionalProperties"], f"{path}[*]")
        if isinstance(crd.get("items"), Mapping):
            self.compare(crd["items"], model.get("items", {}), f"{path}[*]")

    def compare_object(
        self, crd: Schema, model: Schema, path: str, left_out: frozenset[str] = frozenset()
    ) -> None:
        crd_names = set(crd["properties"]) - left_out
        model_names = set(model.get("properties", {}))
        for name in sorted(crd_names - model_names):
            self.fail(f"{path}.{name}", "in the CRD, missing in the model")
        for name in sorted(model_names - crd_names):
            self.fail(f"{path}.{name}", "in the model, not in the CRD")
        required, model_required = set(crd.get("required", [])), set(model.get("required", []))
        if required != model_required:
            self.fail(path, f"required {sorted(required)} != model {sorted(model_required)}")
        if model.get("additionalProperties") is not False:
            self.fail(path, "the model accepts unknown keys")
        for name in sorted(crd_names & model_names):
            self.compare(crd["properties"][name], model["properties"][name], f"{path}.{name}".lstrip("."))


def _walk(model: type[BaseModel], file: str) -> _Walker:
    api_version, crd = _crd(file)
    schema = model.model_json_schema(by_alias=True)
    walker = _Walker(model.__name__, schema.get("$defs", {}))
    properties = schema["properties"]
    # The object level: apiVersion/kind are constants, metadata is ObjectMeta (`type: object` in the CRD).
    if properties["apiVersion"].get("const") != api_version:
        walker.fail(
            "apiVersion", f"model constant {properties['apiVersion'].get('const')!r} != {api_version!r}"
        )
    if properties["kind"].get("const") != model.__name__:
        walker.fail("kind", f"model constant {properties['kind'].get('const')!r}")
    if set(walker.resolve(properties["metadata"])["properties"]) != {"name", "labels", "annotations"}:
        walker.fail("metadata", "the model writes name, labels and annotations")
    if set(schema["required"]) != {*crd.get("required", []), "spec", "metadata"}:
        walker.fail("<root>", f"required {schema['required']} is not spec and metadata")
    walker.compare(crd["properties"]["spec"], properties["spec"], "spec")
    root_names = set(crd["properties"]) - _LEFT_OUT
    if root_names != set(properties):
        walker.fail("<root>", f"properties {sorted(root_names)} != model {sorted(properties)}")
    return walker


@pytest.mark.parametrize(("model", "file"), _CASES)
def test_every_crd_property_is_in_the_model_with_the_same_constraints(
    model: type[BaseModel], file: str
) -> None:
    walker = _walk(model, file)
    assert walker.problems == [], "\n".join(walker.problems)


def _crd_paths(schema: Schema, path: str = "") -> Iterator[str]:
    for name, sub in schema.get("properties", {}).items():
        here = f"{path}.{name}" if path else name
        yield here
        yield from _crd_paths(sub, here)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            yield f"{path}[*]"
            yield from _crd_paths(schema[key], f"{path}[*]")


@pytest.mark.parametrize(("model", "file"), _CASES)
def test_the_walk_reached_every_spec_path_of_the_crd(model: type[BaseModel], file: str) -> None:
    """Guards the test above against silently skipping parts of the schema."""
    _, crd = _crd(file)
    expected = {p for p in _crd_paths(crd) if p.startswith("spec")}
    assert set(_walk(model, file).paths) == expected
    assert len(expected) > (10 if model is NodeOverlay else 40)


@pytest.mark.parametrize("module", [common, nodepool, ec2nodeclass, nodeoverlay])
def test_python_names_are_snake_case_and_keys_are_aliases(module: object) -> None:
    models = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, KarpenterModel) and value is not KarpenterModel
    ]
    assert models
    for model in models:
        for name, field in model.model_fields.items():
            key = field.alias or name
            assert re.fullmatch(r"[a-z][a-z0-9_]*", name), f"{model.__name__}.{name}"
            assert re.fullmatch(r"[a-z][A-Za-z0-9]*", key), f"{model.__name__}.{name} -> {key}"
            assert name.replace("_", "") == key.lower(), f"{model.__name__}.{name} -> {key}"


def test_known_schema_oddities_still_exist() -> None:
    """If upstream fixes the array-level keywords, drop them from `_IGNORED_BY_THE_API_SERVER`."""
    _, crd = _crd("karpenter.sh_nodepools.yaml")
    values = crd["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"][
        "requirements"
    ]["items"]["properties"]["values"]
    _, overlay_crd = _crd("karpenter.sh_nodeoverlays.yaml")
    overlay_values = overlay_crd["properties"]["spec"]["properties"]["requirements"]["items"]["properties"][
        "values"
    ]
    for node in (values, overlay_values):
        assert node["type"] == "array"
        assert {"maxLength", "pattern"} <= set(node)


@pytest.mark.parametrize(
    ("module", "api_version", "kind", "path"),
    [
        (nodepool, "karpenter.sh/v1", "NodePool", "spec.template.spec.requirements[*].key"),
        (nodepool, "karpenter.sh/v1", "NodePool", "spec.template.metadata.labels"),
        (nodeoverlay, "karpenter.sh/v1alpha1", "NodeOverlay", "spec.requirements[*].key"),
    ],
)
def test_allowed_label_lists_are_the_crds(module: Any, api_version: str, kind: str, path: str) -> None:
    """The label lists the CEL rules allow in Karpenter's domains, as each model holds them."""
    lists = {}
    for rule in rules(api_version, kind):
        match = re.match(r"^self(\.all\(x, x)? in \[(?P<items>[^\]]*)\]", rule.rule)
        if rule.schema_path == path and match and "restricted" in rule.message:
            lists[rule.message] = {item.strip().strip('"') for item in match["items"].split(",")}
    assert lists['label domain "karpenter.k8s.aws" is restricted'] == module._KARPENTER_K8S_AWS_ALLOWED
    assert lists['label domain "karpenter.sh" is restricted'] == module._KARPENTER_SH_ALLOWED
