"""Shared helpers of the GPU Operator tests: vendored upstream files and chart-key checks."""

import copy
import functools
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema

from components import yaml_text

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "gpu-operator-v26.7.0"

FREE_KEY_MAPS = frozenset({"nodeSelector", "labels", "annotations", "data"})
"""Chart values that are maps of arbitrary keys: whatever is below them is not a chart key."""
TEMPLATE_ONLY_KEYS = {
    "migManager.args": "deployments/gpu-operator/templates/clusterpolicy.yaml at v26.7.0 passes it on "
    "(`{{- if .Values.migManager.args }} args: ...`) though values.yaml sets no default for it",
}
"""Keys the chart's templates read without a default in values.yaml (not vendored: read upstream), and
where."""


@functools.cache
def chart_values() -> dict[str, Any]:
    """`deployments/gpu-operator/values.yaml` of gpu-operator v26.7.0."""
    loaded: dict[str, Any] = yaml_text.load((FIXTURES / "chart-values.yaml").read_text())
    return loaded


@functools.cache
def nfd_values() -> dict[str, Any]:
    """The NFD 0.19.0 subchart's own `values.yaml`."""
    loaded: dict[str, Any] = yaml_text.load(
        (FIXTURES / "node-feature-discovery" / "chart-values.yaml").read_text()
    )
    return loaded


@functools.cache
def nfd_validator() -> jsonschema.Draft202012Validator:
    """The NFD subchart's values schema, checked against its metaschema once (`jsonschema.validate` checks
    it again on every call, a second each)."""
    schema = json.loads((FIXTURES / "node-feature-discovery" / "values.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of user values over defaults: maps merge, everything else replaces (independent of the
    implementation under test)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def nfd_effective_defaults() -> dict[str, Any]:
    """What the NFD subchart sees before our values: its defaults under the gpu-operator chart's overrides."""
    return merged(nfd_values(), chart_values()["node-feature-discovery"])


def unknown_keys(
    values: Mapping[str, Any],
    defaults: Mapping[str, Any],
    path: str = "",
    free_maps: frozenset[str] = FREE_KEY_MAPS,
) -> Iterator[str]:
    """Paths in `values` that the chart's defaults do not have (descending into maps, not into lists, nor
    into the maps of arbitrary keys named in `free_maps`)."""
    for key, value in values.items():
        here = f"{path}.{key}" if path else str(key)
        if key not in defaults:
            yield here
            continue
        if key in free_maps or not isinstance(value, dict):
            continue
        default = defaults[key]
        if not isinstance(default, dict):
            yield f"{here} (a map here, but {type(default).__name__} in the chart)"
            continue
        yield from unknown_keys(value, default, here, free_maps)


def chart_key_problems(values: Mapping[str, Any]) -> list[str]:
    """Keys set by `values` that neither the gpu-operator chart nor (under `node-feature-discovery`) the
    NFD subchart has."""
    parent = {k: v for k, v in values.items() if k != "node-feature-discovery"}
    problems = [p for p in unknown_keys(parent, chart_values()) if p not in TEMPLATE_ONLY_KEYS]
    if "node-feature-discovery" in values:
        problems += [
            f"node-feature-discovery.{p}"
            for p in unknown_keys(values["node-feature-discovery"], nfd_effective_defaults())
        ]
    return problems


def reference_dir() -> Path | None:
    """The shared upstream reference folder, where this checkout has one beside it (CI, developers)."""
    candidates = [
        os.environ.get("GPU_EKS_REFERENCE_DIR"),
        REPO.parent / "shared" / "reference",
        "/work/shared/reference",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None
