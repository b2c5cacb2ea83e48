"""The AWS provider's own configuration keys (`aws:<key>`), read from the installed pulumi-aws SDK.

Source: `pulumi_aws/config/vars.py` of the installed SDK (pulumi-aws 7.51.1, pinned in requirements.txt),
generated from the provider schema's `config.variables`: every `aws:` key the default AWS provider reads
appears there as a `__config__.get...('<key>')` call. Reading the file keeps the list equal to the SDK's
without copying it by hand; a bump of pulumi-aws brings its new keys along.
"""

import ast
import functools
import importlib.util
from pathlib import Path


@functools.cache
def provider_config_keys() -> frozenset[str]:
    """The `<key>` of every `aws:<key>` the AWS provider reads (`region`, `profile`, `defaultTags`, ...)."""
    spec = importlib.util.find_spec("pulumi_aws")
    if spec is None or spec.origin is None:
        raise RuntimeError("the pulumi-aws SDK is not installed")
    source = Path(spec.origin).parent / "config" / "vars.py"
    tree = ast.parse(source.read_text())
    keys = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "__config__"
        and node.func.attr.startswith("get")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }
    if "region" not in keys:  # a changed SDK layout must not silently refuse every aws: key
        raise RuntimeError(f"no AWS provider config keys found in {source}")
    return frozenset(keys)
