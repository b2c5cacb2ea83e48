"""Render a program run as a deterministic tree of files a reviewer can read and diff.

- `resources.yaml`: every resource: type, name, parent, dependencies, provider, options, inputs (secrets
  masked);
- `manifests/`: every Kubernetes object declared directly (NodePools, EC2NodeClasses, workloads) as YAML,
  one file per `<kind>-<namespace>-<name>` (no namespace for cluster-scoped kinds);
- `helm/`: each Helm release's chart, version and values;
- `iam/`: each IAM and resource policy document as pretty JSON.
"""

import json
from pathlib import Path
from typing import Any

import yaml

from components import yaml_text
from synth.runner import ProgramRun, Registration

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
# Inputs that hold a policy document (JSON text) on these resource types.
POLICY_INPUTS = {
    "aws:iam/policy:Policy": "policy",
    "aws:iam/role:Role": "assumeRolePolicy",
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:sqs/queuePolicy:QueuePolicy": "policy",
}


def short(urn: str) -> str:
    """`urn:pulumi:dev::gpu-eks::a$b::name` -> `b::name`: type and name, enough to identify a resource."""
    _, _, rest = urn.partition("::")
    _, _, rest = rest.partition("::")
    qualified_type, _, name = rest.rpartition("::")
    return f"{qualified_type.split('$')[-1]}::{name}"


class _Dumper(yaml_text.SAFE_DUMPER):  # type: ignore[misc,valid-type]
    """Block-style YAML with multi-line strings as literal blocks, so diffs are line by line."""


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_presenter)


_Dumper.ignore_aliases = lambda *_: True


def sorted_keys(value: Any) -> Any:
    """`value` with every mapping's keys sorted, recursively."""
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value


def to_yaml(value: Any) -> str:
    """Stable YAML in block style; mapping keys keep the order given (sort them with `sorted_keys`)."""
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=110)


def from_yaml(text: str) -> Any:
    """YAML read by libyaml's safe loader where PyYAML has it: snapshots run to 5,000 lines, vendored charts
    to more."""
    return yaml_text.load(text)


def _resource_entry(resource: Registration) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": resource.type, "name": resource.name}
    if resource.parent:
        entry["parent"] = short(resource.parent)
    if resource.dependencies:
        entry["dependsOn"] = sorted({short(d) for d in resource.dependencies})
    if resource.provider:
        entry["provider"] = resource.provider
    if resource.protect:
        entry["protect"] = True
    if resource.ignore_changes:
        entry["ignoreChanges"] = sorted(resource.ignore_changes)
    if resource.delete_before_replace:
        entry["deleteBeforeReplace"] = True
    if resource.retain_on_delete:
        entry["retainOnDelete"] = True
    if resource.aliases:
        entry["aliases"] = sorted(short(a) for a in resource.aliases)
    if resource.import_id:
        entry["import"] = resource.import_id
    if resource.custom_timeouts:
        entry["customTimeouts"] = dict(sorted(resource.custom_timeouts.items()))
    if resource.masked_inputs:
        entry["inputs"] = sorted_keys(resource.masked_inputs)
    return entry


def _file_name(*parts: str) -> str:
    return "-".join(p.replace("/", "_").replace(":", "_") for p in parts if p)


def render(run: ProgramRun) -> dict[str, str]:
    """Relative path -> file content for the snapshot of one stack."""
    resources = sorted(run.resources, key=lambda r: (r.type, r.name))
    files: dict[str, str] = {"resources.yaml": to_yaml([_resource_entry(r) for r in resources])}
    files["outputs.yaml"] = to_yaml(
        sorted_keys({k: "[secret]" if k in run.secret_outputs else v for k, v in run.outputs.items()})
    )
    for resource in resources:
        inputs = resource.masked_inputs
        if resource.type == HELM_RELEASE:
            chart = {k: inputs[k] for k in ("chart", "version", "namespace", "repositoryOpts") if k in inputs}
            files[f"helm/{resource.name}.yaml"] = to_yaml(
                sorted_keys(chart) | {"values": sorted_keys(inputs.get("values", {}))}
            )
        elif resource.type.startswith("kubernetes:") and "apiVersion" in inputs:
            manifest = {
                k: inputs[k] for k in ("apiVersion", "kind", "metadata", "spec", "data") if k in inputs
            }
            metadata = inputs.get("metadata") or {}
            name = metadata.get("name") or resource.name
            # The namespace too: objects of one kind and name in two namespaces (the teams' `gpu` quotas).
            where = str(metadata.get("namespace") or "")
            files[f"manifests/{_file_name(str(inputs.get('kind', '')), where, name)}.yaml"] = to_yaml(
                {k: sorted_keys(v) for k, v in manifest.items()}
            )
        elif resource.type in POLICY_INPUTS and isinstance(inputs.get(POLICY_INPUTS[resource.type]), str):
            document = json.loads(inputs[POLICY_INPUTS[resource.type]])
            kind = resource.type.rsplit(":", 1)[-1]
            files[f"iam/{_file_name(kind, resource.name)}.json"] = (
                json.dumps(document, indent=2, sort_keys=True) + "\n"
            )
    return files


def write(files: dict[str, str], directory: Path) -> None:
    """Replace `directory` with exactly these files."""
    if directory.exists():
        for stale in sorted(directory.rglob("*"), reverse=True):
            if stale.is_file():
                stale.unlink()
            elif stale.is_dir():
                stale.rmdir()
    for relative, content in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def read(directory: Path) -> dict[str, str]:
    """The snapshot files under `directory` (empty if it does not exist)."""
    if not directory.exists():
        return {}
    return {str(p.relative_to(directory)): p.read_text() for p in sorted(directory.rglob("*")) if p.is_file()}
