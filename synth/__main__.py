"""Offline synth: run the real program for a stack under mocks and write (or check) its snapshot.

    .venv/bin/python -m synth dev            # write snapshots/dev/
    .venv/bin/python -m synth --check        # compare every stack with its committed snapshot
    .venv/bin/python -m synth prod --out /tmp/prod
    .venv/bin/python -m synth plan prod --from origin/main   # what `pulumi up` would change
    .venv/bin/python -m synth cost prod      # what its pools may cost at once (--json for a machine)

No AWS account or Pulumi CLI is needed; see docs/offline.md. A synth stands for `pulumi preview`: what only
`pulumi up` refuses (a documentation placeholder where a runner address or a role goes) is a warning here.
Exit status: 0 done, 1 a snapshot is stale (--check), 2 a stack's configuration is refused (printed as
`pulumi preview` prints it, without a traceback), or, on a run of every stack, stacks collide
(`synth.stack_files.cross_stack_problems`: a cluster name twice, overlapping VPCs, a production stack
sharing a non-production stack's CI role).
"""

import argparse
import difflib
import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from synth import fast_imports

if __name__ == "__main__":
    # A one-shot process: the provider SDKs leave about a million objects alive until exit, and each full
    # collection walks them all (a quarter of a synth's time). Reference counting frees what a run drops.
    gc.disable()
    # Before anything imports a provider SDK (GPU_EKS_FAST_PATH=0: Python's own imports).
    fast_imports.install()

from config.errors import ConfigError
from config.stack import parse_stack_config
from synth import cost as costing
from synth import snapshot
from synth.runner import (
    PROJECT,
    ROOT,
    ProgramRun,
    StackFileError,
    run_program,
    run_stack,
    stack_config,
    stack_file_config,
    stacks,
)
from synth.stack_files import cross_stack_problems

STALE = 1
REFUSED = 2


def diagnostics(stack: str, errors: list[str], warnings: list[str]) -> str:
    """The "Diagnostics:" block `pulumi preview` prints for messages the program logged without a resource
    (they go to the stack's row): pulumi/pulumi pkg/backend/display/progress.go `printDiagnostics`, each
    line of a message indented by four spaces under `  <type> (<name>):`, after a severity prefix."""
    lines = ["Diagnostics:", f"  pulumi:pulumi:Stack ({PROJECT}-{stack}):"]
    for prefix, message in [*(("warning: ", w) for w in warnings), *(("error: ", e) for e in errors)]:
        lines += [f"    {line}".rstrip() for line in (prefix + message).splitlines()]
    return "\n".join(lines) + "\n"


_Result = TypeVar("_Result")


def _refusable(name: str, work: Callable[[], _Result]) -> _Result | None:
    """`work()` on a stack; on a refused stack file or configuration print it as `pulumi preview` would and
    return None."""
    try:
        return work()
    except StackFileError as exc:
        # The CLI refuses such a file before the program starts, with a bare `error:` line.
        print(f"error: {exc}", file=sys.stderr)
    except ConfigError as exc:
        # The language host logs a RunError's message alone (sdk/python/cmd/pulumi-language-python-exec).
        print(diagnostics(name, [str(exc)], []), file=sys.stderr)
    return None


def _run(name: str, program: Callable[[], ProgramRun] | None = None) -> ProgramRun | None:
    """Run a stack (or `program`, a run of it with other config); on a refused configuration print it as
    `pulumi preview` would and return None."""
    run = _refusable(name, program or (lambda: run_stack(name)))
    if run is None:
        return None
    if run.warnings:
        print(diagnostics(name, [], run.warnings), file=sys.stderr)
    return run


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


