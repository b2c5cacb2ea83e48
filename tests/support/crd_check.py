"""Offline stand-in for the Kubernetes API server's validation of a custom resource on create (and update).

`validate(manifest)` finds the vendored CRD (`tests/fixtures/karpenter-1.14.1/crds/`, or the Prometheus
Operator's in `MONITORING_CRD_DIR`) serving the manifest's `apiVersion`/`kind` and does what the API server
does with a create request, in its order:

1. drop `null`s of non-nullable fields, then apply the schema's `default`s (structural defaulting,
   recursively, also inside values that were just defaulted);
2. check the object against the version's `openAPIV3Schema` (structural schema: `type`, `properties`,
   `required`, `additionalProperties`, `enum`, `pattern` (RE2, unanchored), `minLength`/`maxLength`,
   `minimum`/`maximum`, `minItems`/`maxItems`, `maxProperties`, `anyOf`, `x-kubernetes-int-or-string`,
   `x-kubernetes-list-type` `set`/`map` uniqueness, `format` `date-time`/`int32`/`int64`); unknown fields
   are reported as errors, as `kubectl --validate=strict` and server-side apply report them, instead of
   being pruned;
3. check `metadata` the way the API server checks any object's metadata (name, label and annotation keys);
4. unless step 2 found a type or enum error (the API server then skips CEL, since the rules could not be
   typed), evaluate every `x-kubernetes-validations` rule with cel-python at each place the schema puts it.
   Transition rules (those reading `oldSelf`) run only when `old` is given and holds a value at the same
   place, as on an update; on create they are skipped, as the API server does.

Kubernetes CEL extras used by the Karpenter CRDs and provided here: `split()` (cel-go strings extension),
`find()` (Kubernetes regex library, RE2) and `int(string)` with Go's `strconv.ParseInt` rules (cel-python's
own `int()` would accept `" 5"` and `"1_0"`). `matches()`, `startsWith()`, `endsWith()`, `size()`, `has()`,
`all()`, `exists()`, `filter()` and `in` are cel-python's own. `unsupported_functions()` lists calls in a CRD
that none of these cover, so a CRD bump that brings a new function fails a test instead of passing silently.
Not modelled: `messageExpression`, `fieldPath`, `reason`, `optionalOldSelf` (none of the vendored CRDs use
them; `rules()` raises if one appears), CEL cost limits, typing of `date-time`/`duration` strings as CEL
timestamps, and validation ratcheting on update.

Results are `Violation`s with a JSON path (`spec.template.spec.requirements[0].key`) and a message;
`validate()` returns them as strings `"<path>: <message>"`, an empty list meaning the API server would accept
the object.
"""

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import celpy
import re2  # type: ignore[import-untyped]
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from components import yaml_text

__all__ = [
    "CRD_DIR",
    "MONITORING_CRD_DIR",
    "SUPPORTED_FUNCTIONS",
    "Rule",
    "Violation",
    "apply_defaults",
    "check",
    "functions_called",
    "rules",
    "served",
    "unsupported_functions",
    "validate",
]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CRD_DIR = FIXTURES / "karpenter-1.14.1" / "crds"
MONITORING_CRD_DIR = FIXTURES / "kube-prometheus-stack-88.5.3" / "prometheus-operator-crds" / "crds"
"""The Prometheus Operator v0.93.1 CRDs of the kinds the program declares itself (PrometheusRule,
ServiceMonitor); they carry no `x-kubernetes-validations`, so only steps 1-3 apply to them."""


# ---------------------------------------------------------------------------------------------------------
# CRDs and their rules
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Version:
    api_version: str
    kind: str
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry and where the CRD puts it."""

    api_version: str
    kind: str
    schema_path: str
    """Where in the object the rule applies: `spec.template.spec.requirements[*].key` (`[*]`: every list item
    or map value)."""
    rule: str
    message: str

    @property
    def transition(self) -> bool:
        """A transition rule compares with the old object (`oldSelf`); it runs only on update."""
        return re.search(r"\boldSelf\b", self.rule) is not None


@dataclass(frozen=True)
class Violation:
    """Something the API server would refuse."""

    path: str
    """JSON path in the object, e.g. `spec.template.spec.requirements[0].key`; `<root>` for the object."""
    message: str
    rule: Rule | None = None
    """The CEL rule that failed, None for schema and metadata errors."""
    blocking: bool = False
    """A type or enum error: the API server does not evaluate CEL rules when there is one."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@functools.cache
