"""Set-up's bytecode (scripts/compile_bytecode.py): what it compiles, that Python's own imports take it, and
that a second run compiles nothing."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from scripts.compile_bytecode import compile_all, sources


def _tree(root: Path) -> None:
    files = {
        "pkg/__init__.py": "VALUE = 1\n",
        "pkg/used/__init__.py": "from pkg import VALUE\nDOUBLE = 2 * VALUE\n",
        "pkg/unused/__init__.py": "X = 1\n",
        "pkg/tests/test_pkg.py": "def test(): pass\n",
        "pkg/template.py": "def broken(:\n",
        "pkg/data.json": "{}\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_it_compiles_every_module_but_test_suites_and_excluded_directories(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = {str(p.relative_to(tmp_path)) for p in sources(tmp_path, re.compile(r"/pkg/(unused)/"))}
    assert found == {"pkg/__init__.py", "pkg/used/__init__.py", "pkg/template.py"}


def test_python_imports_its_bytecode_and_only_a_changed_module_is_compiled_again(tmp_path: Path) -> None:
    _tree(tmp_path)
    paths = list(sources(tmp_path, None))
    failures = compile_all(paths, jobs=2)
    assert failures == [f"{tmp_path / 'pkg/template.py'}: SyntaxError"]
    caches = {p: Path(importlib.util.cache_from_source(str(p))) for p in paths if p.name != "template.py"}
    assert all(cache.is_file() for cache in caches.values())
    result = subprocess.run(
        [sys.executable, "-v", "-c", "import pkg.used"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    for module in ("pkg/__init__.py", "pkg/used/__init__.py"):
        assert f"matches {tmp_path / module}" in result.stderr, result.stderr
    written = {cache: cache.stat().st_mtime_ns for cache in caches.values()}
    assert compile_all(paths, jobs=2) == failures
    assert {cache: cache.stat().st_mtime_ns for cache in caches.values()} == written
    (tmp_path / "pkg/__init__.py").write_text("VALUE = 21\n")
    compile_all(paths, jobs=2)
    again = {cache for cache in caches.values() if cache.stat().st_mtime_ns != written[cache]}
    assert again == {caches[tmp_path / "pkg/__init__.py"]}


def test_a_module_beside_an_extension_of_its_name_is_left_out_as_never_imported(tmp_path: Path) -> None:
    # An extension module of the standard library, under its own name (its init function is named after it),
    # beside a source of that name that would fail if Python ever ran it (mypy ships its sources so).
    import _bisect

    assert _bisect.__file__ is not None
    extension = Path(_bisect.__file__)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg" / extension.name).write_bytes(extension.read_bytes())
    (tmp_path / "pkg/_bisect.py").write_text("raise ImportError('the source ran')\n")
    assert {p.name for p in sources(tmp_path, None)} == {"__init__.py"}
    result = subprocess.run(
        [sys.executable, "-c", "import pkg._bisect as m; print(m.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == str(tmp_path / "pkg" / extension.name)
