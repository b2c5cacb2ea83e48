"""Describe provider modules as the SDK and Python see them, to compare the fast imports with Python's own.

    .venv/bin/python -m tests.support.module_description --compare [--thorough]

For each module: the names `dir()` lists and what each loaded one is (once a module that is not a package
has been asked for every name `dir()` lists); for each class defined there, what
pulumi's type machinery derives from its annotations (pulumi/_types.py: the input, output and resource
property types, which `typing.get_type_hints` resolves), its properties, a TypedDict's keys and hints.
`--thorough` adds every function's and method's signature and `typing.get_type_hints` (ten times slower: run
it after an SDK upgrade; tests/test_fast_imports.py runs the rest). Values are compared by what they are
(module and qualified name), not identity.
"""

import importlib
import inspect
import json
import os
import subprocess
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from pulumi import Output, Resource, _types


def _what(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    qualname = getattr(value, "__qualname__", None)
    module = getattr(value, "__module__", None)
    if isinstance(qualname, str) and isinstance(module, str):
        return f"{type(value).__name__} {module}.{qualname}"
    return f"{type(value).__name__} {value!r}"


def _canon(hint: Any) -> str:
    """A type as what it is: equal types (`Optional[str]`, `str | None`; typing caches whichever it made
    first) read the same, a union's members in one order."""
    if isinstance(hint, typing.ForwardRef):
        return f"ForwardRef({hint.__forward_arg__!r})"
    if isinstance(hint, list | tuple):
        return "[" + ", ".join(_canon(h) for h in hint) + "]"
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        return f"{hint.__module__}.{hint.__qualname__}"
    origin = typing.get_origin(hint)
    if origin is None:
        return repr(hint)
    arguments = [_canon(argument) for argument in typing.get_args(hint)]
    if origin in (typing.Union, types.UnionType):
        return f"Union[{', '.join(sorted(arguments))}]"
    return f"{_canon(origin)}[{', '.join(arguments)}]"


def _attempt(compute: Callable[[], Any]) -> Any:
    """The value, or the error it raises (both ways must agree on either)."""
    try:
        return compute()
    except Exception as exc:
        return f"raises {type(exc).__name__}"


def _hints(hints: dict[str, Any]) -> dict[str, str]:
    return {name: _canon(hint) for name, hint in hints.items()}


def _function(function: Any) -> dict[str, Any]:
    function = inspect.unwrap(function)
    signature = _attempt(lambda: inspect.signature(function))
    return {
        "parameters": (
            [[p.name, p.kind.name, repr(p.default)] for p in signature.parameters.values()]
            if isinstance(signature, inspect.Signature)
            else signature
        ),
        # Namespaces given apart, as the SDK gives them: with one namespace, typing reuses a forward reference
        # resolved in another module (its caches share `Union[str, 'PolicyDocumentArgs']` between modules).
        "hints": _attempt(
            lambda: _hints(typing.get_type_hints(function, globalns=function.__globals__, localns={}))
        ),
    }


def _class(cls: type, thorough: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"bases": [_what(base) for base in cls.__bases__]}
    if _types.is_input_type(cls):
        found["input types"] = _attempt(lambda: _hints(_types.input_type_types(cls)))
    if _types.is_output_type(cls):
        found["output types"] = _attempt(lambda: _hints(_types.output_type_types(cls)))
    if issubclass(cls, Resource):
        found["resource types"] = _attempt(lambda: _hints(_types.resource_types(cls)))
    found["properties"] = _attempt(
        lambda: [[py, pulumi, prop.fset is not None] for py, pulumi, prop in _types._py_properties(cls)]
    )
    if typing.is_typeddict(cls):
        found["required"] = sorted(cls.__required_keys__)  # type: ignore[attr-defined]
        found["optional"] = sorted(cls.__optional_keys__)  # type: ignore[attr-defined]
        # Resolved as pulumi resolves hints (pulumi/_types.py `_raw_return_hints`): without its `Output` and
        # `T`, no `pulumi.Input[...]` resolves on Python's own imports ('Output[T]' is a forward reference).
        found["typed dict hints"] = _attempt(
            lambda: _hints(
                typing.get_type_hints(
                    cls,
                    _types._globals_for_cls(cls),
                    {"Output": Output, "T": type(None)},
                    include_extras=True,
                )
            )
        )
    if not thorough:
        return found
    members = {}
    for name, attribute in vars(cls).items():
        member = attribute.__func__ if isinstance(attribute, staticmethod | classmethod) else attribute
        if isinstance(member, property):
            members[name] = {
                part: _function(getattr(member, part))
                for part in ("fget", "fset")
                if getattr(member, part) is not None
            }
        elif inspect.isfunction(member):
            members[name] = _function(member)
    found["members"] = members
    return found


def _load(module: types.ModuleType) -> types.ModuleType:
    """A package pulumi imports lazily (pulumi/_utils.py `lazy_import`) runs on its first attribute."""
    hasattr(module, "__describe__")
    return module


def describe(name: str, thorough: bool = False) -> dict[str, Any]:
    """One loaded module as described above."""
    module = _load(sys.modules[name])
    if not hasattr(module, "__path__"):
        # Every name `dir()` lists, asked for (the fast imports define an `outputs` or `_inputs` module's
        # classes, and bind a module's names from its star import of `_inputs`, when first asked); a
        # package's names would import all its submodules.
        for listed in dir(module):
            getattr(module, listed, None)
    loaded = vars(module)
    found: dict[str, Any] = {"dir": dir(module), "values": {n: _what(v) for n, v in sorted(loaded.items())}}
    for attribute, value in sorted(loaded.items()):
        # (Asking a module for more than its name would run the packages pulumi imports lazily.)
        if isinstance(value, types.ModuleType) or getattr(value, "__module__", None) != name:
            continue
        if isinstance(value, type):
            found[f"class {attribute}"] = _class(value, thorough)
        elif inspect.isfunction(value) and thorough:
            found[f"function {attribute}"] = _function(value)
    return found


def import_and_describe(names: list[str], thorough: bool = False) -> dict[str, dict[str, Any]]:
    """Import the modules as a program would, then describe them."""
    # Parents first, each run at once: importing a submodule of a package pulumi has not run yet runs the
    # package's star imports while that submodule is half made (an SDK quirk no program meets).
    for name in sorted(names):
        _load(importlib.import_module(name))
    return {name: describe(name, thorough) for name in names}


# Import-system metadata, which says which loader ran (the point of the comparison), not what a module holds.
IMPORT_METADATA = frozenset({"__cached__", "__loader__", "__spec__"})


def differences(fast: dict[str, Any], own: dict[str, Any]) -> list[str]:
    """What differs between descriptions of the same modules through the fast imports and Python's own."""
    problems = []
    for name, described in fast.items():
        other = own[name]
        # Python binds a submodule on its package when anything imports it: the eager package holds the
        # submodules that other submodules imported, the lazy one those that were used.
        unused_submodules = {
            n
            for n in set(other["dir"]) - set(described["dir"])
            if other["values"].get(n) == f"module {name}.{n}"
        }
        if set(described["dir"]) != set(other["dir"]) - unused_submodules:
            problems.append(f"{name}: dir() differs by {sorted(set(described['dir']) ^ set(other['dir']))}")
        for attribute, value in described["values"].items():
            if attribute not in IMPORT_METADATA and other["values"].get(attribute) != value:
                problems.append(f"{name}.{attribute}: {value} instead of {other['values'].get(attribute)}")
        for key in sorted(set(described) | set(other)):
            if key not in ("dir", "values") and described.get(key) != other.get(key):
                problems.append(f"{name}: {key} differs")
    return problems


def fast_run_of_every_stack(thorough: bool = False) -> dict[str, dict[str, Any]]:
    """Run every stack with the fast imports (in this process, which must not have imported a provider
    SDK yet) and describe the provider modules the finder loaded."""
    from synth import fast_imports

    fast_imports.install()
    from synth.runner import run_stack, stacks

    for stack in stacks():
        run_stack(stack)
    return {name: describe(name, thorough) for name in fast_imports.loaded_modules()}


def main(argv: list[str]) -> int:
    """`--compare`: `fast_run_of_every_stack`, then the same modules described in a process on Python's own
    imports; prints what differs (exit 1 if anything). Otherwise: describe the modules named, as JSON.
    `--thorough` with either: signatures and hints too."""
    thorough = "--thorough" in argv
    argv = [a for a in argv if a != "--thorough"]
    if argv[:1] != ["--compare"]:
        json.dump(import_and_describe(argv, thorough), sys.stdout, sort_keys=True)
        return 0
    from synth.fast_path import SWITCH

    fast = fast_run_of_every_stack(thorough)
    own = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.module_description",
            *(["--thorough"] if thorough else []),
            *fast,
        ],
        env={**os.environ, SWITCH: "0"},
        capture_output=True,
        check=True,
    )
    problems = differences(fast, json.loads(own.stdout))
    print("\n".join(problems) or f"{len(fast)} provider modules: the same both ways")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