def _crds(directories: tuple[Path, ...] = (CRD_DIR, MONITORING_CRD_DIR)) -> dict[tuple[str, str], _Version]:
    served_versions: dict[tuple[str, str], _Version] = {}
    for file in sorted(f for directory in directories for f in directory.glob("*.yaml")):
        # libyaml: the CRDs are large, and the pure-Python loader takes most of a second.
        for doc in yaml.load_all(file.read_text(), Loader=yaml_text.SAFE_LOADER):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
            for version in doc["spec"]["versions"]:
                if version.get("served", False):
                    api_version = f"{group}/{version['name']}"
                    schema = version["schema"]["openAPIV3Schema"]
                    served_versions[api_version, kind] = _Version(api_version, kind, schema)
    return served_versions


def served() -> list[tuple[str, str]]:
    """The `(apiVersion, kind)` pairs the vendored CRDs serve."""
    return sorted(_crds())


def _lookup(api_version: str, kind: str) -> _Version:
    try:
        return _crds()[api_version, kind]
    except KeyError:
        raise KeyError(f"no vendored CRD serves {kind} {api_version}; served: {served()}") from None


def _schema_nodes(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _schema_nodes(sub, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), Mapping):
        yield from _schema_nodes(schema["items"], f"{path}[*]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _schema_nodes(schema["additionalProperties"], f"{path}[*]")


_UNSUPPORTED_RULE_KEYS = ("messageExpression", "fieldPath", "reason", "optionalOldSelf")


def rules(api_version: str, kind: str) -> list[Rule]:
    """Every `x-kubernetes-validations` rule of the CRD serving `apiVersion`/`kind`, in schema order."""
    version = _lookup(api_version, kind)
    found: list[Rule] = []
    for path, node in _schema_nodes(version.schema):
        for entry in node.get("x-kubernetes-validations", []):
            unsupported = [key for key in _UNSUPPORTED_RULE_KEYS if key in entry]
            if unsupported:
                raise NotImplementedError(f"{kind} {path}: crd_check does not implement {unsupported} yet")
            found.append(_rule(version, path, entry))
    return found


def _rule(version: _Version, schema_path: str, entry: Mapping[str, Any]) -> Rule:
    message = entry.get("message") or f"failed rule: {entry['rule']}"
    return Rule(version.api_version, version.kind, schema_path or "<root>", entry["rule"], message)


# ---------------------------------------------------------------------------------------------------------
# CEL environment: cel-python plus the Kubernetes extensions these CRDs use
# ---------------------------------------------------------------------------------------------------------
def _cel_split(text: celtypes.StringType, separator: celtypes.StringType) -> celtypes.ListType:
    parts = list(text) if separator == "" else text.split(separator)
    return celtypes.ListType([celtypes.StringType(part) for part in parts])


def _cel_find(text: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    match = re2.search(pattern, text)
    return celtypes.StringType(match.group(0) if match else "")


def _cel_int(value: Any) -> Any:
    if isinstance(value, str):
        if not re.fullmatch(r"[+-]?[0-9]+", value) or not -(2**63) <= int(value) < 2**63:
            return CELEvalError(f"cannot convert {str(value)!r} to int", ValueError, None)
        return celtypes.IntType(int(value))
    return celtypes.IntType(value)


_EXTENSIONS: dict[str, Any] = {"split": _cel_split, "find": _cel_find, "int": _cel_int}
_CEL_BUILTINS = frozenset(celpy.evaluation.base_functions) | {
    "has",
    "all",
    "exists",
    "exists_one",
    "filter",
    "map",
}
SUPPORTED_FUNCTIONS = _CEL_BUILTINS | set(_EXTENSIONS)
"""Every function a rule may call: cel-python's own plus the Kubernetes extensions above."""
_ENV = celpy.Environment()


@functools.cache
def _program(rule: str) -> celpy.Runner:
    """The compiled rule; compiling is the slow part of cel-python, so each rule text is compiled once."""
    return _ENV.program(_ENV.compile(rule), functions=_EXTENSIONS)


def functions_called(rule: str) -> set[str]:
    """Names of the functions, methods and macros a CEL expression calls."""
    tree = _ENV.compile(rule)
    names: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data in ("ident_arg", "member_dot_arg"):
            for child in node.children:
                if getattr(child, "type", None) == "IDENT":
                    names.add(str(child))
                    break
    return names


def unsupported_functions(api_version: str, kind: str) -> dict[str, set[str]]:
    """Functions called by the CRD's rules that neither cel-python nor this module implements, by rule."""
    missing: dict[str, set[str]] = {}
    for rule in rules(api_version, kind):
        unknown = functions_called(rule.rule) - SUPPORTED_FUNCTIONS
        if unknown:
            missing[rule.rule] = unknown
    return missing


# ---------------------------------------------------------------------------------------------------------
# Defaulting
# ---------------------------------------------------------------------------------------------------------
def _default(value: Any, schema: Mapping[str, Any]) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name, sub in properties.items():
            if value.get(name, ...) is None and not sub.get("nullable", False):
                del value[name]
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        additional = schema.get("additionalProperties")
        for name in list(value):
            if name in properties:
                _default(value[name], properties[name])
            elif isinstance(additional, Mapping):
                _default(value[name], additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default(item, schema["items"])


# ---------------------------------------------------------------------------------------------------------
# Structural schema
# ---------------------------------------------------------------------------------------------------------
_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),  # before int: bool is a subclass of int
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def _type_ok(value: Any, schema: Mapping[str, Any]) -> bool:
    actual = _json_type(value)
    if schema.get("x-kubernetes-int-or-string"):
        return actual in ("integer", "string")
    expected = schema.get("type")
    if expected is None:
        return True
    if expected == "number":
        return actual in ("integer", "number")
    return actual == expected or (value is None and schema.get("nullable", False))


_INT_FORMAT_BITS = {"int32": 32, "int64": 64}
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", re.ASCII)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _label(path: str) -> str:
    return path or "<root>"


def _check_schema(value: Any, schema: Mapping[str, Any], path: str, out: list[Violation]) -> None:
    where = _label(path)
    if not _type_ok(value, schema):
        expected = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        out.append(
            Violation(where, f"must be of type {expected}, got {_json_type(value)} {value!r}", blocking=True)
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"])
        out.append(Violation(where, f"unsupported value {value!r}: must be one of {allowed}", blocking=True))
    if "anyOf" in schema:
        branch_errors = []
        for branch in schema["anyOf"]:
            errors: list[Violation] = []
            _check_schema(value, branch, path, errors)
            if not errors:
                break
            branch_errors.append("; ".join(e.message for e in errors))
        else:
            out.append(Violation(where, f"matches none of the allowed forms ({' | '.join(branch_errors)})"))
    if isinstance(value, str):
        _check_string(value, schema, where, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(Violation(where, f"{value} is less than the minimum {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            out.append(Violation(where, f"{value} is greater than the maximum {schema['maximum']}"))
        bits = _INT_FORMAT_BITS.get(schema.get("format", ""))
        if bits is not None and isinstance(value, int) and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            out.append(Violation(where, f"{value} does not fit in {schema['format']}"))
    elif isinstance(value, list):
        _check_array(value, schema, path, out)
    elif isinstance(value, dict):
        _check_object(value, schema, path, out)


def _check_string(value: str, schema: Mapping[str, Any], where: str, out: list[Violation]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(Violation(where, f"{value!r} is longer than {schema['maxLength']} characters"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        out.append(Violation(where, f"{value!r} is shorter than {schema['minLength']} character(s)"))
    if "pattern" in schema and re2.search(schema["pattern"], value) is None:
        out.append(Violation(where, f"{value!r} does not match the pattern {schema['pattern']!r}"))
    if schema.get("format") == "date-time" and not _RFC3339.match(value):
        out.append(Violation(where, f"{value!r} is not an RFC 3339 date-time"))


def _check_array(value: list[Any], schema: Mapping[str, Any], path: str, out: list[Violation]) -> None:
    where = _label(path)
    if "minItems" in schema and len(value) < schema["minItems"]:
        out.append(Violation(where, f"has {len(value)} item(s), fewer than the minimum {schema['minItems']}"))
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(Violation(where, f"has {len(value)} items, more than the maximum {schema['maxItems']}"))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen: list[Any] = []
        for index, item in enumerate(value):
            identity = (
                item
                if list_type == "set"
                else [item.get(k) for k in keys]
                if isinstance(item, dict)
                else item
            )
            if identity in seen:
                out.append(
                    Violation(
                        f"{path}[{index}]", f"duplicate value {identity!r} in a list of type {list_type}"
                    )
                )
            seen.append(identity)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            _check_schema(item, items, f"{path}[{index}]", out)


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], path: str, out: list[Violation]) -> None:
    where = _label(path)
    properties: Mapping[str, Any] = schema.get("properties", {})
    additional = schema.get("additionalProperties")
    for name in schema.get("required", []):
        if name not in value:
            out.append(Violation(_join(path, name), "required value is missing"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        out.append(
            Violation(where, f"has {len(value)} entries, more than the maximum {schema['maxProperties']}")
        )
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        out.append(
            Violation(where, f"has {len(value)} entries, fewer than the minimum {schema['minProperties']}")
        )
    for name, item in value.items():
        if name in properties:
            if path == "" and name == "metadata":
                continue  # ObjectMeta: checked by _check_metadata, not by the CRD schema
            _check_schema(item, properties[name], _join(path, name), out)
        elif isinstance(additional, Mapping):
            _check_schema(item, additional, f"{path}[{name}]", out)
        elif additional is not True and not schema.get("x-kubernetes-preserve-unknown-fields", False):
            out.append(Violation(_join(path, name), "unknown field (not in the CRD schema)"))


# ---------------------------------------------------------------------------------------------------------
# metadata (ObjectMeta rules of the API server for a cluster-scoped custom resource)
# ---------------------------------------------------------------------------------------------------------
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_OBJECT_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "labels", "annotations", "finalizers", "ownerReferences", "uid",
        "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
        "deletionGracePeriodSeconds", "managedFields", "selfLink",
    }
)  # fmt: skip


def _qualified_name_ok(key: str) -> bool:
    parts = key.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2 and (not parts[0] or len(parts[0]) > 253 or not _DNS_SUBDOMAIN.match(parts[0])):
        return False
    return 0 < len(parts[-1]) <= 63 and _NAME_PART.match(parts[-1]) is not None


def _check_metadata(metadata: Any, out: list[Violation]) -> None:
    if metadata is None:
        out.append(Violation("metadata", "required value is missing"))
        return
    if not isinstance(metadata, dict):
        out.append(Violation("metadata", f"must be an object, got {_json_type(metadata)}", blocking=True))
        return
    for name in sorted(set(metadata) - _OBJECT_META_FIELDS):
        out.append(Violation(f"metadata.{name}", "unknown field (not part of ObjectMeta)"))
    name = metadata.get("name")
    if not name and not metadata.get("generateName"):
        out.append(Violation("metadata.name", "name or generateName is required"))
    elif name and (not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
        out.append(Violation("metadata.name", f"{name!r} is not a DNS-1123 subdomain"))
    for key, value in (metadata.get("labels") or {}).items():
        if not _qualified_name_ok(key):
            out.append(Violation(f"metadata.labels[{key}]", f"{key!r} is not a valid label key"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            out.append(Violation(f"metadata.labels[{key}]", f"{value!r} is not a valid label value"))
    annotations = metadata.get("annotations") or {}
    for key in annotations:
        if not _qualified_name_ok(key.lower()):
            out.append(Violation(f"metadata.annotations[{key}]", f"{key!r} is not a valid annotation key"))
    if sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items()) > 256 * 1024:
        out.append(Violation("metadata.annotations", "annotations exceed 256 KiB in total"))


# ---------------------------------------------------------------------------------------------------------
# CEL rules
# ---------------------------------------------------------------------------------------------------------
_ABSENT = object()


def _evaluate(rule: Rule, value: Any, old: Any) -> str | None:
    """None when the rule holds; otherwise the message the API server would give."""
    old_json = json.dumps(old, sort_keys=True) if rule.transition else ""
    return _evaluate_json(rule, json.dumps(value, sort_keys=True), old_json)


@functools.lru_cache(maxsize=4096)
def _evaluate_json(rule: Rule, value: str, old: str) -> str | None:
    """Evaluation is pure, and interpreting CEL in Python is slow (~2 ms a rule): the same rule on the same
    value, as in many test cases that change one place of one manifest, is evaluated once."""
    activation = {"self": json_to_cel(json.loads(value))}
    if rule.transition:
        activation["oldSelf"] = json_to_cel(json.loads(old))
    try:
        result = _program(rule.rule).evaluate(activation)
    except CELEvalError as error:
        reason = error.args[0] if error.args else error
        return f"{rule.message} (rule {rule.rule!r} failed to evaluate: {reason})"
    if isinstance(result, CELEvalError):
        return f"{rule.message} (rule {rule.rule!r} failed to evaluate: {result.args[0]})"
    return None if isinstance(result, celtypes.BoolType) and bool(result) else rule.message


def _check_cel(
    version: _Version,
    value: Any,
    old: Any,
    schema: Mapping[str, Any],
    *,
    path: str,
    schema_path: str,
    out: list[Violation],
) -> None:
    for entry in schema.get("x-kubernetes-validations", []):
        rule = _rule(version, schema_path, entry)
        if rule.transition and old is _ABSENT:
            continue
        message = _evaluate(rule, value, old)
        if message is not None:
            out.append(Violation(_label(path), message, rule))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for name, item in value.items():
            old_item = old.get(name, _ABSENT) if isinstance(old, dict) else _ABSENT
            if name in properties:
                sub_path, sub_schema_path, sub_schema = (
                    _join(path, name),
                    _join(schema_path, name),
                    properties[name],
                )
                _check_cel(
                    version, item, old_item, sub_schema, path=sub_path, schema_path=sub_schema_path, out=out
                )
            elif isinstance(additional, Mapping):
                _check_cel(
                    version,
                    item,
                    old_item,
                    additional,
                    path=f"{path}[{name}]",
                    schema_path=f"{schema_path}[*]",
                    out=out,
                )
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        keys = schema.get("x-kubernetes-list-map-keys", [])
        for index, item in enumerate(value):
            old_entry: Any = _ABSENT
            if (
                schema.get("x-kubernetes-list-type") == "map"
                and isinstance(old, list)
                and isinstance(item, dict)
            ):
                identity = [item.get(k) for k in keys]
                matches = [o for o in old if isinstance(o, dict) and [o.get(k) for k in keys] == identity]
                old_entry = matches[0] if matches else _ABSENT
            _check_cel(
                version,
                item,
                old_entry,
                schema["items"],
                path=f"{path}[{index}]",
                schema_path=f"{schema_path}[*]",
                out=out,
            )


# ---------------------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------------------
def check(manifest: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Violation]:
    """Everything the API server would refuse in `manifest` (create; an update from `old` if given)."""
    if not isinstance(manifest, Mapping):
        return [
            Violation("<root>", f"a manifest must be an object, got {_json_type(manifest)}", blocking=True)
        ]
    api_version, kind = str(manifest.get("apiVersion")), str(manifest.get("kind"))
    if (api_version, kind) not in _crds():
        return [Violation("apiVersion", f"no vendored CRD serves kind {kind!r} in {api_version!r}")]
    version = _crds()[api_version, kind]
    obj = copy.deepcopy(dict(manifest))
    _default(obj, version.schema)
    out: list[Violation] = []
    _check_schema(obj, version.schema, "", out)
    _check_metadata(obj.get("metadata"), out)
    if any(violation.blocking for violation in out):
        out.append(
            Violation(
                "<root>", "validation rules (x-kubernetes-validations) not evaluated because of type errors"
            )
        )
        return out
    old_obj: Any = _ABSENT
    if old is not None:
        old_obj = copy.deepcopy(dict(old))
        _default(old_obj, version.schema)
    _check_cel(version, obj, old_obj, version.schema, path="", schema_path="", out=out)
    return out


def apply_defaults(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """`manifest` as the API server would store it after defaulting (a copy; `manifest` is not changed)."""
    version = _lookup(manifest["apiVersion"], manifest["kind"])
    obj = copy.deepcopy(dict(manifest))
    _default(obj, version.schema)
    return obj


def validate(manifest: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    """Human-readable problems the API server would refuse `manifest` for, `"<json path>: <message>"`.

    An empty list means the object would be accepted. With `old`, the manifest is checked as an update of
    `old`, which also runs the CRDs' transition rules (`oldSelf`).
    """
    return [str(violation) for violation in check(manifest, old)]
