"""Building blocks shared by the typed Karpenter v1 API: base model, object metadata, serialisation.

Conventions of every model in this package
------------------------------------------
- Python attributes are snake_case; each carries the exact camelCase key of the CRD as its alias
  (`kms_key_id` <-> `kmsKeyID`). `populate_by_name=True` accepts either spelling on input.
- `extra="forbid"`: a misspelt key is an error, never a silently dropped setting (the API server would
  prune it).
- `strict=True`: no coercion, so `"5"` is not an integer and `1` is not a boolean, as in the API
  server's OpenAPI type check.
- `frozen=True`: a manifest is built once and then only passed around (note that `model_copy(update=...)`
  does not validate: build a variant through the constructor or `model_validate` instead).
- Patterns, enums (`Literal`) and bounds are copied from the CRD schemas verbatim; the CEL rules of the
  CRDs (`x-kubernetes-validations`) are re-implemented as pydantic validators whose messages say what to
  change. `tests/karpenter_api/` proves both against the vendored CRDs of Karpenter 1.14.1.

Server-side defaults: why the models leave them out
---------------------------------------------------
The CRDs declare defaults (`expireAfter: 720h`, `consolidationPolicy: WhenEmptyOrUnderutilized`, budgets
`[{nodes: 10%}]`, `metadataOptions` with IMDSv2, ...). The API server fills them in on create. If our
dumps contained them too, every such field would be owned twice: server-side apply would record them as
ours, a later change of an upstream default would never reach us, and a Pulumi refresh would report drift
whenever the server's value differs from a copy baked in here. So every field the server defaults is an
*optional* model field whose Python default is `None`; `to_manifest()` drops `None`
(`exclude_none=True`), and a value appears in the output exactly when the program set it. The server
default is documented in each field's docstring and recorded machine-readably as `serverDefault` in the
field's JSON schema (checked against the CRD by the tests), so code that needs the effective value reads
it from there instead of re-typing it.

`exclude_none` rather than `exclude_unset`: the constant `apiVersion`/`kind` fields are never "set" by
the caller but must always be written, and `exclude_unset` would keep explicit `None`s passed by callers.

Stable output
-------------
`to_manifest()` sorts every mapping's keys (recursively; list order is meaningful and kept), so two equal
models always produce identical YAML/JSON, whatever order labels, tags or limits were inserted in.
"""

import re
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

__all__ = [
    "INT32",
    "INT64",
    "KARPENTER_K8S_AWS_INSTANCE_LABELS",
    "QUANTITY_PATTERN",
    "TAINT_PART",
    "KarpenterModel",
    "LabelValue",
    "ObjectMeta",
    "Quantity",
    "go_int",
    "label_domain",
    "to_manifest",
]


class KarpenterModel(BaseModel):
    """Base of every Karpenter API model: CRD aliases, strict types, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        populate_by_name=True,
        extra="forbid",
        strict=True,
        frozen=True,
        use_attribute_docstrings=True,
    )


class _IntFormat:
    """An integer `format` of the CRD (`int32`, `int64`): the API server refuses values outside its range.

    Put it last in `Annotated[int, Field(ge=..., le=...), INT32]`; it adds `format` to the JSON schema, where
    the tests compare it with the CRD.
    """

    def __init__(self, name: str, bits: int) -> None:
        self.name, self.low, self.high = name, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def _check(self, value: int) -> int:
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} does not fit in the CRD's {self.name} ({self.low}..{self.high})")
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["format"] = self.name
        return json_schema


INT32: Final = _IntFormat("int32", 32)
INT64: Final = _IntFormat("int64", 64)


QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"  # split to fit the line length
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""A Kubernetes resource quantity, as the CRDs spell the pattern (`256`, `1Ti`, `500m`)."""

Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN)]
"""A resource quantity written as a string."""

LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]
"""A Kubernetes label value: at most 63 characters, alphanumeric at both ends, may be empty."""

TAINT_PART: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"  # split to fit the line length
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
"""The CRDs' pattern of a qualified name (`[prefix/]name`): taint keys and values, requirement keys."""

