"""A new environment in one step: a stack file copied from another, made its own, with its snapshot.

    .venv/bin/python -m scripts.new_stack staging --from prod [--cluster-name ml-staging] [--production]

Writes `Pulumi.<name>.yaml` from `Pulumi.<from>.yaml` (comments kept) with its own cluster name and a VPC
CIDR of the same size that overlaps no other stack's, lists the stack in `policy/policy-config.json` as a
production stack when it is one (by default: when the source is), and writes `snapshots/<name>/`. The
workflows derive their stacks from the files (`python -m synth.stack_files`), so they need no edit.
Review `adminRoleArns`, the region and the pools before the first `pulumi up`.
"""

import argparse
import ipaddress
import json
import re
import sys
from pathlib import Path

from components import yaml_text
from config.production import POLICY_CONFIG, PRODUCTION_RULE, ROOT, production_stacks
from synth import snapshot
from synth.runner import run_stack
from synth.stack_files import (
    api_open_to_all,
    cluster_name,
    cross_stack_problems,
    stacks,
    vpc_cidr,
)

_STACK_NAME = re.compile(r"[a-z][a-z0-9-]{0,30}")
_CLUSTER_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9-]{0,37}")


class NewStackError(Exception):
    """The new stack cannot be made as asked; the message says why."""


def free_cidr(prefix_length: int, taken: list[str]) -> str:
    """The first network of `prefix_length` in 10.0.0.0/8 that overlaps none of `taken`."""
    used = [ipaddress.ip_network(c) for c in taken]
    for candidate in ipaddress.ip_network("10.0.0.0/8").subnets(new_prefix=prefix_length):
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    raise NewStackError(f"no free /{prefix_length} left in 10.0.0.0/8 for the VPC")


def derived_cluster_name(source_cluster: str, source: str, name: str) -> str:
    """`ml-prod` copied from prod as staging -> `ml-staging`; otherwise `<source cluster>-<name>`."""
    if source_cluster.endswith(f"-{source}"):
        return source_cluster.removesuffix(source) + name
    return f"{source_cluster}-{name}"


def _replace_in_section(text: str, section: str, key: str, value: str) -> str:
    """Set `key:` of the block-style mapping `gpu-eks:<section>` in the stack file's text, keeping comments.

    Adds the key (and the section) when missing. Flow-style sections (`{...}`) are refused rather than
    rewritten, since a comment-keeping edit of them is not reliable."""
    lines = text.splitlines(keepends=True)
    header = re.compile(rf"^(?P<indent>\s*)gpu-eks:{section}:\s*(#.*)?$")
    start = next((i for i, line in enumerate(lines) if header.match(line.rstrip("\n"))), None)
    if start is None:
        if not text.endswith("\n"):
            text += "\n"
        return text + f"  gpu-eks:{section}:\n    {key}: {value}\n"
    indent = len(header.match(lines[start].rstrip("\n"))["indent"])  # type: ignore[index]
    child = None
    for i in range(start + 1, len(lines)):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            continue
        current = len(lines[i]) - len(lines[i].lstrip())
        if current <= indent:
            break
        child = child if child is not None else current
        match = re.match(rf"^(\s*){re.escape(key)}:\s*(?P<value>[^#\s][^#]*?)?(?P<rest>\s*#.*)?$", lines[i])
        if current == child and match:
            rest = match["rest"] or ""
            lines[i] = f"{match[1]}{key}: {value}{rest}\n"
            return "".join(lines)
    if re.search(rf"gpu-eks:{section}:\s*\{{", text):
        raise NewStackError(
            f"gpu-eks:{section} is written in flow style ({{...}}); write it as a block first"
        )
    lines.insert(start + 1, " " * (child or indent + 2) + f"{key}: {value}\n")
    return "".join(lines)


