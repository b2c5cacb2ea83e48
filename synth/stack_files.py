"""The committed stacks (`Pulumi.<stack>.yaml`) and how CI runs them; light enough to run without .venv.

    python -m synth.stack_files >> "$GITHUB_OUTPUT"   # the workflows' stack matrices (needs only PyYAML)
    python -m synth.stack_files region <stack>        # the stack's aws:region

The workflows take their stack lists from here, so a new stack file is previewed and deployed without
editing them: production stacks are those the policy pack treats as production
(`policy/policy-config.json`, `productionStacks`). A production stack, and any stack whose Kubernetes API
not every address may reach (private only, or a public endpoint restricted to allow-listed CIDRs, as prod's
while it bootstraps), runs on the runner named by `vars.PROD_RUNS_ON` (`prodRunner` in the matrices): a
GitHub-hosted runner has no fixed address and no route into the VPC. Without that variable such a job stops
with an error instead of falling back to a runner that cannot reach the API.
"""

import ipaddress
import json
import sys
from pathlib import Path
from typing import Any

from components import yaml_text
from config.production import POLICY_CONFIG, ROOT, production_stacks


def stacks(root: Path = ROOT) -> list[str]:
    """Every committed stack: the `<stack>` of each `Pulumi.<stack>.yaml`."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml"))


DEFAULT_VPC_CIDR = "10.0.0.0/16"
"""`gpu-eks:network.cidr` when a stack does not set it (config/network.py)."""


def _config(stack: str, root: Path) -> dict[str, Any]:
    document = yaml_text.load((root / f"Pulumi.{stack}.yaml").read_text()) or {}
    config = document.get("config") or {}
    return config if isinstance(config, dict) else {}


def _section(stack: str, section: str, root: Path) -> dict[str, Any]:
    value = _config(stack, root).get(f"gpu-eks:{section}") or {}
    return value if isinstance(value, dict) else {}


def region(stack: str, root: Path = ROOT) -> str | None:
    """The stack's `aws:region`, where everything it creates lives (the program requires it)."""
    value = _config(stack, root).get("aws:region")
    return str(value) if value else None


OPEN_TO_ALL = "0.0.0.0/0"
"""`gpu-eks:cluster.endpoint.publicAccessCidrs` when a stack does not set it (config/cluster.py)."""


def api_open_to_all(stack: str, root: Path = ROOT) -> bool:
    """Whether any address may reach the stack's Kubernetes API: a public endpoint open to 0.0.0.0/0."""
    endpoint = _section(stack, "cluster", root).get("endpoint") or {}
    return endpoint.get("publicAccess", True) is not False and OPEN_TO_ALL in endpoint.get(
        "publicAccessCidrs", [OPEN_TO_ALL]
    )


def cluster_name(stack: str, root: Path = ROOT) -> str | None:
    name = _section(stack, "cluster", root).get("name")
    return str(name) if name is not None else None


def vpc_cidr(stack: str, root: Path = ROOT) -> str | None:
    """The CIDR of the VPC the stack creates, or None when it uses an existing VPC."""
    network = _section(stack, "network", root)
    return None if network.get("existing") else str(network.get("cidr", DEFAULT_VPC_CIDR))


AUTOMATION_ROLES = ("previewRoleArn", "deployRoleArn")
"""The CI roles a stack gives an access entry (`gpu-eks:cluster.automation`, config/cluster.py)."""


def automation_roles(stack: str, root: Path = ROOT) -> dict[str, str]:
    """`{key: ARN}` of the CI roles the stack file sets, keyed `gpu-eks:cluster.automation.<name>`."""
    automation = _section(stack, "cluster", root).get("automation") or {}
    return {
        f"gpu-eks:cluster.automation.{name}": str(automation[name])
        for name in AUTOMATION_ROLES
        if isinstance(automation, dict) and automation.get(name)
    }


