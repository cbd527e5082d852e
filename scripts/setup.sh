#!/usr/bin/env bash
# One-command set-up: a virtual environment in .venv with the package and its test tools.
# CPU build of PyTorch (pinned in pyproject.toml). For a GPU machine see the README.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -d .venv ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"
.venv/bin/nevis --help >/dev/null
echo "Installed. Activate with: source .venv/bin/activate"