def new_stack(
    name: str, source: str, *, cluster: str | None, production: bool | None, root: Path
) -> list[tuple[Path, str]]:
    """Write the stack file and, for a production stack, the policy configuration; returns each file touched
    with what was done to it (the stack file first)."""
    if not _STACK_NAME.fullmatch(name):
        raise NewStackError(
            f"stack name {name!r}: lower-case letters, digits and '-', starting with a letter"
        )
    existing = stacks(root)
    if name in existing:
        raise NewStackError(f"Pulumi.{name}.yaml exists already")
    if source not in existing:
        raise NewStackError(f"no Pulumi.{source}.yaml to copy; stacks: {', '.join(existing)}")
    source_cluster = cluster_name(source, root)
    if source_cluster is None:
        raise NewStackError(f"Pulumi.{source}.yaml sets no gpu-eks:cluster name to derive one from")
    cluster = cluster or derived_cluster_name(source_cluster, source, name)
    if not _CLUSTER_NAME.fullmatch(cluster):
        raise NewStackError(
            f"cluster name {cluster!r}: at most 38 letters, digits and '-', starting with a letter "
            "(pass --cluster-name)"
        )
    if cluster in {cluster_name(s, root) for s in existing}:
        raise NewStackError(f"cluster name {cluster} is used by another stack (pass --cluster-name)")

    text = (root / f"Pulumi.{source}.yaml").read_text()
    text = _replace_in_section(text, "cluster", "name", cluster)
    source_cidr = vpc_cidr(source, root)
    if source_cidr is not None:
        taken = [c for s in existing if (c := vpc_cidr(s, root)) is not None]
        cidr = free_cidr(ipaddress.ip_network(source_cidr).prefixlen, taken)
        text = _replace_in_section(text, "network", "cidr", cidr)
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith(f"# {source}:"):
        # The source's header comment (every line up to the first that is not a comment) is about it.
        header = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
        text = "".join(lines[header:])
    production = source in production_stacks(root) if production is None else production
    gate = " and the `production` environment's approval" if production else ""
    runner = (
        ", on the runner named by vars.PROD_RUNS_ON"
        if production or not api_open_to_all(source, root)
        else ""
    )
    own_header = [
        f"# {name}: copied from Pulumi.{source}.yaml by `python -m scripts.new_stack` (own cluster name and "
        "VPC CIDR).",
        f"# Who runs the first `pulumi up`: the deploy workflow, after the merge that adds this file{gate}"
        f"{runner},",
        "# as the CI deploy role (it creates the stack if missing). EKS makes the cluster's creator its "
        "admin,",
        "# and every later `up` runs as that role: run from a laptop, it would leave the deploy role locked "
        "out.",
    ]
    text = "\n".join(own_header) + "\n" + text
    document = yaml_text.load(text)
    if document["config"]["gpu-eks:cluster"]["name"] != cluster:
        raise NewStackError("could not set gpu-eks:cluster.name in the copy; edit the file by hand")
    path = root / f"Pulumi.{name}.yaml"
    path.write_text(text)
    touched = [(path, "written")]

    if production:
        config_path = root / POLICY_CONFIG
        listed = json.loads(config_path.read_text())[PRODUCTION_RULE]["productionStacks"]
        if name not in listed:
            # Only the list changes, so the file keeps its layout.
            old = re.compile(r'"productionStacks":\s*\[[^\]]*\]')
            new = f'"productionStacks": {json.dumps([*listed, name])}'
            config_path.write_text(old.sub(lambda _: new, config_path.read_text(), count=1))
            touched.append((config_path, f"edited: {name} added to productionStacks"))
    problems = cross_stack_problems(root)
    if problems:
        path.unlink()
        raise NewStackError("; ".join(problems))
    return touched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.new_stack", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the new stack's name, e.g. staging")
    parser.add_argument("--from", dest="source", required=True, help="the stack to copy, e.g. prod")
    parser.add_argument("--cluster-name", help="EKS cluster name (default: derived from the source's)")
    parser.add_argument(
        "--production",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="treat as production (approval gate, policy rules); default: as the source stack",
    )
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        touched = new_stack(
            args.name, args.source, cluster=args.cluster_name, production=args.production, root=args.root
        )
    except NewStackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = snapshot.render(run_stack(args.name, args.root))
    snapshot.write(files, args.root / "snapshots" / args.name)
    for path, what in touched:
        print(f"{path.relative_to(args.root)}: {what}")
    for file in sorted(files):
        print(f"snapshots/{args.name}/{file}: written")
    print(
        "Review adminRoleArns, aws:region and the pools, then open a pull request: after the merge, the "
        f"deploy workflow creates the stack {args.name} and runs its first pulumi up"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
