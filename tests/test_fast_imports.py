"""The offline fast path (synth/fast_imports.py) loads the provider SDKs as Python would, only faster, and
nothing else: modules the SDK sees alike, lazy packages that bind what their star imports bind, annotations
postponed only where resolving them later gives the same object, and `pulumi up` never near any of it.

CI also synthesises every stack with the fast path on and off and compares the bytes (.ci/run).
"""

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from synth import fast_imports
from synth.fast_path import SWITCH, fast_path
from synth.runner import ROOT, ProgramRun
from tests.support import module_description

PYTHON = sys.executable
ON = {**os.environ, SWITCH: "1"}

needs_fast_path = pytest.mark.skipif(not fast_path(), reason=f"{SWITCH}=0: the suite runs without it")

# Run in a fresh process of each kind. "fast" (the finder installed first, as `python -m synth` does): what
# using one name of a lazy package imports, and what the package binds; then every stack run, and the provider
# modules that loaded described (tests/support/module_description.py). "own": the same package on Python's own
# imports; the program run without an entry point, as `pulumi up` runs it (here under the mocks), and what it
# imported; the modules the fast process loaded, described.
_PROCESS = """
import json, sys
if sys.argv[1] == "fast":
    from synth import fast_imports
    fast_imports.install()
found = {}
import pulumi_kubernetes as k8s
release = k8s.helm.v3.Release  # what the program uses
found["helm.v3 loaded"] = sorted(n for n in sys.modules if n.startswith("pulumi_kubernetes.helm.v3."))
found["requests"] = "requests" in sys.modules
found["release"] = release.__module__
import pulumi_aws as aws
aws.ec2.Vpc
import pulumi_aws.ec2.get_vpc  # a submodule named like the function it exports, imported directly
found["get_vpc"] = f"{aws.ec2.get_vpc.__module__}.{aws.ec2.get_vpc.__qualname__}"
namespace = {}
exec("from pulumi_kubernetes.helm.v3 import *", namespace)
found["star"] = sorted(n for n in namespace if n != "__builtins__")
found["dir"] = dir(k8s.helm.v3)
from synth.runner import run_stack
from tests.support.module_description import fast_run_of_every_stack, import_and_describe
if sys.argv[1] == "fast":
    found["modules"] = fast_run_of_every_stack()
else:
    found["resources"] = len(run_stack("dev").resources)
    providers = [m for n, m in sys.modules.items() if n.split(".")[0] in ("pulumi_aws", "pulumi_eks")]
    found["fast imports imported"] = "synth.fast_imports" in sys.modules
    found["finders"] = [type(f).__module__ for f in sys.meta_path]
    found["loaders"] = sorted({type(m.__spec__.loader).__name__ for m in providers})
    found["modules"] = import_and_describe(sys.argv[2:])
print(json.dumps(found))
"""


