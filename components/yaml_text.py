"""YAML text the program writes into resources (Helm values, ConfigMaps, rule groups): PyYAML's safe dumper,
through libyaml where PyYAML was built with it (the same text, several times faster)."""

from typing import Any

import yaml

_SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump(document: Any, **options: Any) -> str:
    """`yaml.safe_dump(document, **options)`, through libyaml where available."""
    text: str = yaml.dump(document, Dumper=_SAFE_DUMPER, **options)
    return text