KARPENTER_K8S_AWS_INSTANCE_LABELS: Final = frozenset(
    "karpenter.k8s.aws/" + name
    for name in (
        "ec2nodeclass",
        "instance-encryption-in-transit-supported",
        "instance-category",
        "instance-hypervisor",
        "instance-family",
        "instance-generation",
        "instance-local-nvme",
        "instance-size",
        "instance-cpu",
        "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz",
        "instance-memory",
        "instance-ebs-bandwidth",
        "instance-network-bandwidth",
        "instance-gpu-name",
        "instance-gpu-manufacturer",
        "instance-gpu-count",
        "instance-gpu-memory",
        "instance-accelerator-name",
        "instance-accelerator-manufacturer",
        "instance-accelerator-count",
        "instance-capability-flex",
    )
)
"""The `karpenter.k8s.aws` labels every Karpenter 1.14.1 CRD accepts in requirements (the NodeOverlay CRD's
whole list; the NodePool CRD adds tenancy, capacity-reservation and placement-group labels)."""

_LABEL_DOMAIN = re.compile(r"^([^/]+)")


def label_domain(key: str) -> str:
    """The CRDs' `key.find("^([^/]+)")`: everything before the first `/` (the whole key when it has none)."""
    match = _LABEL_DOMAIN.search(key)
    return match.group(0) if match else ""


def go_int(text: str) -> int | None:
    """`text` as CEL's `int(string)` reads it (Go `strconv.ParseInt`, base 10, 64 bit), or None."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)
_MAX_ANNOTATIONS_BYTES: Final = 256 * 1024


def _check_dns_subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{value!r} is not a valid object name: use at most 253 lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return value


def _qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes qualified name (`[prefix/]name`), or None when it is one."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"prefix {prefix!r} must be a DNS subdomain such as 'example.com'"
    if not name or len(name) > 63 or not _QUALIFIED_NAME_PART.match(name):
        return (
            f"name part {name!r} must be 1-63 characters of letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit"
        )
    return None


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        if problem := _qualified_name_problem(key):
            raise ValueError(f"label key {key!r} is invalid: {problem}")
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise ValueError(
                f"label {key!r} has invalid value {value!r}: at most 63 letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit"
            )
    return labels


def _check_annotations(annotations: dict[str, str]) -> dict[str, str]:
    for key in annotations:
        if problem := _qualified_name_problem(key.lower()):
            raise ValueError(f"annotation key {key!r} is invalid: {problem}")
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > _MAX_ANNOTATIONS_BYTES:
        raise ValueError(f"annotations total {size} bytes, more than the API server's limit of 256 KiB")
    return annotations


class ObjectMeta(KarpenterModel):
    """The part of `metadata` a program writes for a cluster-scoped object.

    The CRDs only say `metadata: {type: object}`; the API server validates it like any object's metadata,
    with these checks: DNS-subdomain name, qualified-name label and annotation keys, label values, and the
    total annotation size.
    """

    name: Annotated[str, AfterValidator(_check_dns_subdomain)]
    """Object name; a DNS subdomain of at most 253 characters."""
    labels: Annotated[dict[str, str], AfterValidator(_check_labels)] | None = None
    """Labels of the object itself (not of the nodes it creates)."""
    annotations: Annotated[dict[str, str], AfterValidator(_check_annotations)] | None = None
    """Annotations of the object itself."""


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def to_manifest(obj: BaseModel) -> dict[str, Any]:
    """The Kubernetes manifest of `obj`: CRD key names, no unset fields, JSON types, keys sorted.

    This is `obj.model_dump(by_alias=True, exclude_none=True, mode="json")` with mapping keys sorted at
    every level, the form `pulumi_kubernetes.apiextensions.CustomResource` passes through verbatim.
    Server-defaulted fields appear only when the program set them (see the module docstring).
    """
    dumped: dict[str, Any] = _sorted(obj.model_dump(by_alias=True, exclude_none=True, mode="json"))
    return dumped