def _process(*argv: str) -> dict[str, Any]:
    result = subprocess.run(
        [PYTHON, "-c", _PROCESS, *argv], cwd=ROOT, env=ON, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


@pytest.fixture(scope="module")
def fast() -> dict[str, Any]:
    return _process("fast")


@pytest.fixture(scope="module")
def own(fast: dict[str, Any]) -> dict[str, Any]:
    return _process("own", *fast["modules"])


@needs_fast_path
def test_the_finder_loads_the_three_providers_and_nothing_else(dev: ProgramRun) -> None:
    loaded = fast_imports.loaded_modules()
    assert loaded, "the program ran, but the finder loaded no module"
    assert {name.split(".")[0] for name in loaded} == fast_imports.PROVIDERS
    around = [
        name
        for name, module in sys.modules.items()
        if name.split(".")[0] in fast_imports.PROVIDERS
        and not isinstance(module.__loader__, fast_imports.Loader)
    ]
    assert around == [], "provider modules loaded around the finder"
    for types_module in ("outputs", "_inputs"):
        lazy = sys.modules[f"pulumi_kubernetes.core.v1.{types_module}"]
        assert isinstance(lazy, fast_imports.LazyClasses)
        made = set(lazy.__all__) & set(vars(lazy))
        assert len(made) < len(lazy.__all__) / 2, (
            f"the program's runs made most classes of core.v1.{types_module}"
        )
    assert isinstance(sys.modules["pulumi_kubernetes.core.v1.Namespace"], fast_imports.LazyExports)
    finder = fast_imports.Finder()
    for other in ("pulumi", "pulumi.runtime", "pydantic", "yaml", "components", "synth.runner", "grpc"):
        assert finder.find_spec(other) is None, other
    spec = finder.find_spec("pulumi_aws.ec2", sys.modules["pulumi_aws"].__path__)
    assert spec is not None
    assert isinstance(spec.loader, fast_imports.Loader)


@needs_fast_path
def test_the_program_runs_on_pythons_own_imports_without_an_entry_point(own: dict[str, Any]) -> None:
    """What `pulumi up` runs (`__main__.py` and everything it imports, here under the mocks) neither imports
    nor installs the finder: only `python -m synth` and the tests do."""
    assert own["resources"] > 50
    assert own["fast imports imported"] is False
    assert not [finder for finder in own["finders"] if finder.startswith("synth")]
    assert own["loaders"] == ["SourceFileLoader"]


def _imported(path: Path) -> set[str]:
    """Every module a file imports (`from a import b` counts as both `a` and `a.b`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def test_only_the_offline_entry_points_import_the_finder() -> None:
    importers = [
        str(path.relative_to(ROOT))
        for path in sorted(ROOT.rglob("*.py"))
        if not {".venv", ".venv-tools", "node_modules"} & set(path.relative_to(ROOT).parts)
        and "synth.fast_imports" in _imported(path)
    ]
    assert importers == [
        "scripts/benchmark.py",
        "synth/__main__.py",
        "tests/conftest.py",
        "tests/support/module_description.py",
        "tests/test_fast_imports.py",
    ]


@needs_fast_path
def test_provider_modules_are_the_ones_python_makes(fast: dict[str, Any], own: dict[str, Any]) -> None:
    """Every provider module a synth of every stack loads, described (names, what each is, the property types
    pulumi's type machinery resolves from the annotations, TypedDict keys) through the finder and on Python's
    own imports: the same. After an SDK upgrade, also compare every signature and its resolved hints:
    .venv/bin/python -m tests.support.module_description --compare --thorough (a minute)."""
    assert len(fast["modules"]) > 100
    assert module_description.differences(fast["modules"], own["modules"]) == []


@needs_fast_path
def test_a_lazy_package_binds_what_its_star_imports_bind(fast: dict[str, Any], own: dict[str, Any]) -> None:
    assert "pulumi_kubernetes.helm.v3.helm" not in fast["helm.v3 loaded"]
    assert fast["requests"] is False, "the Release alone pulled in helm.py, and requests with it"
    assert own["requests"] is True
    for key in ("get_vpc", "release", "star", "dir"):
        assert fast[key] == own[key], key
    assert fast["get_vpc"] == "pulumi_aws.ec2.get_vpc.get_vpc"


def _postponed(source: str) -> str:
    tree = ast.parse(textwrap.dedent(source))
    fast_imports.postpone_annotations(tree)
    return ast.unparse(tree)


def test_annotations_are_postponed_where_resolving_them_later_gives_the_same_object() -> None:
    assert _postponed(
        """
        import pulumi
        from typing import Mapping, NotRequired, Optional, TypedDict
        @pulumi.input_type
        class Args:
            def __init__(self, *, name: pulumi.Input[Optional[str]] = None): ...
            @property
            def name(self) -> pulumi.Input[Optional[str]]: ...
        class Resource(pulumi.CustomResource):
            version: pulumi.Output[str]
        class ArgsDict(TypedDict):
            name: pulumi.Input[str]
            tags: NotRequired[pulumi.Input[Mapping[str, str]]]
            size: Optional[int]
        """
    ) == textwrap.dedent(
        """\
        import pulumi
        from typing import Mapping, NotRequired, Optional, TypedDict

        @pulumi.input_type
        class Args:

            def __init__(self, *, name: 'pulumi.Input[Optional[str]]'=None):
                ...

            @property
            def name(self) -> 'pulumi.Input[Optional[str]]':
                ...

        class Resource(pulumi.CustomResource):
            version: 'pulumi.Output[str]'

        class ArgsDict(TypedDict):
            name: 'pulumi.Input[str]'
            tags: NotRequired['pulumi.Input[Mapping[str, str]]']
            size: Optional[int]"""
    )


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            "class D(TypedDict):\n    a: NotRequired[int]",
            "a TypedDict's required keys come from its annotations (`NotRequired` here is not typing's)",
        ),
        (
            "from typing import Required\nclass D(TypedDict, total=False):\n    a: x.Input[Required[int]]",
            "a qualifier within it",
        ),
        ("@dataclass\nclass C:\n    a: ClassVar[int]", "a dataclass reads its annotations as it is made"),
        ("class C:\n    str = 1\n    def f(self) -> Optional[str]: ...", "the class body binds `str`"),
        ("def f(x: Optional[int]): ...\nOptional = None", "`Optional` is bound again after"),
        ("def f(x: Optional[int]): ...\nfrom m import *", "a later star import may bind anything"),
        ("def f() -> None:\n    def g(x: Local): ...", "a function's local names are gone by then"),
        ("def f(x: Optional[T]): ...", "pulumi's resolver gives `T` its own value"),
        ("def f():\n    global Optional\ndef g(x: Optional[int]): ...", "a `global` statement rebinds it"),
        ("def f(x: 'outputs.Thing'): ...", "a string is already postponed"),
    ],
)
def test_annotations_stay_evaluated_where_that_could_differ(source: str, why: str) -> None:
    assert _postponed(source) == ast.unparse(ast.parse(source)), why


def _lazy(tmp_path: Path, files: dict[str, str]) -> tuple[dict[str, Any], str]:
    """The lazy exports of a package made of `files`, and what is left of its `__init__.py`."""
    package = tmp_path / "pkg"
    package.mkdir()
    for name, source in files.items():
        (package / name).write_text(textwrap.dedent(source))
    tree = ast.parse((package / "__init__.py").read_text())
    exports, _ = fast_imports.lazy_star_imports(tree, package)
    return exports, ast.unparse(tree)


@pytest.mark.parametrize(
    ("files", "exports", "remaining"),
    [
        pytest.param(
            {
                "__init__.py": "import typing\nfrom .a import *\nfrom .b import *\nfrom . import outputs\n",
                "a.py": "__all__ = ['A', 'Shared']\nA = Shared = 1\n",
                "b.py": "import json\nfrom typing import Any\nShared = 2\ndef b(): ...\n_private = 3\n",
                "outputs.py": "",
            },
            {
                "a": ("a", None),
                "A": ("a", "A"),
                "Shared": ("b", "Shared"),  # the later star import wins, as when both run
                "b": ("b", "b"),  # a module exporting its own name: the name wins over the module
                "json": ("b", "json"),  # no __all__: every public top-level name
                "Any": ("b", "Any"),
            },
            "import typing\nfrom . import outputs",
            id="in the order they bind",
        ),
        pytest.param(
            {
                "__init__.py": "from .a import *\nfrom .b import *\nREGISTERED = [A]\n",
                "a.py": "__all__ = ['A']\nA = 1\n",
                "b.py": "__all__ = ['B']\nB = 2\n",
            },
            {"b": ("b", None), "B": ("b", "B")},
            "from .a import *\nREGISTERED = [A]",
            id="what the package itself reads stays eager",
        ),
    ],
)
def test_star_imports_become_lazy_names(
    tmp_path: Path, files: dict[str, str], exports: dict[str, Any], remaining: str
) -> None:
    assert _lazy(tmp_path, files) == (exports, remaining)


@pytest.mark.parametrize(
    "files",
    [
        {"a.py": "__all__ = ['b']\nb = 1\n", "b.py": ""},  # shadows another submodule
        {"a.py": "if True:\n    A = 1\n"},  # cannot tell what it binds without running it
        {"a.py": "__all__ = ['A']\n__all__ += ['B']\nA = B = 1\n"},  # a computed __all__
    ],
)
def test_a_package_whose_star_imports_cannot_be_told_stays_eager(
    tmp_path: Path, files: dict[str, str]
) -> None:
    assert _lazy(tmp_path, {"__init__.py": "from .a import *\n", **files}) == ({}, "from .a import *")


def test_the_cache_is_rebuilt_when_the_source_changes(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("def f(x: Optional[int]): ...\nfrom typing import Optional\nVALUE = 1\n")
    loader = fast_imports.Loader("module", str(module))
    code, _, _ = loader._compiled()
    assert Path(fast_imports.cache_path(str(module))).is_file()
    module.write_text("VALUE = 22\n")
    namespace: dict[str, Any] = {}
    exec(loader._compiled()[0], namespace)
    assert namespace["VALUE"] == 22
    assert code is not loader._compiled()[0]


ENUMS = "__all__ = ['Colour']\nColour = 'enum'\n"
"""The `_enums` module beside each module these tests compile."""
OUTPUTS = """
    import typing
    from ._enums import *
    __all__ = ['Base', 'Child', 'Holder', 'Unused', 'Cycle']
    class Base(dict):
        KIND = 'base'
    class Child(Base):  # reads Base as it is made
        KIND = Base.KIND + '/child'
    class Holder(dict):
        def child(self) -> typing.Optional['Child']: ...
        def make(self):
            return Unused()  # names Unused only when called
    class Unused(dict):
        def back(self) -> 'Cycle': ...
    class Cycle(dict):
        def back(self) -> 'Unused': ...
"""


def _fast_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> dict[str, types.ModuleType]:
    """A package of `files` beside an `_enums` module; each file run by the fast loader as the finder runs a
    provider's, in the order given."""
    name = f"lazy_{tmp_path.name}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_enums.py").write_text(ENUMS)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = {}
    for file, source in files.items():
        (package / file).write_text(textwrap.dedent(source))
        loader = fast_imports.Loader(f"{name}.{file.removesuffix('.py')}", str(package / file))
        spec = importlib.util.spec_from_file_location(loader.name, loader.path, loader=loader)
        assert spec is not None
        modules[file] = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, loader.name, modules[file])
        loader.exec_module(modules[file])
    return modules


