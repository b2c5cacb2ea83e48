"""A faster import of the three provider SDKs, for the offline entry points only (`python -m synth`, tests).

A `sys.meta_path` finder takes over the modules of pulumi_aws, pulumi_kubernetes and pulumi_eks (nothing
else) and loads each from code compiled with these changes, cached beside the SDK's own bytecode
(`__pycache__/<module>.cpython-311.opt-gpueks<hash>.pyc`, a name Python's own import system never reads):

- **Annotations postponed** (what `from __future__ import annotations` does, PEP 563): a generated `_inputs`
  or `outputs` module spends most of its import evaluating `pulumi.Input[Optional[Sequence[...]]]` for every
  parameter and property. The SDK resolves the hints it needs through `typing.get_type_hints`
  (pulumi/_types.py `_raw_return_hints`, `_types_from_annotations`), which evaluates a string in the same
  module namespace. An annotation is postponed only where that gives the same object: not in functions nested
  in functions, not in NamedTuple, dataclass or any other class whose base or decorator may read annotations
  as the class is made (a TypedDict keeps the outermost `NotRequired[...]` evaluated, which decides whether
  its key is required, and postpones what it wraps), not when a name it uses is bound in its class body, bound
  again at module level after it (or by a later star import, or a `global` statement), or is `T` or
  `Output` (which the SDK's resolver maps to its own values). One difference remains, in a call nothing
  makes: `typing.get_type_hints(SomeArgsDict)` without pulumi's namespaces raises NameError on Python's own
  imports (`pulumi.Input` holds the forward reference 'Output[T]'), and here may return what it resolved to.
- **Lazy service packages** (PEP 562): `pulumi_aws.ec2/__init__` star-imports all of its 178 modules;
  here it imports none until one of its names is used, through a name -> submodule map built from each
  submodule's `__all__` (or, without one, its public top-level names). The package's `dir()` lists the same
  names, `from package import *` binds the same ones, and a submodule that exports its own name
  (`helm.v3.Release`, `ec2.get_vpc`) stays shadowed by that name as the star import left it. A star import
  whose names the package's own code reads or binds, or that shadows another submodule, stays eager.
- **Lazy input and output types**: a generated `_inputs` or `outputs` module defines every type of its
  service (706 and 525 in pulumi_aws.ec2, of which a synth of dev uses 18 and 7). Each class is defined
  when its name is first asked of the module, with the classes of the module that its code names (in the
  module's order, so that what a class reads as it is made exists). Only a module of imports, a literal
  `__all__` and classes is made lazy; `dir()`, `__all__` and a star import give the same names. The SDK
  resolves the types a hint names (`'outputs.X'`, `'XArgs'`) in a copy of the namespace of the module that
  names them, so every name a module's text holds stays bound at once: a resource module's
  `from ._inputs import *` binds those and leaves each other name to its first use (the module's `dir()`
  lists it), and stays eager wherever code could reach a name without naming it (`globals()`, another
  star import that cannot be told).

Never used by `pulumi up` or `preview`: `__main__.py` and what it imports never import this module (tested);
only `synth/__main__.py` and `tests/conftest.py` call `install()`. `GPU_EKS_FAST_PATH=0` turns it off
(synth/fast_path.py), and CI synthesises every stack both ways and requires identical output.
`scripts/setup.sh` pre-compiles the cache (`python -m synth.fast_imports --warm`).
"""

import argparse
import ast
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
import threading
import time
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from synth.fast_path import fast_path

PROVIDERS = frozenset({"pulumi_aws", "pulumi_eks", "pulumi_kubernetes"})