def plan_main(argv: list[str], root: Path = ROOT) -> int:
    """`python -m synth plan`: exit 0 with a plan, 1 when the plan cannot be carried out as planned (a
    blocking finding of `synth.plan.FINDINGS`: a protected resource deleted or replaced, a create-first
    replacement that collides with the old resource, an update the API refuses, a Kubernetes version EKS
    cannot move to, the cluster's subnets moved to another set of zones, a region move), 2 on bad
    arguments, an unreadable previous state or a refused configuration (of either state, printed as
    `pulumi preview` prints it)."""
    # Here, not at the top: a plain synth does not need the planner (a fiftieth of a second to import).
    from synth import plan as planning

    parser = argparse.ArgumentParser(
        prog="python -m synth plan",
        description="What `pulumi up` would create, update, replace or delete: the stack as the working tree "
        "declares it, compared with a previous state (default: its snapshot committed at HEAD, so an edit "
        "shows even after `python -m synth STACK` rewrote the working tree's snapshot).",
    )
    parser.add_argument("stack", help="stack name (a Pulumi.<stack>.yaml)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--from", dest="ref", metavar="REF", help="compare with the snapshot committed at REF (default: HEAD)"
    )
    source.add_argument(
        "--from-config", type=Path, metavar="FILE", help="compare with the program run with FILE's config"
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json",
        action="store_true",
        help='print [{"op", "type", "name", "reason", "changes", "paths"}, ...] (every change, every path)',
    )
    output.add_argument("--markdown", action="store_true", help="print a pull-request comment section")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="every change one by one, and every changed input path (text and markdown)",
    )
    args = parser.parse_args(argv)
    if args.stack not in stacks(root):
        parser.error(f"no Pulumi.{args.stack}.yaml; stacks: {', '.join(stacks(root))}")
    try:
        if args.from_config:
            previous = _run(
                args.stack,
                lambda: run_program(stack_file_config(args.from_config, root), stack=args.stack),
            )
            if previous is None:
                return REFUSED
            before = planning.state_of_run(previous, f"the program with {args.from_config}")
        else:
            before = planning.previous_state(args.stack, args.ref, root)
        current = _run(args.stack, lambda: run_stack(args.stack, root))
        if current is None:
            return REFUSED
        after = planning.state_of_run(current, f"the working tree's Pulumi.{args.stack}.yaml")
        result = planning.plan(before, after)
    except (planning.PlanError, OSError) as exc:
        print(f"python -m synth plan: {exc}", file=sys.stderr)
        return REFUSED
    if args.json:
        sys.stdout.write(planning.render_json(result))
    elif args.markdown:
        sys.stdout.write(planning.render_markdown(args.stack, result, args.verbose))
    else:
        sys.stdout.write(planning.render_text(args.stack, result, args.verbose))
    return 1 if result.blocking else 0


def cost_main(argv: list[str]) -> int:
    """`python -m synth cost`: exit 0 with the report, 2 on a bad stack name or a refused configuration."""
    parser = argparse.ArgumentParser(
        prog="python -m synth cost",
        description="What each pool of a stack may cost at once: the worst case its limits admit, at "
        "on-demand list price (Karpenter 1.14.1's us-east-1 table), the node mix reaching it, the cheapest "
        "fill of its GPU limit, and the stack's total.",
    )
    parser.add_argument("stack", help="stack name (a Pulumi.<stack>.yaml)")
    parser.add_argument(
        "--json", action="store_true", help='print [{"pool", "worstCaseUsdPerHour", "worstCaseNodes", ...}]'
    )
    args = parser.parse_args(argv)
    if args.stack not in stacks():
        parser.error(f"no Pulumi.{args.stack}.yaml; stacks: {', '.join(stacks())}")
    config = _refusable(args.stack, lambda: parse_stack_config(stack_config(args.stack)))
    if config is None:
        return REFUSED
    report = costing.costs(config)
    if args.json:
        sys.stdout.write(costing.render_json(report))
    else:
        sys.stdout.write(costing.render_text(args.stack, config.region, report))
    return 0


COMMANDS = """commands:
  python -m synth [STACK ...] [--check | --out DIR]   write (or check) the snapshots
  python -m synth plan STACK [--from REF]             what `pulumi up` would change (plan --help)
  python -m synth cost STACK [--json]                 what the stack's pools may cost at once (cost --help)"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plan"]:
        return plan_main(argv[1:])
    if argv[:1] == ["cost"]:
        return cost_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m synth",
        description=__doc__.splitlines()[0],
        epilog=COMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    stale, refused = [], []
    for name in names:
        run = _run(name)
        if run is None:
            refused.append(name)
            continue
        files = snapshot.render(run)
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
    # What no single stack shows: stacks that collide with each other. Checked on a run of every stack
    # (`--check` in CI) whose files all loaded.
    collisions = [] if refused or set(names) != set(stacks()) else cross_stack_problems()
    for problem in collisions:
        print(f"error: {problem}", file=sys.stderr)
    if collisions:
        refused.append("the stack files together")
    if refused:
        print(f"configuration refused: {', '.join(refused)}", file=sys.stderr)
        return REFUSED
    return STALE if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