def _outputs_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return _fast_modules(tmp_path, monkeypatch, {"outputs.py": OUTPUTS})["outputs.py"]


def test_an_outputs_module_defines_a_class_when_its_name_is_first_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _outputs_module(tmp_path, monkeypatch)
    assert isinstance(module, fast_imports.LazyClasses)
    assert {"Base", "Child", "Holder", "Unused", "Cycle"}.isdisjoint(vars(module))
    assert {"Base", "Child", "Holder", "Unused", "Cycle", "Colour", "typing"} <= set(dir(module))
    assert module.Child.KIND == "base/child"
    assert {"Base", "Child"} <= set(vars(module))
    assert "Holder" not in vars(module)
    assert isinstance(module.Holder().make(), module.Unused)  # defined with the class that names it
    assert "Cycle" in vars(module)  # named by Unused, which Holder names
    assert module.Child is module.Child
    with pytest.raises(AttributeError, match="has no attribute 'Missing'"):
        module.Missing  # noqa: B018
    namespace: dict[str, Any] = {}
    exec(f"from {module.__name__} import *", namespace)
    assert sorted(namespace.keys() - {"__builtins__"}) == ["Base", "Child", "Cycle", "Holder", "Unused"]


def test_a_class_made_lazily_comes_with_the_classes_its_hints_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK resolves hints in a copy of the module's namespace (pulumi/_types.py `_globals_for_cls`), where
    a class not made yet would be missing."""
    module = _outputs_module(tmp_path, monkeypatch)
    holder = module.Holder
    namespace = dict(vars(module))
    child = namespace["Child"]
    assert typing.get_type_hints(holder.child, namespace) == {"return": child | None}


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("__all__ = ['A']\nclass A(dict): ...\nREGISTRY = [A]\n", "module code reads a class"),
        ("class A(dict): ...\n", "no __all__: a star import takes what the namespace holds"),
        ("__all__ = ['A']\nclass A(dict): ...\nclass B(dict): ...\n", "a class a star import would not bind"),
        ("__all__ = ['A']\nfrom json import *\nclass A(dict): ...\n", "a star import of what it cannot tell"),
        ("__all__ = ['Colour']\nfrom ._enums import *\nclass Colour(dict): ...\n", "a name bound before"),
        ("__all__ = ['A']\nclass A(dict): ...\nclass A(dict): ...\n", "defined twice"),
        ("__all__ = ['A']\nclass A(dict):\n    def f(self):\n        global X\n", "binds a module name"),
    ],
)
def test_an_outputs_module_of_anything_else_stays_as_python_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, why: str
) -> None:
    tree = ast.parse(source)
    (tmp_path / "_enums.py").write_text(ENUMS)
    classes, _ = fast_imports.lazy_classes(tree, tmp_path / "outputs.py")
    assert classes is None, why
    assert ast.unparse(tree) == ast.unparse(ast.parse(source)), why


INPUTS = """
    from ._enums import *
    __all__ = ['AArgs', 'BArgs', 'Shadowed']
    class AArgs(dict): ...
    class BArgs(dict): ...
    class Shadowed(dict): ...
