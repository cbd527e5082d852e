"""Opening the configured store from NEVIS_STORE_URL (no disk or network access needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.config import Settings
from services.core.errors import ConfigError
from services.store.objects import LocalObjectStore, S3ObjectStore, open_store, store_from_settings


@pytest.fixture(autouse=True)
def fake_aws(monkeypatch):
    # Building a boto3 client needs a region; nothing here talks to a server.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("NEVIS_STORE_URL", "NEVIS_S3_ENDPOINT_URL", "NEVIS_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_file_url_opens_a_local_store(tmp_path):
    store = open_store((tmp_path / "my store").as_uri())
    assert isinstance(store, LocalObjectStore)
    assert store.root == tmp_path / "my store"  # percent-encoding undone
    assert not store.root.exists()  # opening writes nothing


def test_s3_url_opens_an_s3_store_with_its_prefix_and_endpoint():
    store = open_store("s3://nevis-bucket/runs/2024/", s3_endpoint_url="http://127.0.0.1:9")
    assert isinstance(store, S3ObjectStore)
    assert (store.bucket, store.prefix, store.url) == ("nevis-bucket", "runs/2024/", "s3://nevis-bucket/runs/2024")


def test_s3_url_without_a_prefix_uses_the_bucket_root():
    store = open_store("s3://nevis-bucket", s3_endpoint_url="http://127.0.0.1:9")
    assert store.prefix == ""


@pytest.mark.parametrize(
    "url",
    [
        "",
        "/plain/path",
        "relative/path",
        "http://example.com/store",
        "gs://bucket/prefix",
        "file://relative/path",
        "file:relative",
        "file:///abs?x=1",
        "s3://",
        "s3:///prefix-only",
        "s3://key:secret@bucket/p",
        "s3://bucket/a/../b",
        "s3://bucket/a//b",
    ],
)
def test_bad_store_urls_name_the_setting(url):
    with pytest.raises(ConfigError, match="NEVIS_STORE_URL"):
        open_store(url)


def test_store_from_settings_defaults_to_a_folder_in_the_data_dir(tmp_path):
    store = store_from_settings(Settings(data_dir=tmp_path))
    assert isinstance(store, LocalObjectStore)
    assert store.root == (tmp_path / "store").resolve()


def test_store_from_settings_passes_the_s3_endpoint(tmp_path):
    settings = Settings(data_dir=tmp_path, store_url="s3://bkt/pre", s3_endpoint_url="http://127.0.0.1:9")
    store = store_from_settings(settings)
    assert isinstance(store, S3ObjectStore)
    assert store.endpoint_url == "http://127.0.0.1:9"


def test_a_store_root_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert LocalObjectStore(Path("rel")).root == tmp_path.resolve() / "rel"
