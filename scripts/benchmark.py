"""Benchmark the offline synth against an anchor and its import floor; time the suite and CI; print targets.

Usage: .venv/bin/python -m scripts.benchmark [--repeat N] [--anchor [--anchor-dir DIR]] [--suite] [--ci]
                                            [--imports] [--instructions]

- `synth <stack>`, `synth --check`: a fresh `python -m synth` process, as a developer runs it (the offline
  fast path on: synth/fast_imports.py, mock calls inline);
- `... fast path off`: the same with GPU_EKS_FAST_PATH=0 (Python's own imports, the SDK's thread pool);
- `floor <stack>`: a fresh process that only imports what that synth imports from outside this repository
  (Python's standard library, pulumi, the provider SDKs, pydantic, PyYAML) through the same finder, with the
  synth's garbage-collector setting: no synth of the stack can be faster without changing those packages;
- `warm <stack>`: run + render alone in this already-imported process (best of N, peak traced memory);
- `--anchor`: `cdk synth` of a small cdk-eks-blueprints 1.19.0 app (VPC, EKS, Karpenter and GPU Operator
  add-ons), built with npm in a temporary directory (or `--anchor-dir`, kept for the next run). Each process
  above runs N times right next to an anchor run (anchor first in every other pair); `/anchor` is the median
  of the N per-pair ratios, with their range: load that changes over seconds cancels out of a ratio;
- `--suite`: the test suite (`python -m pytest`: a worker per core), N times;
- `--ci`: `CI=true .ci/run` on a clean clone (`git clone` of the committed HEAD into a temporary directory),
  with its per-step times, twice: first with an empty mypy cache (a machine's first run), then on another
  clean clone with the cache the first left (any later run: .ci/run keeps it outside the clone, as uv's
  and npm's downloads, which both runs find);
- `--imports`: what each SDK area the program uses costs to import (after `pulumi`, through the finder);
- `--instructions`: user-space instructions under valgrind, which a loaded machine does not change (slow).

Every process runs once untimed first (disk caches); wall and CPU figures are medians (memory: the largest).
The machine is shared: compare figures of one run, not across runs. The last table holds issue 26's targets.
"""

import argparse
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

from synth import fast_imports

fast_imports.install()  # before anything imports a provider SDK: the warm runs below use it as synth does

from synth import snapshot  # noqa: E402
from synth.fast_path import SWITCH  # noqa: E402
from synth.runner import ROOT, run_stack, stacks  # noqa: E402

PYTHON = sys.executable
OWN_PACKAGES = frozenset(
    {"__main__", "components", "config", "contract", "facts", "pools", "scripts", "synth", "tests"}
)
# Issue 26's targets: (what, limit, unit).
TARGETS = {
    "synth dev": ("fresh `synth dev`", 0.6, "x the anchor"),
    "synth --check": ("`synth --check`", 0.8, "x the anchor"),
    "suite": ("the suite on 2 cores", 30.0, " s"),
    "ci": ("`.ci/run` on a clean clone", 60.0, " s"),
    "ci again": ("`.ci/run` on a clean clone, again", 60.0, " s"),
}