def _shared_ci_roles(root: Path) -> list[str]:
    """A production stack must not give its cluster to a role a non-production stack's CI assumes: the
    non-production preview role is trusted for every same-repository branch's pull request (and the
    non-production deploy role for anything on main), so sharing one makes each such run cluster admin in
    production, without the approvals the production roles sit behind (docs/ci-and-trust.md)."""
    production = set(production_stacks(root))
    roles = {stack: automation_roles(stack, root) for stack in stacks(root)}  # each file read once
    elsewhere: dict[str, list[tuple[str, str]]] = {}  # ARN -> (non-production stack, key) that set it
    for other in (s for s in roles if s not in production):
        for key, arn in roles[other].items():
            elsewhere.setdefault(arn, []).append((other, key))
    problems = []
    for stack in (s for s in roles if s in production):
        for key, arn in roles[stack].items():
            for other, other_key in elsewhere.get(arn, []):
                problems.append(
                    f"Pulumi.{stack}.yaml: {key} {arn} is also Pulumi.{other}.yaml's {other_key} {arn}; a "
                    f"production stack (productionStacks of {POLICY_CONFIG}) needs its own CI roles, trusted "
                    "only for its GitHub environments (prod-preview, production)"
                )
    return problems


def cross_stack_problems(root: Path = ROOT) -> list[str]:
    """What makes stacks collide: one cluster name twice (the IAM roles, queue and EKS cluster are named
    after it, per account and region), VPC CIDRs that overlap (no peering or transit routing between
    them ever works), or a production stack whose CI role is a non-production stack's."""
    problems = []
    names: dict[str, str] = {}
    networks: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network] = {}
    for stack in stacks(root):
        name = cluster_name(stack, root)
        if name is not None and name in names:
            problems.append(f"Pulumi.{stack}.yaml: cluster name {name} is also Pulumi.{names[name]}.yaml's")
        names.setdefault(name or "", stack)
        cidr = vpc_cidr(stack, root)
        if cidr is None:
            continue
        network = ipaddress.ip_network(cidr, strict=False)
        for other, other_network in networks.items():
            if network.overlaps(other_network):
                problems.append(
                    f"Pulumi.{stack}.yaml: VPC CIDR {cidr} overlaps Pulumi.{other}.yaml's {other_network}"
                )
        networks[stack] = network
    return problems + _shared_ci_roles(root)


def matrices(root: Path = ROOT) -> dict[str, list[dict[str, Any]]]:
    """Stack matrices, `{stack, prodRunner}` per stack, where `prodRunner` says it runs on
    `vars.PROD_RUNS_ON` (a production stack, or an API not open to all): `all`; `preProduction` and
    `production` (the deploy stages); `automaticPreview` (previewed on every push of a pull request with the
    repository's non-production role and token: the non-production stacks, each on its deploy's runner) and
    `approvedPreview` (the production stacks: previewed only once someone approves the `prod-preview`
    environment, whose production role and token the run gets)."""
    production = set(production_stacks(root))
    rows = [{"stack": s, "prodRunner": s in production or not api_open_to_all(s, root)} for s in stacks(root)]
    pre_production = [r for r in rows if r["stack"] not in production]
    in_production = [r for r in rows if r["stack"] in production]
    return {
        "all": rows,
        "preProduction": pre_production,
        "production": in_production,
        "automaticPreview": pre_production,
        "approvedPreview": in_production,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["region"] and len(args) == 2:
        stack = args[1]
        if stack not in stacks():
            print(f"there is no Pulumi.{stack}.yaml; stacks: {', '.join(stacks())}")
            return 2
        found = region(stack)
        if found is None:
            print(f"Pulumi.{stack}.yaml sets no aws:region (every stack needs one: docs/configuration.md)")
            return 2
        print(found)
        return 0
    if args:
        print("usage: python -m synth.stack_files [region <stack>]")
        return 2
    for name, rows in matrices().items():
        print(f"{name}={json.dumps(rows, separators=(',', ':'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
