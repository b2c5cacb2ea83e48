"""YAML through libyaml where PyYAML was built with it (the same documents, several times faster): the text
the program writes into resources (Helm values, ConfigMaps, rule groups), and what the offline tools read
(stack files, snapshots, structured strings in a plan)."""

from typing import Any

import yaml

SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dump(document: Any, **options: Any) -> str:
    """`yaml.safe_dump(document, **options)`, through libyaml where available."""
    text: str = yaml.dump(document, Dumper=SAFE_DUMPER, **options)
    return text


def load(text: str) -> Any:
    """`yaml.safe_load(text)`, through libyaml where available."""
    return yaml.load(text, Loader=SAFE_LOADER)