# The anchor: what this program declares, as a cdk-eks-blueprints user would write it. Generated into a
# temporary directory; nothing of it is committed.
ANCHOR_FILES = {
    "package.json": """{
  "name": "gpu-eks-anchor",
  "private": true,
  "dependencies": {
    "@aws-quickstart/eks-blueprints": "1.19.0",
    "aws-cdk": "2.1129.0",
    "aws-cdk-lib": "2.261.0",
    "constructs": "10.6.0"
  }
}
""",
    # The availability zones a committed context file would hold, so that synth makes no AWS call.
    "cdk.json": """{
  "app": "node app.js",
  "context": {
    "availability-zones:account=111122223333:region=us-west-2": ["us-west-2a", "us-west-2b", "us-west-2c"]
  }
}
""",
    "app.js": """const cdk = require("aws-cdk-lib");
const eks = require("aws-cdk-lib/aws-eks");
const blueprints = require("@aws-quickstart/eks-blueprints");

const app = new cdk.App();
blueprints.EksBlueprint.builder()
  .account("111122223333")
  .region("us-west-2")
  .version(eks.KubernetesVersion.V1_33)
  .addOns(
    new blueprints.addons.KarpenterV1AddOn({
      interruptionHandling: true,
      nodePoolSpec: {
        requirements: [
          { key: "karpenter.k8s.aws/instance-family", operator: "In", values: ["g5", "g6"] },
          { key: "karpenter.sh/capacity-type", operator: "In", values: ["spot", "on-demand"] },
        ],
        taints: [{ key: "nvidia.com/gpu", value: "true", effect: "NoSchedule" }],
        disruption: { consolidationPolicy: "WhenEmptyOrUnderutilized", consolidateAfter: "5m" },
        limits: { "nvidia.com/gpu": 16 },
      },
      ec2NodeClassSpec: {
        amiSelectorTerms: [{ alias: "al2023@latest" }],
        subnetSelectorTerms: [{ tags: { "karpenter.sh/discovery": "gpu-anchor" } }],
        securityGroupSelectorTerms: [{ tags: { "karpenter.sh/discovery": "gpu-anchor" } }],
      },
    }),
    new blueprints.addons.GpuOperatorAddon({
      values: { driver: { enabled: false }, toolkit: { enabled: false } },
    }),
  )
  .build(app, "gpu-anchor");
""",
}
# No version check, telemetry or notices: those reach the network, and the synth being compared does not.
ANCHOR_ENV = {"CDK_DISABLE_VERSION_CHECK": "1", "CDK_DISABLE_CLI_TELEMETRY": "true"}
ANCHOR_SYNTH = ["node_modules/.bin/cdk", "synth", "--quiet", "--no-notices"]

# Imports the named modules as the program does (through the finder, unless the fast path is off); an
# attribute access runs the packages pulumi imports lazily.
_IMPORT_ONLY = """
import gc, importlib, sys
gc.disable()  # as `python -m synth` runs
from synth import fast_imports
fast_imports.install()
for name in sys.argv[1:]:
    getattr(importlib.import_module(name), "__name__", None)
    getattr(sys.modules[name], "_loaded_", None)
"""
# Prints the modules a synth of the stack imports from outside this repository, in import order: not the
# packages pulumi created lazily but the synth never used (their code never ran).
_MODULES_OF_SYNTH = """
import contextlib, io, sys, tempfile, types
from synth import fast_imports
fast_imports.install()
from synth.__main__ import main
with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
    main([sys.argv[1], "--out", out])
own = set(sys.argv[2:])
for name, module in list(sys.modules.items()):
    if (
        isinstance(module, types.ModuleType)
        and type(module).__name__ != "_LazyModule"
        and name.split(".")[0] not in own
        and name != "__mp_main__"
    ):
        print(name)
"""

