"""Turning validation failures into messages that name the config key, the value and what is accepted."""

import difflib
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

PROJECT = "gpu-eks"
_MAX_VALUE_CHARS = 80


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake in the stack configuration."""

    key: str
    """Full config key, e.g. `gpu-eks:cluster.kubernetesVersion` or `gpu-eks:nodePools[0].name`."""
    message: str
    """What is wrong and what would be accepted."""
    value: Any = None
    has_value: bool = False

    def __str__(self) -> str:
        if not self.has_value:
            return f"{self.key}: {self.message}"
        # As YAML writes it where Python's spelling differs (`true`, not `True`).
        if self.value is None:
            shown = "null"
        elif isinstance(self.value, bool):
            shown = "true" if self.value else "false"
        else:
            shown = repr(self.value)
        if len(shown) > _MAX_VALUE_CHARS:
            shown = shown[: _MAX_VALUE_CHARS - 3] + "..."
        return f"{self.key} = {shown}: {self.message}"


class ConfigError(pulumi.RunError):
    """The stack configuration is invalid; raised before any resource is registered.

    A `RunError` so that `pulumi up` prints the message alone, without a Python traceback.
    """

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"Invalid stack configuration ({count} problem{'s' if count != 1 else ''}):\n{lines}"
        )


AWS_SECTIONS = ("region", "profile")
"""Settings of the AWS provider that the program reads too (`aws:<name>`)."""


def section_key(alias: str) -> str:
    """The full config key of a section: `region` -> `aws:region`, `cluster` -> `gpu-eks:cluster`."""
    return f"aws:{alias}" if alias in AWS_SECTIONS else f"{PROJECT}:{alias}"


def config_key(path: Sequence[str | int]) -> str:
    """("cluster", "endpoint", "publicAccess") -> `gpu-eks:cluster.endpoint.publicAccess`."""
    key = section_key(str(path[0]))
    for part in path[1:]:
        key += f"[{part}]" if isinstance(part, int) else f".{part}"
    return key


def _model_at(model: type[BaseModel], path: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the object found at `path` (aliases) below `model`."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        current = _unwrap(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Reduce `X | None`, `tuple[X, ...]`, `list[X]`, `Annotated[X, ...]` to the model class X, if any."""
    origin = typing.get_origin(annotation)
    if origin is None:
        return annotation
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    for arg in typing.get_args(annotation):
        inner = _unwrap(arg)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner
    if origin in (typing.Union, types.UnionType):
        return None
    return None


def nearest(name: str, known: typing.Iterable[str]) -> str | None:
    """The known name closest to a misspelt one (case and `-`/`_`/`.` ignored), if any is close."""
    canonical = {k.lower().replace("_", "-").replace(".", "-"): k for k in known}
    close = difflib.get_close_matches(name.lower().replace("_", "-").replace(".", "-"), canonical, n=1)
    return canonical[close[0]] if close else None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


_TYPE_MESSAGES = {
    "string_type": "must be text (quote it in YAML if it looks like a number or true/false)",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a mapping of keys to values (key: value)",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "string_pattern_mismatch": "is not of an accepted form",
}
"""Pydantic error types, in words a reader of the stack file uses (no Python types)."""


def _strict_type_message(kind: str, value: Any) -> str | None:
    """What a whole number or a true/false field (`config.types.WholeNumber`, `Flag`) takes, told against the
    value that was written instead."""
    if kind == "int_type":
        if isinstance(value, bool):
            return "must be a whole number, not true or false"
        if isinstance(value, float):
            return "must be a whole number, without a decimal point"
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return f'must be a whole number, unquoted ({value.strip()}, not "{value}")'
    if kind == "bool_type":
        if isinstance(value, str):
            return "must be true or false, unquoted"
        if isinstance(value, int | float):
            return "must be true or false, not a number"
    return None


def _message(error: ErrorDetails, model: type[BaseModel], path: Sequence[str | int]) -> str:
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = _model_at(model, path[:-1])
        legacy: dict[str, str] = getattr(parent, "legacy_keys", {})
        if str(path[-1]) in legacy:
            return legacy[str(path[-1])]
        accepted = [f.alias or n for n, f in parent.model_fields.items()] if parent else []
        close = nearest(str(path[-1]), accepted)
        suggestion = f", did you mean {close}? Accepted keys: " if close else "; accepted keys: "
        return "unknown key" + (f"{suggestion}{', '.join(accepted)}" if accepted else "")
    if kind == "missing":
        return "is required but not set"
    if kind in ("model_type", "model_attributes_type", "dataclass_type"):
        found = _model_at(model, path)
        keys = [f.alias or n for n, f in found.model_fields.items()] if found else []
        return "must be a mapping (key: value)" + (
            f" with keys such as {', '.join(keys[:4])}" if keys else ""
        )
    if (strict := _strict_type_message(kind, error.get("input"))) is not None:
        return strict
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    if kind in ("too_short", "too_long"):
        bound = context.get("min_length" if kind == "too_short" else "max_length", 0)
        return f"must list at {'least' if kind == 'too_short' else 'most'} {_plural(bound, 'item')}"
    if kind in ("string_too_short", "string_too_long"):
        bound = context.get("min_length" if kind == "string_too_short" else "max_length", 0)
        return (
            f"must have at {'least' if kind == 'string_too_short' else 'most'} {_plural(bound, 'character')}"
        )
    message = error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message.replace("Input should be", "must be")


def problems_from_validation_error(
    exc: ValidationError, model: type[BaseModel], secret_sections: frozenset[str] = frozenset()
) -> list[ConfigProblem]:
    """One problem per pydantic error of the stack model, keyed by the full config key.

    Values of sections in `secret_sections` (full keys) are never shown.
    """
    problems = []
    for error in exc.errors():
        # Tagged-union and function validators add non-field entries to the location; keep field names.
        path = [p for p in error["loc"] if isinstance(p, int) or not str(p).startswith("function-")]
        value = error.get("input")
        secret = section_key(str(path[0])) in secret_sections
        problems.append(
            ConfigProblem(
                key=config_key(path),
                message=_message(error, model, path),
                value="[secret]" if secret else value,
                has_value=error["type"] != "missing" and not isinstance(value, dict),
            )
        )
    return problems
