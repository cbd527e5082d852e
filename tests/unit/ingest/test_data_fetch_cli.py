"""``nevis data fetch`` through the real Typer app, offline: the dry run accounts for every
task, and a source that cannot be fetched (manual) makes the command fail, never shorten."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.config import get_settings
from services.core.errors import DataIntegrityError, DatasetNotFoundError

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


@pytest.fixture(autouse=True)
def offline(settings_env, monkeypatch, tmp_path):
    monkeypatch.delenv("NEVIS_DATA_MIRROR", raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "no-kaggle"))
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield settings_env
    get_settings.cache_clear()


def task_orders(output: str) -> list[int]:
    orders = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 3 and re.fullmatch(r"[\d,]+", cells[2]):
            orders += [int(o) for o in cells[2].split(",")]
    return sorted(orders)


def test_the_full_dry_run_accounts_for_all_106_tasks(offline) -> None:
    result = runner.invoke(app, ["data", "fetch", "--stream", "nevis22-full", "--dry-run"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert task_orders(result.stdout) == list(range(1, 107))
    text = " ".join(result.stdout.split())
    assert "106 tasks from 97 sources" in text
    assert "83 direct downloads, 13 need Kaggle credentials, 1 needs a manual download" in text
    assert "Kaggle credentials (not set): kaggle datasets download jwjohnson314/notmnist" in text
    assert "place ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar in" in text
    assert re.search(r"│ sun397 .*│ 39\.1 GB", result.stdout)
    assert "unknown" in result.stdout
    assert not (offline / "sources").exists()  # a dry run writes nothing


def test_fetching_a_manual_source_fails_the_command_with_its_instructions(offline) -> None:
    result = runner.invoke(app, ["data", "fetch", "--stream", "nevis22-short", "--datasets", "imagenet2012"], env=WIDE)
    assert isinstance(result.exception, DataIntegrityError)
    assert "1 of 1 sources of stream 'nevis22-short' are not present (imagenet2012)" in str(result.exception)
    text = " ".join(result.stdout.split())
    assert "needs a manual download" in text and "ILSVRC2012_img_val.tar" in text


def test_datasets_must_belong_to_the_stream(offline) -> None:
    result = runner.invoke(app, ["data", "fetch", "--stream", "nevis22-short", "--datasets", "landsat", "--dry-run"])
    assert isinstance(result.exception, DatasetNotFoundError)
    assert "not sources of stream 'nevis22-short': landsat" in str(result.exception)
