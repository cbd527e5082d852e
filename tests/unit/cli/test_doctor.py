"""``nevis doctor``: the table on this machine, and what it says when pieces are missing.

Everything is probed for real: PATH without bubblewrap is a folder with nothing in it, the
unreachable database is a loopback port where nothing listens.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from tests.support.private_postgres import free_port
from workers.sandbox.metering.calibration import cached_flop_rate, machine_flop_rate

REPO = Path(__file__).resolve().parents[3]

runner = CliRunner()


@pytest.fixture
def doctor_env(settings_env, monkeypatch):
    """Development settings in a temporary data folder."""
    monkeypatch.delenv("NEVIS_ENVIRONMENT", raising=False)
    monkeypatch.delenv("NEVIS_SANDBOX", raising=False)
    return settings_env


def _doctor():
    get_settings.cache_clear()
    return runner.invoke(app, ["doctor"])


def test_doctor_prints_the_table_and_exits_0_here(doctor_env) -> None:
    result = _doctor()
    assert result.exit_code == 0, result.output
    assert "nevis doctor (NEVIS_ENVIRONMENT=development)" in result.output
    for piece in (
        "python",
        "torch",
        "bubblewrap",
        "cgroups",
        "seccomp",
        "podman",
        "ray",
        "database",
        "object store",
        "GPUs",
        "disk",
        "FLOP rate",
    ):
        assert f"│ {piece} " in result.output, piece
    assert "user namespaces work" in result.output  # this machine has a working bubblewrap
    assert "SQLite" in result.output and "development only" in result.output


def test_without_bubblewrap_on_path_it_names_it_and_the_apt_command(doctor_env, tmp_path, monkeypatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = _doctor()
    assert result.exit_code == 0, result.output  # development: reported, not refused
    assert "  bubblewrap: sudo apt-get install bubblewrap" in result.output
    assert "learner code runs in a plain subprocess, not a sandbox" in result.output


def test_an_unreachable_database_is_named_with_its_setting(doctor_env, monkeypatch) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nevis"
    monkeypatch.setenv("NEVIS_DATABASE_URL", url)
    result = _doctor()
    assert result.exit_code == 0, result.output
    assert "  database: start it, or set NEVIS_DATABASE_URL to a reachable server" in result.output
    assert "unreachable" in result.output and "Connection refused" in result.output.replace("\n", " ")


@pytest.mark.postgres
def test_a_reachable_database_answers(doctor_env, monkeypatch, postgres_admin_url) -> None:
    monkeypatch.setenv("NEVIS_DATABASE_URL", postgres_admin_url)
    result = _doctor()
    assert result.exit_code == 0, result.output
    assert "answers" in result.output
    assert "  database:" not in result.output


def test_production_with_a_missing_requirement_exits_1_and_names_it(doctor_env, tmp_path, monkeypatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("NEVIS_ENVIRONMENT", "production")
    monkeypatch.setenv("NEVIS_SANDBOX", "bwrap")
    result = _doctor()
    assert result.exit_code == 1, result.output
    assert "MISSING (required)" in result.output
    assert "NEVIS_ENVIRONMENT=production needs what is missing here: settings, bubblewrap, database" in result.output
    assert "production refuses SQLite" in result.output


def test_the_flop_rate_is_read_from_this_boots_record_never_measured(tmp_path) -> None:
    assert cached_flop_rate(cache_dir=tmp_path) is None
    measured = machine_flop_rate(cache_dir=tmp_path)
    assert cached_flop_rate(cache_dir=tmp_path) == measured > 0


def test_nevis_serve_prints_the_machine_in_one_line_as_it_starts(doctor_env) -> None:
    env = {**os.environ, "NEVIS_DATA_DIR": str(doctor_env)}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.cli",
            "serve",
            "--no-scheduler",
            "--port",
            str(free_port()),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    lines: list[str] = []
    try:
        for line in server.stderr:
            lines.append(line)
            if line.startswith("nevis coordinator on"):
                break
    finally:
        server.send_signal(signal.SIGINT)
        try:  # reading on: a shutdown that writes to a full stderr pipe would otherwise never end
            server.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # what is tested is the start-up line, not the shutdown
            server.kill()
            server.communicate()
    assert lines and lines[-1].startswith("nevis coordinator on"), "".join(lines)[-3000:]
    summary = lines[-2]
    assert summary.startswith("this machine: python ok, torch ok, bubblewrap ok, cgroups "), summary
    assert "database ok" in summary and "(`nevis doctor` says what each missing piece costs)" in summary
