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
if { ! command -v bwrap >/dev/null || ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; } \
   && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -q bubblewrap libseccomp2 >/dev/null 2>&1 || true  # the learner sandbox and its seccomp filter
fi
if ! command -v chromedriver >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  # The dashboard's browser tests: Debian's headless Chromium and its driver.
  apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; } || true
fi
# One line per system piece still missing, with the command that installs it.
bash scripts/missing_pieces.sh
echo "Installed. Activate with: source .venv/bin/activate"
