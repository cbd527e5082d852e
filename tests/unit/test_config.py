"""Settings: defaults, overrides, masking and clear errors for bad values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.core.config import Settings, get_settings, mask_url
from services.core.errors import ConfigError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    for var in (
        "DATABASE_URL",
        "STORE_URL",
        "S3_ENDPOINT_URL",
        "RAY_ADDRESS",
        "OFFLINE_DATA_DIR",
        "IMAGE_SIZE",
        "STORED_SCALE",
        "PROBE_PRESET",
        "SANDBOX",
    ):
        monkeypatch.delenv(f"NEVIS_{var}", raising=False)
    monkeypatch.setenv("NEVIS_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_defaults_live_in_the_data_folder(tmp_path: Path) -> None:
    settings = get_settings()
    data = (tmp_path / "data").resolve()
    assert settings.data_dir == data
    assert settings.database_url == f"sqlite:///{data / 'nevis.sqlite'}"
    assert settings.store_url == (data / "store").as_uri()
    assert settings.ray_address is None
    assert settings.image_size == 64
    assert settings.stored_scale == 1.5


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEVIS_DATABASE_URL", "postgresql+psycopg://u:pw@db/nevis")
    monkeypatch.setenv("NEVIS_STORE_URL", "s3://bucket/prefix")
    monkeypatch.setenv("NEVIS_S3_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("NEVIS_IMAGE_SIZE", "32")
    settings = get_settings()
    assert settings.store_url == "s3://bucket/prefix"
    assert settings.image_size == 32
    masked = settings.masked()
    assert masked["NEVIS_DATABASE_URL"] == "postgresql+psycopg://u:***@db/nevis"
    assert "pw" not in json.dumps(masked)


def test_get_settings_is_cached_until_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    first = get_settings()
    monkeypatch.setenv("NEVIS_IMAGE_SIZE", "16")
    assert get_settings() is first
    get_settings.cache_clear()
    assert get_settings().image_size == 16


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("NEVIS_STORE_URL", "ftp://host/x", "NEVIS_STORE_URL must start with file:// or s3://"),
        ("NEVIS_DATABASE_URL", "nevis.sqlite", "NEVIS_DATABASE_URL must be an SQLAlchemy URL"),
        ("NEVIS_IMAGE_SIZE", "4", "NEVIS_IMAGE_SIZE: must be an int in [8, 512]; got 4"),
        ("NEVIS_IMAGE_SIZE", "big", "NEVIS_IMAGE_SIZE"),
        ("NEVIS_STORED_SCALE", "0.5", "NEVIS_STORED_SCALE: must be a number in [1, 4]"),
        ("NEVIS_STORED_SCALE", "5", "NEVIS_STORED_SCALE: must be a number in [1, 4]"),
        ("NEVIS_PROBE_PRESET", "huge", "NEVIS_PROBE_PRESET: must be one of standard, ci, full, publish, off"),
        ("NEVIS_SANDBOX", "docker", "NEVIS_SANDBOX: must be one of auto, bwrap, none"),
    ],
)
def test_bad_values_name_the_variable(monkeypatch, var: str, value: str, expected: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match="Invalid settings") as info:
        get_settings()
    assert expected in str(info.value)


@pytest.mark.parametrize("preset", ["standard", "ci", "full", "publish", "off"])
def test_every_probe_preset_is_accepted(monkeypatch, preset: str) -> None:
    monkeypatch.setenv("NEVIS_PROBE_PRESET", preset)
    get_settings.cache_clear()
    assert get_settings().probe_preset == preset


def test_mask_url_leaves_urls_without_password_alone() -> None:
    assert mask_url("sqlite:////tmp/x.sqlite") == "sqlite:////tmp/x.sqlite"
    assert mask_url("postgresql://a:b@h:5/d") == "postgresql://a:***@h:5/d"


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(Exception):
        settings.image_size = 8  # type: ignore[misc]


def test_cli_config_json_and_bad_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    exe = Path(sys.executable).parent / "nevis"
    monkeypatch.setenv("NEVIS_DATABASE_URL", "postgresql+psycopg://u:secret@db/nevis")
    out = subprocess.run([exe, "config", "--json"], capture_output=True, text=True, check=True)
    values = json.loads(out.stdout)
    assert values["NEVIS_DATABASE_URL"].endswith("u:***@db/nevis")
    monkeypatch.setenv("NEVIS_STORE_URL", "gopher://x")
    bad = subprocess.run([exe, "config"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "NEVIS_STORE_URL" in bad.stderr and "Traceback" not in bad.stderr