# A cache file is valid for this very transformation (a hash of this file) and optimization level.
_TAG = f"gpueks{hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}o{sys.flags.optimize}"
_CACHE_GLOB = "*.opt-gpueks*.pyc"
_STAR = "*"  # stands for "any name" among the names a statement binds
# Names that pulumi/_types.py's resolver binds itself (`localns`), whatever the module binds.
_RESOLVER_LOCALS = frozenset({"T", "Output"})
_PLAIN_BASES = frozenset(
    {
        "dict",
        "object",
        "pulumi.CustomResource",
        "pulumi.ComponentResource",
        "pulumi.ProviderResource",
        "pulumi.Resource",
    }
)
_PLAIN_DECORATORS = frozenset({"pulumi.input_type", "pulumi.output_type"})
_EAGER_ONLY = (
    ast.NamedExpr,
    ast.Lambda,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def install() -> bool:
    """Put the finder first on `sys.meta_path` (once) unless switched off; True when it is installed.

    Call before anything imports a provider SDK: modules already imported stay as they are."""
    if not fast_path():
        return False
    if not any(isinstance(finder, Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, Finder())
    return True


def loaded_modules() -> list[str]:
    """The modules of this process that the finder's loader ran (not those pulumi made lazily and nothing has
    used yet: pulumi/_utils.py `lazy_import`)."""
    return sorted(_RAN & set(sys.modules))


class Finder:
    """Finds the provider SDKs' modules where Python would, and gives them the fast loader."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in PROVIDERS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader:
            return spec
        assert spec.origin is not None
        spec.loader = Loader(fullname, spec.origin)
        spec.cached = cache_path(spec.origin)
        return spec


class Loader(importlib.machinery.SourceFileLoader):
    """Executes the cached fast compilation of a provider module (compiling it on a miss)."""

    def get_code(self, fullname: str) -> types.CodeType:
        return self._compiled()[0]

    def exec_module(self, module: types.ModuleType) -> None:
        code, exports, classes = self._compiled()
        _RAN.add(module.__name__)
        exec(code, module.__dict__)
        if exports:
            _LAZY_EXPORTS[module.__name__] = exports
            module.__class__ = LazyExports
        if classes:
            _LAZY_CLASSES[module.__name__] = dict(classes)
            module.__class__ = LazyClasses

    def _compiled(self) -> "tuple[types.CodeType, Exports | None, Classes | None]":
        """The module's code, lazy exports and lazy classes; a miss is compiled and written to the cache, also
        where PYTHONDONTWRITEBYTECODE keeps Python from writing its own bytecode (as on this project's
        machines): the cache is this project's, and each test process would otherwise compile the SDKs
        again."""
        source = Path(self.path)
        cache = Path(cache_path(self.path))
        stamp = _stamp(source)
        try:
            data = cache.read_bytes()
        except OSError:
            data = b""
        if data[:16] == _header(stamp):
            try:
                code, exports, dependencies, classes = marshal.loads(memoryview(data)[16:])
                if all(_stamp(Path(file)) == recorded for file, recorded in dependencies):
                    return code, exports, classes
            except (OSError, ValueError, EOFError, TypeError):
                pass  # a dependency gone, or a damaged file: compile again
        code, exports, dependencies, classes = compile_module(source, self.is_package(self.name))
        _write(cache, _header(stamp) + marshal.dumps((code, exports, dependencies, classes)))
        return code, exports, classes


_RAN: set[str] = set()
# A lazy package's exported name -> (submodule, attribute of it, or None for the submodule itself).
Exports = dict[str, tuple[str, str | None]]
_LAZY_EXPORTS: dict[str, Exports] = {}


class LazyExports(types.ModuleType):
    """A provider package whose star imports run when one of their names is first used, or a module whose star
    import of `_inputs` binds a name when it is first used."""

    def __getattr__(self, name: str) -> Any:
        exports = _LAZY_EXPORTS.get(self.__name__, {})
        if name == "__all__":
            # `from package import *` asks for this first: bind everything the star imports would have bound,
            # then let it take the package's namespace as it does from the eager package (no `__all__`).
            for exported in exports:
                _resolve(self, exported, exports[exported])
        elif name in exports:
            return _resolve(self, name, exports[name])
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted({*self.__dict__, *_LAZY_EXPORTS.get(self.__name__, {})})

    def __setattr__(self, name: str, value: Any) -> None:
        # Importing a submodule binds it on its package. Where the eager package's star import then bound the
        # submodule's own export of that name over it (`Release` of `helm.v3.Release`), keep doing so.
        if _LAZY_EXPORTS.get(self.__name__, {}).get(name) == (name, name) and value is sys.modules.get(
            f"{self.__name__}.{name}"
        ):
            value = getattr(value, name)
        super().__setattr__(name, value)


# A lazy class's name -> (the code that defines it, marshalled: the cache is read whole, and making the code
# objects of the classes a run never uses was most of reading it; the lazy classes its code names; its place
# in the module).
Classes = dict[str, tuple[bytes, tuple[str, ...], int]]
_LAZY_CLASSES: dict[str, Classes] = {}
"""Of each module with lazy classes, those not defined yet."""
_DEFINING = threading.RLock()


class LazyClasses(types.ModuleType):
    """A provider module whose classes are defined when their names are first used."""

    def __getattr__(self, name: str) -> Any:
        with _DEFINING:  # a class another thread is making is neither pending nor defined
            pending = _LAZY_CLASSES.get(self.__name__, {})
            if name in pending:
                _define(self, name, pending)
            if name in self.__dict__:
                return self.__dict__[name]
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted({*self.__dict__, *_LAZY_CLASSES.get(self.__name__, {})})


def _define(module: types.ModuleType, name: str, pending: Classes) -> None:
    """Define the class `name` and the pending classes its code names, each after those it names."""
    wanted, todo = set(), [name]
    while todo:
        other = todo.pop()
        if other in pending and other not in wanted:
            wanted.add(other)
            todo += pending[other][1]
    # In the module's order, which has every class after any class it reads as it is made.
    for other in sorted(wanted, key=lambda n: pending[n][2]):
        code = pending.pop(other)[0]
        exec(marshal.loads(code), module.__dict__)


def _resolve(package: types.ModuleType, name: str, source: tuple[str, str | None]) -> Any:
    """Import the submodule a lazy name comes from (of the package, or beside the module) and bind the name as
    the star import would have."""
    submodule, attribute = source
    module = importlib.import_module(f"{package.__package__}.{submodule}")
    value = module if attribute is None else getattr(module, attribute)
    package.__dict__[name] = value
    return value


def cache_path(source: str) -> str:
    """Where the fast compilation of `source` is cached (beside its ordinary bytecode)."""
    return importlib.util.cache_from_source(source, optimization=_TAG)


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return int(status.st_mtime) & 0xFFFFFFFF, status.st_size & 0xFFFFFFFF


def _header(stamp: tuple[int, int]) -> bytes:
    """A .pyc header: magic number, flags 0 (validated by time stamp), source mtime and size."""
    mtime, size = stamp
    return importlib.util.MAGIC_NUMBER + bytes(4) + mtime.to_bytes(4, "little") + size.to_bytes(4, "little")


def _write(cache: Path, data: bytes) -> None:
    """Write atomically (several processes may compile the same module at once); a read-only SDK is fine."""
    try:
        cache.parent.mkdir(exist_ok=True)
        partial = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        partial.write_bytes(data)
        os.replace(partial, cache)
    except OSError:
        pass


def compile_module(
    source: Path, is_package: bool
) -> "tuple[types.CodeType, Exports | None, tuple[tuple[str, tuple[int, int]], ...], Classes | None]":
    """The fast code of one provider module; a package's lazy exports, an `_inputs` or `outputs` module's lazy
    classes, or another module's lazy names from its star import of `_inputs`; and the files that decided
    them."""
    text = source.read_bytes()
    tree = ast.parse(text, str(source))
    exports: Exports | None = None
    classes: Classes | None = None
    files: list[Path] = []
    if is_package:
        exports, files = lazy_star_imports(tree, source.parent)
    postpone_annotations(tree, text)
    if not is_package and source.name in ("outputs.py", "_inputs.py"):
        classes, files = lazy_classes(tree, source)
    elif not is_package:
        exports, files = lazy_inputs_import(tree, source, text)
    # (A sibling module that is not there decided nothing: importing the module fails as it would anyway.)
    dependencies = tuple((str(file), _stamp(file)) for file in files if file.is_file())
    return compile(tree, str(source), "exec", dont_inherit=True), exports or None, dependencies, classes


def _is_star_import(statement: ast.AST) -> TypeGuard[ast.ImportFrom]:
    return isinstance(statement, ast.ImportFrom) and [alias.name for alias in statement.names] == ["*"]


def _sibling_stars(statements: list[ast.stmt], directory: Path) -> tuple[list[Path], list[list[str] | None]]:
    """The modules beside this one that `statements` star-import (`from ._enums import *`), and the names each
    import binds (None where that cannot be told)."""
    paths = [
        directory / f"{statement.module}.py"
        for statement in statements
        if _is_star_import(statement) and statement.level == 1 and "." not in (statement.module or ".")
    ]
    return paths, [star_names(path) for path in paths]


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree`, itself included, as `ast.walk` gives them but in another order and in half its
    time: compiling the fast path walks each provider module's tree several times."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of `body` and of the bodies in it (functions' and classes' too), without walking any
    expression: a statement is only ever in a list of statements."""
    for statement in body:
        yield statement
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for inner in getattr(statement, field, ()):
                # An `except` handler or a `case` holds statements; the other lists are of statements.
                nested = inner.body if isinstance(inner, ast.ExceptHandler | ast.match_case) else [inner]
                yield from _statements(nested)


# --- Lazy classes and names -----------------------------------------------------------------------------


def lazy_classes(tree: ast.Module, source: Path) -> "tuple[Classes | None, list[Path]]":
    """Take the classes out of a module of imports, a literal `__all__` and classes, and compile each on its
    own; None (and `tree` untouched) for any other module. Also the files read to decide (what a star import
    of a sibling binds: `from ._enums import *`). Edits `tree`."""
    classes = [statement for statement in tree.body if isinstance(statement, ast.ClassDef)]
    prelude = [statement for statement in tree.body if not isinstance(statement, ast.ClassDef)]
    names = [statement.name for statement in classes]
    exported = _literal_all(prelude)
    stars, starred = _sibling_stars(prelude, source.parent)
    bound = set().union(*(bound_names(statement) for statement in prelude), *(n or () for n in starred))
    if (
        not classes
        or exported is None
        or not set(names) <= set(exported)
        or len(set(names)) != len(names)
        or not all(_inert(statement) for statement in prelude)
        or None in starred
        # A name bound before its class is defined would be found instead of defining it.
        or set(names) & bound
    ):
        return None, stars
    reads = [_reads(statement) for statement in classes]
    if None in reads:
        return None, stars
    tree.body = prelude
    lazy: Classes = {}
    for index, (statement, read) in enumerate(zip(classes, reads, strict=True)):
        named = (read or set()) & set(names) - {statement.name}
        code = compile(ast.Module(body=[statement], type_ignores=[]), str(source), "exec", dont_inherit=True)
        lazy[statement.name] = (marshal.dumps(code), tuple(sorted(named)), index)
    return lazy, stars


def lazy_inputs_import(tree: ast.Module, source: Path, text: bytes) -> tuple[Exports, list[Path]]:
    """A module's `from ._inputs import *` (every resource module has one): bind at once each name that the
    module's text (`text`) holds anywhere or that another statement binds, and the others when first used;
    return those, and the files read to decide. Edits `tree`."""
    stars = [
        statement
        for statement in tree.body
        if _is_star_import(statement) and statement.level == 1 and statement.module == "_inputs"
    ]
    if len(stars) != 1:
        return {}, []
    others = [statement for statement in tree.body if statement is not stars[0]]
    # What another star import of a sibling (`from ._enums import *`) binds, before or after this one.
    siblings, starred = _sibling_stars(others, source.parent)
    files = [source.parent / "_inputs.py", *siblings]
    exported = star_names(files[0])
    bound = set().union(*(bound_names(statement) for statement in others), *(n or () for n in starred))
    # Every word of the text: the names its code reads (annotations postponed or quoted too), and more.
    words = {word.decode() for word in _WORD.findall(text)}
    if (
        exported is None
        or None in starred
        or len(siblings) != sum(1 for statement in others if _STAR in bound_names(statement))
        or _reaches_unnamed(tree, text, words)
    ):
        return {}, files
    eager = [name for name in exported if name in words | bound]
    replacement: ast.stmt = (
        ast.ImportFrom(module="_inputs", names=[ast.alias(name) for name in eager], level=1)
        if eager
        # Import it all the same (what the module runs does not change), binding nothing.
        else ast.Expr(ast.parse('__import__("_inputs", globals(), None, ("*",), 1)', mode="eval").body)
    )
    tree.body[tree.body.index(stars[0])] = ast.fix_missing_locations(ast.copy_location(replacement, stars[0]))
    return {name: ("_inputs", name) for name in exported if name not in eager}, files


_WORD = re.compile(rb"[A-Za-z_]\w*")


def _reaches_unnamed(tree: ast.Module, text: bytes, words: set[str]) -> bool:
    """Whether the module's code could reach a name of its namespace without naming it (`globals()`,
    `vars()`, `eval`..., a function's `__globals__`, the module through `sys.modules` or `importlib`); looked
    for in the tree only where its text has such a word."""
    if re.search(rb"__globals__|\bsys\.modules\b|\bimportlib\b", text):
        return True
    if not words & _NAMESPACE_CALLS:
        return False
    reads = _reads(tree)
    return reads is None or bool(reads & _NAMESPACE_CALLS)


def _literal_all(statements: list[ast.stmt]) -> list[str] | None:
    """The module's `__all__` when one statement binds it to a list of strings."""
    found = [s for s in statements if "__all__" in bound_names(s)]
    if len(found) != 1 or not isinstance(found[0], ast.Assign) or not isinstance(found[0].value, ast.List):
        return None
    values = [element.value if isinstance(element, ast.Constant) else None for element in found[0].value.elts]
    return [v for v in values if isinstance(v, str)] if all(isinstance(v, str) for v in values) else None


def _inert(statement: ast.stmt, top: bool = True) -> bool:
    """Imports (a star import only of a sibling module, at the top), `__all__`, a docstring, or an `if` of
    those: nothing that reads a class."""
    if _is_star_import(statement):
        return top and statement.level == 1 and "." not in (statement.module or ".")
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return True
    if isinstance(statement, ast.If):
        return all(_inert(inner, top=False) for inner in [*statement.body, *statement.orelse])
    if isinstance(statement, ast.Assign):
        return bound_names(statement) == {"__all__"}
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")  # a name, not an attribute (`outputs.X`)


def _reads(node: ast.AST) -> set[str] | None:
    """Every name code may read: its names, and the names in its annotations' strings (postponed or
    quoted); None if it may bind a module name (`global`, `nonlocal`)."""
    found = set()
    annotations: list[ast.expr] = []
    for inner in _walk(node):
        if isinstance(inner, ast.Name):
            found.add(inner.id)
        elif isinstance(inner, ast.Global | ast.Nonlocal):
            return None
        elif isinstance(inner, ast.arg | ast.AnnAssign) and inner.annotation is not None:
            annotations.append(inner.annotation)
        elif isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef) and inner.returns is not None:
            annotations.append(inner.returns)
    for annotation in annotations:
        for text in _walk(annotation):
            if isinstance(text, ast.Constant) and isinstance(text.value, str):
                found.update(_IDENTIFIER.findall(text.value))
    return found


# --- Postponed annotations ------------------------------------------------------------------------------


def bound_names(node: ast.AST, walrus: bool = True) -> set[str]:
    """The names a statement binds in the scope it runs in (more rather than fewer: comprehension variables
    count too); `*` for a star import, which may bind any. `walrus=False`: the module has no `:=`."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        # Its body binds in its own scope; its decorators, defaults, annotations and bases run here, where
        # only an assignment expression could bind.
        names = {node.name}
        if walrus:
            headers: list[ast.AST] = [*node.decorator_list]
            if isinstance(node, ast.ClassDef):
                headers += [*node.bases, *node.keywords]
            else:
                headers += [node.args, *filter(None, [node.returns])]
            names |= {_walrus_target(n) for h in headers for n in _walk(h) if isinstance(n, ast.NamedExpr)}
        return names
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {_STAR if a.name == "*" else (a.asname or a.name.split(".")[0]) for a in node.names}
    names = set()
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        names.add(node.id)
    elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
        names.add(node.name)
    elif isinstance(node, ast.MatchMapping) and node.rest:
        names.add(node.rest)
    elif isinstance(node, ast.Lambda):
        return {_walrus_target(n) for n in _walk(node.args) if isinstance(n, ast.NamedExpr)}
    for child in ast.iter_child_nodes(node):
        names |= bound_names(child, walrus)
    return names


def _walrus_target(node: ast.NamedExpr) -> str:
    return node.target.id


def postpone_annotations(tree: ast.Module, source: bytes | None = None) -> None:
    """Turn each annotation that `typing.get_type_hints` would resolve to the same object into its source
    text, as PEP 563 compiles it. See the module's docstring for what stays evaluated.
    `source` (the module's text) only saves looking for `global` statements and `:=` where it has none."""
    rebound = (
        {name for node in _statements(tree.body) if isinstance(node, ast.Global) for name in node.names}
        if source is None or re.search(rb"\bglobal\b", source)
        else set()
    )
    walrus = source is None or b":=" in source
    bound_from: list[set[str]] = [set() for _ in range(len(tree.body) + 1)]
    for index in range(len(tree.body) - 1, -1, -1):
        bound_from[index] = bound_from[index + 1] | bound_names(tree.body[index], walrus)
    qualifiers = frozenset(
        alias.asname or alias.name
        for node in _statements(tree.body)
        if isinstance(node, ast.ImportFrom)
        and node.module in ("typing", "typing_extensions")
        and not node.level
        for alias in node.names
        if alias.name in ("NotRequired", "Required")
    )
    for index, statement in enumerate(tree.body):
        # Names bound by this statement or any later one may differ between definition and resolution.
        unstable = bound_from[index] | rebound | _RESOLVER_LOCALS
        _postpone_in(statement, _Scope(unstable, walrus, qualifiers - unstable))


@dataclass(frozen=True)
class _Scope:
    unstable: set[str]
    """Names an annotation here may not use: they may be bound otherwise when the hint is resolved."""
    walrus: bool
    """Whether the module has an assignment expression (which binds in the enclosing scope)."""
    qualifiers: frozenset[str]
    """The names of typing's `NotRequired` and `Required` in the module (stable ones only)."""
    kind: str = "plain"
    """Of the class whose body this is: "plain" (a pulumi input, output or resource class, or the module
    itself), "typed dict" or "other" (whose base or decorator may read its annotations as it is made)."""


_TYPED_DICT_BASES = frozenset({"TypedDict", "typing.TypedDict", "typing_extensions.TypedDict"})
# Type qualifiers a TypedDict or a dataclass reads from an annotation as the class is made.
_QUALIFIERS = frozenset({"Annotated", "ClassVar", "Final", "InitVar", "NotRequired", "ReadOnly", "Required"})


def _kind(node: ast.ClassDef) -> str:
    bases = {ast.unparse(base) for base in node.bases}
    decorators = {ast.unparse(decorator) for decorator in node.decorator_list}
    keywords = {keyword.arg for keyword in node.keywords}
    if bases and bases <= _TYPED_DICT_BASES and not decorators and keywords <= {"total"}:
        return "typed dict"
    if bases <= _PLAIN_BASES and decorators <= _PLAIN_DECORATORS and not keywords:
        return "plain"
    return "other"


def _postpone_in(statement: ast.stmt, scope: _Scope) -> None:
    """Postpone the annotations evaluated by `statement` in the module (or a class body) it runs in."""
    unstable = scope.unstable
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
        arguments = statement.args
        for argument in [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *filter(None, [arguments.vararg, arguments.kwarg]),
        ]:
            if argument.annotation is not None and _postponable(argument.annotation, unstable):
                argument.annotation = _as_text(argument.annotation)
        if statement.returns is not None and _postponable(statement.returns, unstable):
            statement.returns = _as_text(statement.returns)
    elif isinstance(statement, ast.ClassDef):
        body = replace(
            scope,
            unstable=unstable | set().union(*(bound_names(s, scope.walrus) for s in statement.body)),
            kind=_kind(statement),
        )
        for inner in statement.body:
            # A nested class's body sees the module's names, not this class's.
            _postpone_in(inner, scope if isinstance(inner, ast.ClassDef) else body)
    elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        _postpone_field(statement, scope)
    elif isinstance(statement, ast.If | ast.Try | ast.With | ast.For | ast.While):
        for field in ("body", "orelse", "finalbody", "handlers"):
            for inner in getattr(statement, field, []):
                for stmt in inner.body if isinstance(inner, ast.ExceptHandler) else [inner]:
                    _postpone_in(stmt, scope)


def _postpone_field(statement: ast.AnnAssign, scope: _Scope) -> None:
    """A class's (or the module's) annotated name: into `__annotations__`, which only a plain class leaves
    for later. A TypedDict reads whether a key is required from the outermost `NotRequired[...]` or
    `Required[...]` as it is made: that stays evaluated, what it wraps is postponed, and an annotation
    without one (`pulumi.Input[...]`) is postponed whole (the key stays as required as it was)."""
    annotation = statement.annotation
    if scope.kind == "plain" and _postponable(annotation, scope.unstable):
        statement.annotation = _as_text(annotation)
        return
    if scope.kind != "typed dict":
        return
    if (
        isinstance(annotation, ast.Subscript)
        and isinstance(annotation.value, ast.Name)
        and annotation.value.id in scope.qualifiers
        and _unqualified(annotation.slice)
        and _postponable(annotation.slice, scope.unstable)
    ):
        annotation.slice = _as_text(annotation.slice)
        return
    root = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    if (
        isinstance(root, ast.Attribute)
        and _unqualified(annotation)
        and _postponable(annotation, scope.unstable)
    ):
        statement.annotation = _as_text(annotation)


def _unqualified(annotation: ast.expr) -> bool:
    """No name in it that could be a type qualifier."""
    return not any(
        (isinstance(node, ast.Name) and node.id in _QUALIFIERS)
        or (isinstance(node, ast.Attribute) and node.attr in _QUALIFIERS)
        for node in _walk(annotation)
    )


def _postponable(annotation: ast.expr, unstable: set[str]) -> bool:
    names = set()
    for node in _walk(annotation):
        if isinstance(node, _EAGER_ONLY):
            return False
        if isinstance(node, ast.Name):
            names.add(node.id)
    # Without a name (`None`, a string) there is nothing to gain.
    return bool(names) and _STAR not in unstable and not names & unstable


def _as_text(annotation: ast.expr) -> ast.expr:
    return ast.copy_location(ast.Constant(ast.unparse(annotation)), annotation)


# --- Lazy star imports ----------------------------------------------------------------------------------


def lazy_star_imports(tree: ast.Module, directory: Path) -> tuple[Exports, list[Path]]:
    """Remove the package's `from .submodule import *` statements that can run on first use, and return what
    each of their names resolves to, with the files read to decide it. Edits `tree`."""
    stars = {
        statement.module: statement
        for statement in tree.body
        if _is_star_import(statement)
        and statement.level == 1
        and statement.module
        and "." not in statement.module
    }
    if not stars:
        return {}, []
    others = [statement for statement in tree.body if statement not in stars.values()]
    bound = set().union(*(bound_names(statement) for statement in others))
    read = {
        node.id
        for statement in others
        for node in _walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    submodules = {path.stem for path in directory.glob("*.py")} | {
        path.parent.name for path in directory.glob("*/__init__.py")
    }
    files = [directory / f"{name}.py" for name in stars if (directory / f"{name}.py").is_file()]
    exported = {name: star_names(directory / f"{name}.py") for name in stars}
    if (
        _STAR in bound
        or None in exported.values()
        or any(
            other in submodules and other != name for name, names in exported.items() for other in names or ()
        )
    ):
        # A name could come from anywhere, or shadow another submodule: leave the package eager.
        return {}, files
    eager = {name for name in stars if name in bound | read}
    while True:
        taken = bound | read | eager | {n for name in eager for n in exported[name] or ()}
        more = {name for name in stars.keys() - eager if set(exported[name] or ()) & taken}
        if not more:
            break
        eager |= more
    exports: Exports = {}
    lazy = [name for name in stars if name not in eager]
    for name in lazy:  # in the star imports' order: a later one's name wins, as it does when they run
        exports[name] = (name, None)
        exports.update({member: (name, member) for member in exported[name] or ()})
    removed = {id(stars[name]) for name in lazy}
    tree.body = [statement for statement in tree.body if id(statement) not in removed]
    return exports, files


_ALL_LITERAL = re.compile(r"^__all__ = (\[[^\]]*\])", re.MULTILINE)


def star_names(path: Path) -> list[str] | None:
    """The names `from <module> import *` binds: its literal `__all__`, else its public top-level names; None
    when that cannot be told without running it (a subpackage, a computed `__all__`, conditional bindings).
    Read once per version of the file (every resource module of a service asks about its `_inputs`)."""
    if not path.is_file():
        return None
    names = _star_names(str(path), _stamp(path))
    return None if names is None else list(names)


@functools.cache
def _star_names(file: str, stamp: tuple[int, int]) -> tuple[str, ...] | None:
    path = Path(file)
    source = path.read_text(encoding="utf-8")
    if source.count("__all__") == 1:
        match = _ALL_LITERAL.search(source)
        if match:
            try:
                names = ast.literal_eval(match[1])
            except (ValueError, SyntaxError):
                return None
            return tuple(names) if all(isinstance(n, str) and n.isidentifier() for n in names) else None
        return None
    if "__all__" in source:
        return None
    tree = ast.parse(source, str(path))
    simple = (
        ast.Import,
        ast.ImportFrom,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.Assign,
        ast.Expr,
    )
    if not all(isinstance(statement, simple) for statement in tree.body) or any(
        isinstance(node, ast.Global)
        or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _NAMESPACE_CALLS
        )
        for node in _walk(tree)
    ):
        return None
    names = set().union(*(bound_names(statement) for statement in tree.body))
    if _STAR in names:
        return None
    return tuple(sorted(name for name in names if not name.startswith("_")))


_NAMESPACE_CALLS = frozenset({"globals", "vars", "exec", "eval", "setattr", "__import__"})


# --- Pre-compiling (scripts/setup.sh) -------------------------------------------------------------------


def provider_sources(exclude: str | None = None) -> Iterator[Path]:
    """Every module of the provider SDKs, but those whose path matches `exclude` (a regular expression)."""
    pattern = re.compile(exclude) if exclude else None
    for provider in sorted(PROVIDERS):
        spec = importlib.util.find_spec(provider)
        if spec is None or not spec.submodule_search_locations:
            continue
        for root in spec.submodule_search_locations:
            for path in sorted(Path(root).rglob("*.py")):
                if pattern is None or not pattern.search(str(path)):
                    yield path


def _warm_one(path: Path) -> None:
    Loader("", str(path))._compiled()


def warm(sources: Iterable[Path], jobs: int | None = None) -> int:
    """Compile the fast cache of `sources` on every core, and remove the caches of earlier versions of this
    file. Returns how many modules."""
    from concurrent.futures import ProcessPoolExecutor

    paths = list(sources)
    for directory in {path.parent / "__pycache__" for path in paths}:
        for stale in directory.glob(_CACHE_GLOB):
            if f".opt-{_TAG}." not in stale.name:
                stale.unlink(missing_ok=True)
    # Largest first, so that no core is left with the biggest module at the end.
    paths.sort(key=lambda path: -path.stat().st_size)
    with ProcessPoolExecutor(jobs or os.cpu_count()) as pool:
        list(pool.map(_warm_one, paths, chunksize=8))
    return len(paths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synth.fast_imports", description=__doc__.splitlines()[0])
    parser.add_argument("--warm", action="store_true", help="pre-compile the cache of the provider SDKs")
    parser.add_argument("-x", "--exclude", metavar="REGEX", help="skip the modules whose path matches")
    parser.add_argument("-j", "--jobs", type=int, help="processes (default: one per core)")
    args = parser.parse_args(argv)
    if not args.warm:
        parser.error("nothing to do: pass --warm")
    start = time.perf_counter()
    count = warm(provider_sources(args.exclude), args.jobs)
    print(f"fast imports: {count} provider modules compiled in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