"""


def test_a_modules_star_import_of_inputs_binds_the_names_its_code_reads_and_the_rest_when_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = _fast_modules(
        tmp_path,
        monkeypatch,
        {
            "_inputs.py": INPUTS,
            "resource.py": """
                from ._enums import *
                from ._inputs import *
                __all__ = ['Resource']
                class Resource:
                    def __init__(self, a: 'AArgs'): ...
                Shadowed = 'its own'
            """,
        },
    )
    inputs, resource = modules["_inputs.py"], modules["resource.py"]
    assert isinstance(inputs, fast_imports.LazyClasses)
    assert isinstance(resource, fast_imports.LazyExports)
    assert vars(resource)["AArgs"] is inputs.AArgs  # its annotation names it: bound by the import
    assert "BArgs" not in vars(resource)
    assert "BArgs" not in vars(inputs)
    assert {"AArgs", "BArgs", "Shadowed", "Colour", "Resource"} <= set(dir(resource))
    assert resource.BArgs is inputs.BArgs
    assert resource.Shadowed == "its own"  # bound after the star import, as Python leaves it
    assert resource.Colour == "enum"
    namespace: dict[str, Any] = {}
    exec(f"from {resource.__name__} import *", namespace)
    assert sorted(namespace.keys() - {"__builtins__"}) == ["Resource"]


def test_a_module_that_reads_no_input_type_still_imports_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = "from ._inputs import *\nVALUE = 1\n"
    modules = _fast_modules(tmp_path, monkeypatch, {"_inputs.py": INPUTS, "function.py": source})
    tree = ast.parse(source)
    fast_imports.lazy_inputs_import(
        tree, Path(modules["_inputs.py"].__file__ or "").with_name("function.py"), source.encode()
    )
    assert ast.unparse(tree) == "__import__('_inputs', globals(), None, ('*',), 1)\nVALUE = 1"
    assert modules["function.py"].AArgs is modules["_inputs.py"].AArgs


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("from json import *\nfrom ._inputs import *\n", "another star import could bind any name"),
        ("from ._inputs import *\nNAMES = globals()\n", "code that reads the namespace"),
        ("import sys\nfrom ._inputs import *\nNAMES = sys.modules[__name__].__dict__\n", "and so does this"),
        ("from ._inputs import *\nfrom ._inputs import *\n", "two of them"),
    ],
)
def test_a_star_import_of_inputs_stays_eager_where_that_could_differ(
    tmp_path: Path, source: str, why: str
) -> None:
    (tmp_path / "_inputs.py").write_text(textwrap.dedent(INPUTS))
    (tmp_path / "_enums.py").write_text(ENUMS)
    tree = ast.parse(source)
    assert fast_imports.lazy_inputs_import(tree, tmp_path / "resource.py", source.encode())[0] == {}, why
    assert ast.unparse(tree) == ast.unparse(ast.parse(source)), why
