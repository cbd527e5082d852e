"""``nevis data convert`` through the real Typer app: fetched fixtures become Parquet
datasets, a second run finds them present, and a source whose files were not fetched fails
the command with its table row (a stream is never shortened silently)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.core.errors import DataIntegrityError
from tests.support.source_fixtures.idx_sources import write_idx_source
from tests.support.source_fixtures.usps import write_usps

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


@pytest.fixture
def folders(settings_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    offline = tmp_path / "offline"
    monkeypatch.setenv("NEVIS_OFFLINE_DATA_DIR", str(offline))
    get_settings.cache_clear()
    return settings_env, offline


def _row(output: str, key: str) -> str:
    return " ".join(next(line for line in output.splitlines() if line.startswith(f"│ {key} ")).split())


def test_convert_writes_each_source_then_finds_it_present(folders: tuple[Path, Path]) -> None:
    data_dir, offline = folders
    write_idx_source(data_dir, "mnist")
    write_usps(data_dir)
    args = [
        "data",
        "convert",
        "--stream",
        "nevis22-short",
        "--datasets",
        "mnist,usps",
        "--accept-count-change",
        "--accept-checksum-change",
    ]  # fixtures: other bytes, fewer rows
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert "converted" in _row(result.stdout, "mnist") and "8" in _row(result.stdout, "mnist").split()
    assert (offline / "mnist.parquet").is_file() and (offline / "usps.parquet").is_file()
    again = runner.invoke(app, args, env=WIDE)
    assert again.exit_code == 0, again.output
    assert "present" in _row(again.stdout, "usps")


def test_a_source_not_fetched_fails_the_command_and_says_so(folders: tuple[Path, Path]) -> None:
    data_dir, offline = folders
    write_idx_source(data_dir, "mnist")
    result = runner.invoke(
        app,
        [
            "data",
            "convert",
            "--stream",
            "nevis22-short",
            "--datasets",
            "mnist,coil100",
            "--accept-count-change",
            "--accept-checksum-change",
        ],
        env=WIDE,
    )
    assert isinstance(result.exception, DataIntegrityError)
    assert "1 of 2 sources of stream 'nevis22-short' are not converted (coil100)" in str(result.exception)
    assert "missing files" in _row(result.stdout, "coil100") and "coil-100.zip" in _row(result.stdout, "coil100")
    assert (offline / "mnist.parquet").is_file() and not (offline / "coil100.parquet").exists()
