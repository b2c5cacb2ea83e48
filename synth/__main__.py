"""Offline synth: run the real program for a stack under mocks and write (or check) its snapshot.

    .venv/bin/python -m synth dev            # write snapshots/dev/
    .venv/bin/python -m synth --check        # compare every stack with its committed snapshot
    .venv/bin/python -m synth prod --out /tmp/prod

No AWS account or Pulumi CLI is needed; see README "Seeing what a stack would create".
"""

import argparse
import difflib
import gc
import sys
from pathlib import Path

from synth import snapshot
from synth.runner import ROOT, run_stack, stacks


def diff(expected: dict[str, str], actual: dict[str, str], label: str) -> str:
    """Unified diff between two snapshot trees, file by file."""
    chunks: list[str] = []
    for name in sorted(set(expected) | set(actual)):
        old, new = expected.get(name, ""), actual.get(name, "")
        if old != new:
            chunks += difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"{label}/{name} (committed)" if name in expected else "/dev/null",
                tofile=f"{label}/{name} (program)" if name in actual else "/dev/null",
            )
    return "".join(chunks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synth", description=__doc__.splitlines()[0])
    parser.add_argument("stacks", nargs="*", help="stack names (default: every Pulumi.<stack>.yaml)")
    parser.add_argument("--check", action="store_true", help="fail with a diff if a snapshot is stale")
    parser.add_argument("--out", type=Path, help="write here instead of snapshots/<stack> (one stack)")
    args = parser.parse_args(argv)
    names = args.stacks or stacks()
    unknown = sorted(set(names) - set(stacks()))
    if unknown:
        parser.error(f"no Pulumi.<stack>.yaml for {', '.join(unknown)}; stacks: {', '.join(stacks())}")
    if args.out and len(names) != 1:
        parser.error("--out takes exactly one stack")
    stale = []
    for name in names:
        files = snapshot.render(run_stack(name))
        directory = args.out or ROOT / "snapshots" / name
        if args.check:
            changes = diff(snapshot.read(directory), files, f"snapshots/{name}")
            if changes:
                sys.stdout.write(changes)
                stale.append(name)
        else:
            snapshot.write(files, directory)
            print(f"{name}: {len(files)} files in {directory}")
    if stale:
        print(f"\nstale snapshots: {', '.join(stale)}; run: .venv/bin/python -m synth {' '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    # A one-shot process: the provider SDKs leave about a million objects alive until exit, and each full
    # collection walks them all (a quarter of a synth's time). Reference counting frees what a run drops.
    gc.disable()
    raise SystemExit(main())