# What each SDK area the program uses costs on top of `pulumi`, in a fresh process.
IMPORT_AREAS = {
    "pulumi (from nothing)": "",
    "pydantic": "import pydantic",
    "PyYAML": "import yaml",
    "pulumi_aws (top level)": "import pulumi_aws; pulumi_aws.get_partition",
    "pulumi_aws.ec2": "import pulumi_aws; pulumi_aws.ec2.Vpc",
    "pulumi_aws.cloudwatch": "import pulumi_aws; pulumi_aws.cloudwatch.EventRule",
    "pulumi_aws.iam": "import pulumi_aws; pulumi_aws.iam.Role",
    "pulumi_aws.eks": "import pulumi_aws; pulumi_aws.eks.Addon",
    "pulumi_aws.sqs": "import pulumi_aws; pulumi_aws.sqs.Queue",
    "pulumi_eks": "import pulumi_eks; pulumi_eks.Cluster",
    "pulumi_kubernetes (provider)": "import pulumi_kubernetes; pulumi_kubernetes.Provider",
    "pulumi_kubernetes.core.v1": "import pulumi_kubernetes; pulumi_kubernetes.core.v1.Namespace",
    "pulumi_kubernetes.helm.v3": "import pulumi_kubernetes; pulumi_kubernetes.helm.v3.Release",
    "pulumi_kubernetes.apps.v1": "import pulumi_kubernetes; pulumi_kubernetes.apps.v1.Deployment",
    "pulumi_kubernetes.batch.v1": "import pulumi_kubernetes; pulumi_kubernetes.batch.v1.Job",
    "pulumi_kubernetes.rbac.v1": "import pulumi_kubernetes; pulumi_kubernetes.rbac.v1.ClusterRole",
    "pulumi_kubernetes.meta.v1": "import pulumi_kubernetes; pulumi_kubernetes.meta.v1.ObjectMetaArgs",
    "pulumi_kubernetes.apiextensions": "import pulumi_kubernetes as k; k.apiextensions.CustomResource",
}
_TIME_AREA = """
import gc, time
gc.disable()
start = time.process_time()
from synth import fast_imports
fast_imports.install()
import pulumi, pulumi.runtime.mocks
if {area!r}:
    start = time.process_time()
    {area}
print(time.process_time() - start)
"""


@dataclass
class Sample:
    wall: float
    cpu: float
    rss_mib: float


@dataclass
class Figures:
    label: str
    samples: list[Sample]
    ratios: list[float] = field(default_factory=list)
    """Each sample's wall time over that of the anchor run right next to it."""

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    def row(self) -> str:
        walls = [s.wall for s in self.samples]
        cpu = statistics.median(s.cpu for s in self.samples)
        rss = max(s.rss_mib for s in self.samples)
        spread = f"{min(walls):.2f}-{max(walls):.2f}"
        ratio = ""
        if self.ratios:
            ratio = f"{self.ratio:>8.2f}x {min(self.ratios):.2f}-{max(self.ratios):.2f}"
        return f"{self.label:<30} {self.wall:>7.2f} {spread:>11} {cpu:>7.2f} {rss:>8.0f} {ratio}"


HEADER = f"{'':<30} {'wall s':>7} {'range':>11} {'CPU s':>7} {'RSS MiB':>8} {'/anchor':>9} range"


@dataclass
class Command:
    argv: list[str]
    cwd: Path = ROOT
    env: dict[str, str] | None = None


def measure(command: Command) -> Sample:
    """Wall seconds, CPU seconds (user + system, of waited-for children too) and peak RSS of one process."""
    with tempfile.TemporaryFile("w+") as errors:
        start = time.perf_counter()
        process = subprocess.Popen(
            command.argv, cwd=command.cwd, env=command.env, stdout=subprocess.DEVNULL, stderr=errors
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command.argv[:4])} ... failed:\n{errors.read()}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def paired(commands: dict[str, Command], anchor: Command | None, repeat: int) -> list[Figures]:
    """Each command (and the anchor) once untimed, then `repeat` rounds: each command right next to a run of
    the anchor, the anchor first in every other pair; without an anchor, the commands in turn."""
    for command in [*commands.values(), *([anchor] if anchor else [])]:
        measure(command)
    figures = {label: Figures(label, []) for label in commands}
    anchor_figures = Figures("anchor: cdk synth", [])
    for round_ in range(repeat):
        for index, (label, command) in enumerate(commands.items()):
            if anchor is None:
                figures[label].samples.append(measure(command))
                continue
            if (round_ + index) % 2:
                ours, theirs = measure(command), measure(anchor)
            else:
                theirs, ours = measure(anchor), measure(command)
            figures[label].samples.append(ours)
            figures[label].ratios.append(ours.wall / theirs.wall)
            anchor_figures.samples.append(theirs)
    return [*figures.values(), *([anchor_figures] if anchor else [])]


