"""``nevis db`` on the embedded SQLite default: create, inspect, roll back, write migrations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, Table, inspect
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.core.errors import DatabaseError
from services.store.db import migrate
from services.store.db.engine import make_engine
from services.store.db.models import Base
from services.store.db.types import JSONDoc, UTCDateTime

HEAD = migrate.head_revision()

runner = CliRunner()


@pytest.fixture
def db_path(settings_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite URL whose folder does not exist yet."""
    path = settings_env / "nested" / "deeper" / "nevis.sqlite"
    monkeypatch.setenv("NEVIS_DATABASE_URL", f"sqlite:///{path}")
    get_settings.cache_clear()
    return path


def _nevis(*args: str) -> str:
    result = runner.invoke(app, ["db", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["upgrade", "current", "downgrade", "revision"])
def test_every_db_command_has_help(command: str) -> None:
    result = runner.invoke(app, ["db", command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output and command in result.output


def test_upgrade_creates_the_folder_and_a_second_run_does_nothing(db_path: Path) -> None:
    assert f"upgraded from none (no schema) to {HEAD}" in _nevis("upgrade")
    assert db_path.is_file()
    assert f"already at revision {HEAD}; nothing to do" in _nevis("upgrade")


def test_current_reports_the_revision_and_check_refuses_an_old_schema(db_path: Path) -> None:
    assert f"revision none (no schema); code expects {HEAD}" in _nevis("current")
    assert not db_path.exists()
    with pytest.raises(DatabaseError, match="nevis db upgrade"):
        _nevis("current", "--check")
    _nevis("upgrade")
    assert f"revision {HEAD}; code expects {HEAD} (up to date)" in _nevis("current", "--check")


def test_downgrade_to_base_leaves_no_schema(db_path: Path) -> None:
    _nevis("upgrade")
    assert f"downgraded from {HEAD} to none" in _nevis("downgrade", "base")
    engine = make_engine(f"sqlite:///{db_path}")
    try:
        assert inspect(engine).get_table_names() == ["alembic_version"]
    finally:
        engine.dispose()


def test_downgrade_without_a_schema_does_nothing(db_path: Path) -> None:
    assert "no schema; nothing to downgrade" in _nevis("downgrade", "base")
    assert not db_path.exists()


def test_an_unknown_revision_is_one_line_and_exit_code_2(db_path: Path) -> None:
    _nevis("upgrade")
    env = {**os.environ, "NEVIS_DATABASE_URL": f"sqlite:///{db_path}"}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "db", "downgrade", "0099"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Unknown revision '0099'" in done.stderr
    assert "Traceback" not in done.stderr


def test_revision_writes_a_standalone_migration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    migrations = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS_DIR, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(migrate, "MIGRATIONS_DIR", migrations)
    extra = Table(
        "probe_notes",
        Base.metadata,
        Column("id", Integer, primary_key=True),
        Column("noted_at", UTCDateTime(), nullable=False),
        Column("body", JSONDoc, nullable=False),
    )
    expected = f"{len(migrate.known_revisions()) + 1:04d}"
    try:
        path = migrate.new_revision("add probe notes")
        source = path.read_text()
        url = f"sqlite:///{tmp_path / 'x.sqlite'}"
        migrate.upgrade(url)
        assert migrate.current_revision(url) == migrate.head_revision() == expected
    finally:
        Base.metadata.remove(extra)
    assert path.name == f"{expected}_add_probe_notes.py"
    assert "sa.DateTime(timezone=True)" in source
    assert 'sa.JSON().with_variant(postgresql.JSONB(), "postgresql")' in source
    assert "services.store" not in source
    engine = make_engine(url)
    try:
        assert "probe_notes" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
