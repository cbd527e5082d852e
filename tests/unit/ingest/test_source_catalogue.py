"""The source catalogue (package data): every FULL and SHORT task has a source, and each
entry holds what a fetch needs. Read through importlib.resources, never ../shared."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from services.core.errors import ConfigError, DatasetNotFoundError, ManifestError
from workers.ingest.sources.fetch_one import candidate_urls
from workers.ingest.sources.locations import check_mirror, mirror_url
from workers.stream.manifest_files import load_stream
from workers.stream.sources.catalogue import load_catalogue, parse_catalogue

REPO = Path(__file__).resolve().parents[3]
STREAMS = {"FULL": ("nevis22-full", 106), "SHORT": ("nevis22-short", 29)}


@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_every_task_of_the_stream_maps_to_a_catalogue_entry(stream: str) -> None:
    name, count = STREAMS[stream]
    manifest, catalogue = load_stream(name), load_catalogue()
    assert len(manifest.tasks) == count
    for task in manifest.tasks:
        source = catalogue.find(task.dataset)
        assert task.order in source.tasks[stream], (task.order, task.dataset)
    covered = sorted(o for s in catalogue.sources for o in s.tasks[stream])
    assert covered == list(range(1, count + 1))  # each task exactly once
    assert len(catalogue.for_datasets(manifest.datasets)) == len(manifest.datasets)


def test_entries_hold_what_a_fetch_needs() -> None:
    catalogue = load_catalogue()
    assert len(catalogue.sources) == 97
    assert Counter(s.needs for s in catalogue.sources) == {"none": 83, "kaggle": 13, "manual": 1}
    for source in catalogue.sources:
        assert source.files and source.archive, source.key
        names = [f.name for f in source.files]
        assert len(set(names)) == len(names), source.key
        for file in source.files:
            assert file.checksum and file.checksum.split(":")[0] in ("md5", "sha256"), (source.key, file.name)
        if source.needs == "kaggle":
            [file] = source.files
            assert file.url == f"kaggle:{source.kaggle}"
            assert file.name == source.kaggle.rsplit("/", 1)[1] + ".zip"
    assert catalogue.find("voc/2007") is catalogue.find("nevis:voc_2007") is catalogue.find("voc_2007")
    assert {s.torchvision for s in catalogue.sources} >= {"MNIST", "CIFAR10", "VOCDetection"}
    imagenet = catalogue.find("imagenet2012")
    assert imagenet.needs == "manual" and imagenet.known_size == 147897477120 + 6744924160


def test_an_unknown_name_is_a_clear_error() -> None:
    catalogue = load_catalogue()
    with pytest.raises(DatasetNotFoundError, match="Did you mean 'mnist'"):
        catalogue.find("mnits")
    with pytest.raises(DatasetNotFoundError, match="offline:coil20"):
        catalogue.for_datasets(["nevis:mnist", "offline:coil20"])


def test_a_bad_entry_is_refused() -> None:
    entry = {"key": "x", "needs": "registration", "files": []}
    with pytest.raises(ManifestError, match="needs must be one of"):
        parse_catalogue({"format": 1, "sources": [entry]})
    entry = {"key": "x", "needs": "none", "files": [{"name": "a", "url": "http://h/a", "checksum": "crc:1"}]}
    with pytest.raises(ManifestError, match="checksum"):
        parse_catalogue({"format": 1, "sources": [entry]})


def test_the_mirror_comes_first_and_kaggle_or_manual_files_only_from_it() -> None:
    catalogue = load_catalogue()
    mnist, imagenet, notmnist = (catalogue.find(k) for k in ("mnist", "imagenet2012", "not_mnist"))
    urls = candidate_urls(mnist, mnist.files[0], "https://mirror.example/nevis")
    assert urls[0] == "https://mirror.example/nevis/mnist/train-images-idx3-ubyte.gz"
    assert urls[1] == mnist.files[0].url
    assert candidate_urls(imagenet, imagenet.files[0], None) == []
    assert candidate_urls(notmnist, notmnist.files[0], "s3://b/p") == ["s3://b/p/not_mnist/notmnist.zip"]
    assert mirror_url("s3://b/p/", mnist, mnist.files[0]).startswith("s3://b/p/mnist/")


def test_a_mirror_must_be_http_or_s3() -> None:
    assert check_mirror("s3://bucket/prefix/") == "s3://bucket/prefix"
    for bad in ("ftp://host/x", "/local/path", "s3://"):
        with pytest.raises(ConfigError, match="NEVIS_DATA_MIRROR"):
            check_mirror(bad)


def test_the_catalogue_is_package_data() -> None:
    from importlib import resources

    doc = json.loads(resources.files("workers.stream.sources").joinpath("catalogue.json").read_text())
    assert doc["format"] == 1 and len(doc["sources"]) == 97
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"workers.stream.sources" = ["catalogue.json"]' in pyproject


@pytest.mark.skipif(
    not (REPO.parent / "shared" / "streams" / "nevis22_sources.json").exists(),
    reason="the reference table (../shared) is not beside this checkout",
)
def test_the_catalogue_is_up_to_date_with_its_generator() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/build_source_catalogue.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_nevis_source_catalogue_replaces_the_packaged_one(settings_env, monkeypatch, tmp_path: Path) -> None:
    from services.core.config import get_settings

    packaged = load_catalogue()
    mine = {
        "format": 1,
        "sources": [
            {
                "key": "mnist",
                "needs": "none",
                "files": [
                    {"name": "train.gz", "url": "https://example.org/train.gz", "checksum": "sha256:" + "0" * 64}
                ],
            }
        ],
    }
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(mine))
    monkeypatch.setenv("NEVIS_SOURCE_CATALOGUE", str(path))
    get_settings.cache_clear()
    assert [f.checksum for f in load_catalogue().find("mnist").files] == ["sha256:" + "0" * 64]
    assert len(load_catalogue().sources) == 1
    monkeypatch.setenv("NEVIS_SOURCE_CATALOGUE", str(tmp_path / "absent.json"))
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match="NEVIS_SOURCE_CATALOGUE=.*absent.json"):
        load_catalogue()
    monkeypatch.delenv("NEVIS_SOURCE_CATALOGUE")
    get_settings.cache_clear()
    assert load_catalogue() is packaged
