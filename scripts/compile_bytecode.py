"""Compile the bytecode of an environment's packages, as `python -m compileall -j0` would, but only of
modules this project's processes can import (scripts/setup.sh).

Where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) Python writes no bytecode, so without
this every process would compile the provider SDKs from source again. Left out: the directories whose path
matches `--exclude` (the provider subpackages nothing here uses, scripts/type_check_scope.py), and packages'
own test suites (`tests` directories: scipy's and numpy's are a seventh of the environment's source), which
no process of this project imports. compileall cannot prune a directory (its `-x` is tested file by file,
after every file of an excluded directory has been sent to a worker), which cost it more than compiling.

Usage: .venv/bin/python -m scripts.compile_bytecode [-x REGEX] DIR...
"""

import argparse
import importlib.util
import os
import py_compile
import re
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

TEST_SUITES = frozenset({"tests"})
"""Directory names of packages' own test suites."""


def sources(root: Path, exclude: re.Pattern[str] | None) -> Iterator[Path]:
    """Every `.py` file under `root`, but in `__pycache__`, test suites and paths matching `exclude` (a
    directory's path is tested with a trailing `/`), and those beside an extension module of the same name."""
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if name != "__pycache__"
            and name not in TEST_SUITES
            and not (exclude and exclude.search(os.path.join(directory, name) + "/"))
        )
        # A module compiled to an extension (mypy's, by mypyc) is imported from that, never from its source.
        extensions = {
            name.removesuffix(suffix)
            for name in names
            for suffix in EXTENSION_SUFFIXES
            if name.endswith(suffix)
        }
        for name in sorted(names):
            path = os.path.join(directory, name)
            if (
                name.endswith(".py")
                and name[:-3] not in extensions
                and not (exclude and exclude.search(path))
            ):
                yield Path(path)


def _up_to_date(path: Path) -> bool:
    """Whether `path` has bytecode for its current mtime and size (the check compileall makes)."""
    try:
        with open(importlib.util.cache_from_source(str(path)), "rb") as cache:
            header = cache.read(16)
    except OSError:
        return False
    stat = path.stat()
    fields = (0, int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF)
    return header == importlib.util.MAGIC_NUMBER + b"".join(n.to_bytes(4, "little") for n in fields)


def _compile(path: Path) -> str | None:
    """None, or why `path` does not compile (a package may ship a file it never imports, e.g. a template)."""
    if _up_to_date(path):
        return None
    try:
        py_compile.compile(str(path), doraise=True)
    except py_compile.PyCompileError as error:
        return f"{path}: {error.exc_type_name}"
    return None


def compile_all(paths: list[Path], jobs: int | None = None) -> list[str]:
    """Compile `paths` on every core, largest first (so that no core is left with the biggest at the end);
    returns the files that did not compile, with why."""
    paths = sorted(paths, key=lambda path: -path.stat().st_size)
    with ProcessPoolExecutor(jobs or os.cpu_count()) as pool:
        return [failure for failure in pool.map(_compile, paths, chunksize=64) if failure]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.compile_bytecode", description=__doc__.splitlines()[0]
    )
    parser.add_argument("roots", nargs="+", type=Path, metavar="DIR", help="a site-packages directory")
    parser.add_argument(
        "-x", "--exclude", metavar="REGEX", help="skip the files and directories whose path matches"
    )
    parser.add_argument("-j", "--jobs", type=int, help="processes (default: one per core)")
    args = parser.parse_args(argv)
    exclude = re.compile(args.exclude) if args.exclude else None
    start = time.perf_counter()
    paths = [path for root in args.roots for path in sources(root, exclude)]
    failures = compile_all(paths, args.jobs)
    for failure in failures:
        print(f"did not compile (Python compiles it if it is ever imported): {failure}", file=sys.stderr)
    print(f"bytecode: {len(paths) - len(failures)} modules up to date in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