def modules_of_synth(stack: str) -> list[str]:
    """The modules a synth of `stack` imports from outside this repository, in import order."""
    result = subprocess.run(
        [PYTHON, "-c", _MODULES_OF_SYNTH, stack, *OWN_PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split()


def build_anchor(directory: Path) -> None:
    """Write the anchor app into `directory` and install it with npm (skipped when already installed)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in ANCHOR_FILES.items():
        (directory / name).write_text(content)
    if not (directory / ANCHOR_SYNTH[0]).exists():
        print(f"building the anchor in {directory} (npm install, about 500 MiB)...", file=sys.stderr)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=directory, check=True)


def warm(stack: str, repeat: int) -> tuple[float, float]:
    """Best wall seconds of run + render in this process, and the peak allocation (MiB) of one more."""
    run_stack(stack)  # the first run loads the provider modules the program touches
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        snapshot.render(run_stack(stack))
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()  # timed apart: tracing slows every allocation down
    snapshot.render(run_stack(stack))
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return best, peak


def import_costs(repeat: int) -> list[tuple[str, float]]:
    """Median CPU seconds of importing each SDK area in a fresh process (after pulumi)."""
    costs = []
    for label, area in IMPORT_AREAS.items():
        runs = [
            float(
                subprocess.run(
                    [PYTHON, "-c", _TIME_AREA.format(area=area)],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            for _ in range(repeat)
        ]
        costs.append((label, statistics.median(runs)))
    return costs


def instructions(command: Command) -> int:
    """User-space instructions of one process, counted by valgrind (hash seed fixed: the same every run)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**(command.env or os.environ), "PYTHONHASHSEED": "0"}
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out", *command.argv],
            cwd=command.cwd,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    match = re.search(r"Collected : (\d+)", result.stderr)
    if match is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{result.stderr}")
    return int(match[1])


def suite(repeat: int) -> Figures:
    """The test suite as the README runs it, `repeat` times."""
    command = Command([PYTHON, "-m", "pytest", "-q"])
    return Figures("suite (python -m pytest)", [measure(command) for _ in range(repeat)])


_STEP = re.compile(r"^\+ (.*?)  \((\d+\.\d) s\)$", re.MULTILINE)


def clean_clone_ci(scratch: Path, mypy_cache: Path) -> list[tuple[str, float]]:
    """`CI=true .ci/run` on a fresh clone of the committed HEAD, with mypy's cache in `mypy_cache`: (step,
    wall seconds) as it prints them, then the whole run as this process timed it."""
    clone = Path(tempfile.mkdtemp(dir=scratch, prefix="clone-"))
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    start = time.perf_counter()
    result = subprocess.run(
        ["bash", ".ci/run"],
        cwd=clone,
        env={**os.environ, "CI": "true", "MYPY_CACHE_DIR": str(mypy_cache)},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(
            f".ci/run failed on the clean clone:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return [(step, float(seconds)) for step, seconds in _STEP.findall(result.stdout)] + [(".ci/run", wall)]


def targets(achieved: dict[str, float | None]) -> list[str]:
    lines = [f"{'target (issue 26)':<40} {'achieved':>10}"]
    for key, (what, limit, unit) in TARGETS.items():
        value = achieved.get(key)
        goal = f"{what} <= {limit:g}{unit}"
        if value is None:
            lines.append(f"{goal:<40} {'(not measured: see --help)':>10}")
        else:
            shown = f"{value:.2f}x" if unit.startswith("x") else f"{value:.1f} s"
            lines.append(f"{goal:<40} {shown:>10}  {'met' if value <= limit else 'NOT MET'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed runs (pairs) of each process (default 5)"
    )
    parser.add_argument("--anchor", action="store_true", help="also time cdk synth of the blueprints app")
    parser.add_argument(
        "--anchor-dir", type=Path, help="build the anchor here and keep it (default: a temp dir)"
    )
    parser.add_argument("--suite", action="store_true", help="also time the test suite (--repeat times)")
    parser.add_argument("--ci", action="store_true", help="also time CI=true .ci/run on a clean clone (once)")
    parser.add_argument("--imports", action="store_true", help="also time importing each SDK area")
    parser.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    args = parser.parse_args()
    gc.disable()  # the warm runs below run as `python -m synth` does
    achieved: dict[str, float | None] = {}

    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out"
        off = {**os.environ, SWITCH: "0"}
        commands = {
            f"synth {stack}": Command([PYTHON, "-m", "synth", stack, "--out", str(out / stack)])
            for stack in stacks()
        }
        commands["synth --check"] = Command([PYTHON, "-m", "synth", "--check"])
        commands |= {
            f"floor {stack}": Command([PYTHON, "-c", _IMPORT_ONLY, *modules_of_synth(stack)])
            for stack in stacks()
        }
        commands["synth dev, fast path off"] = Command(commands["synth dev"].argv, env=off)
        commands["synth --check, fast path off"] = Command(commands["synth --check"].argv, env=off)
        anchor = None
        if args.anchor:
            anchor_dir = args.anchor_dir or Path(scratch) / "anchor"
            build_anchor(anchor_dir)
            anchor = Command(ANCHOR_SYNTH, anchor_dir, {**os.environ, **ANCHOR_ENV})
        figures = paired(commands, anchor, args.repeat)
        print(
            f"fresh processes, {args.repeat} runs each"
            + (
                ", each next to an anchor run; /anchor: median and range of the per-pair ratios"
                if anchor
                else ""
            )
        )
        print(HEADER)
        for found in figures:
            print(found.row())
        by_label = {found.label: found for found in figures}
        achieved["synth dev"] = by_label["synth dev"].ratio
        achieved["synth --check"] = by_label["synth --check"].ratio

        print(
            f"\n{'in-process (best of ' + str(args.repeat) + ')':<30} {'wall s':>7} {'peak MiB':>9} resources"
        )
        for stack in stacks():
            seconds, peak = warm(stack, args.repeat)
            print(f"{'warm ' + stack:<30} {seconds:>7.2f} {peak:>9.1f} {len(run_stack(stack).resources):>9}")

        if args.suite:
            found = suite(args.repeat)
            print(f"\n{'':<30} {'wall s':>7} {'range':>11} {'CPU s':>7} {'RSS MiB':>8}")
            print(found.row())
            achieved["suite"] = found.wall

        if args.ci:
            cache = Path(scratch) / "mypy-cache"
            first, again = clean_clone_ci(Path(scratch), cache), clean_clone_ci(Path(scratch), cache)
            print(f"\n{'CI=true .ci/run, clean clone':<48} {'first':>7} {'again':>7}")
            for (step, seconds), (_, later) in zip(first, again, strict=True):
                print(f"{step[:48]:<48} {seconds:>7.1f} {later:>7.1f}")
            achieved["ci"], achieved["ci again"] = first[-1][1], again[-1][1]

        if args.imports:
            print(f"\n{'import, fresh process':<34} {'CPU s':>7}")
            for label, cpu in import_costs(args.repeat):
                print(f"{label:<34} {cpu:>7.3f}")

        if args.instructions:
            if shutil.which("valgrind") is None:
                raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
            print(f"\n{'instructions (valgrind)':<30} {'G':>7} {'/ fast path off':>16}")
            counted = {label: instructions(commands[label]) for label in commands}
            for label, count in counted.items():
                baseline = counted.get(f"{label}, fast path off")
                ratio = f"{count / baseline:>15.2f}x" if baseline else ""
                print(f"{label:<30} {count / 1e9:>7.2f} {ratio}")

    print()
    print("\n".join(targets(achieved)))


if __name__ == "__main__":
    main()
