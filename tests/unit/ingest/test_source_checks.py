"""Data a paper can defend (issue 47 item 4; issue 44's low finding on hand-placed files):

- a source whose classes or rows per split differ from the catalogue's pinned counts fails
  ``convert`` and ``prepare``, naming the source, split, expected and found, unless
  ``--accept-count-change``, which the result then records;
- ``convert`` holds hand-placed files to the catalogue's checksums, or says it could not;
- a reader rule that keeps nothing says which rule and why.

The sources are tiny fixtures in their real layout (MNIST's IDX files, LFW's tar, SUN397's
tar), so their pinned counts (TFDS's 60,000 / 10,000 for MNIST) never match.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest

from services.core.config import get_settings
from services.store.objects import LocalObjectStore
from tests.support.source_fixtures.idx_sources import write_idx_source
from tests.support.source_fixtures.tiny_archives import image_bytes, write_tar, write_zip
from workers.ingest.readers.base import RuleKeepsNothingError, convert_source
from workers.ingest.readers.convert import CONVERTED, FAILED, convert_one
from workers.stream.manifest import parse_manifest
from workers.stream.prepare import prepare_stream
from workers.stream.sources.catalogue import load_catalogue, parse_source
from workers.stream.sources.pinned import CountMismatchError, count_record

MNIST_PINNED = ("split 'train': expected 60000 rows, found 5", "split 'test': expected 10000 rows, found 3")


def _short_stream(key: str) -> dict:
    doc = json.loads(resources.files("workers.stream").joinpath("manifests/nevis22-short.json").read_text())
    tasks = [t for t in doc["tasks"] if t["dataset"] == f"nevis:{key}"][:1]
    return {**doc, "name": f"short-{key}", "tasks": [{**tasks[0], "order": 1}]}


def _catalogue_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, checksums: dict[str, str | None]
) -> None:
    """NEVIS_SOURCE_CATALOGUE: the packaged catalogue with ``key``'s checksums replaced."""
    doc = json.loads(resources.files("workers.stream.sources").joinpath("catalogue.json").read_text())
    for entry in doc["sources"]:
        if entry["key"] == key:
            for file in entry["files"]:
                file["checksum"] = checksums[file["name"]]
    path = tmp_path / f"catalogue-{len(list(tmp_path.glob('catalogue-*')))}.json"  # read once per path
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("NEVIS_SOURCE_CATALOGUE", str(path))
    get_settings.cache_clear()


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def mnist(tmp_path: Path) -> Path:
    """The data folder with MNIST's four files (5 train, 3 test rows), placed by hand."""
    write_idx_source(tmp_path / "data", "mnist")
    return tmp_path / "data"


def test_convert_fails_on_pinned_counts_and_writes_nothing(mnist: Path, tmp_path: Path) -> None:
    outcome = convert_one("mnist", mnist, tmp_path / "offline", accept_checksum_change=True)
    assert outcome.status == FAILED
    assert "CountMismatchError: Source 'mnist' differs from its pinned counts" in outcome.detail
    assert all(line in outcome.detail for line in MNIST_PINNED), outcome.detail
    assert "TFDS 4.6.0" in outcome.detail and "--accept-count-change" in outcome.detail
    assert not (tmp_path / "offline" / "mnist.parquet").exists()


def test_an_accepted_count_change_is_converted_and_said(mnist: Path, tmp_path: Path) -> None:
    outcome = convert_one("mnist", mnist, tmp_path / "offline", accept_count_change=True, accept_checksum_change=True)
    assert outcome.status == CONVERTED and outcome.rows == 8
    assert "counts differ from pinned, accepted by --accept-count-change" in outcome.detail
    assert all(line in outcome.detail for line in MNIST_PINNED)


def test_prepare_fails_on_pinned_counts_unless_accepted(mnist: Path, tmp_path: Path) -> None:
    offline = tmp_path / "offline"
    convert_source("mnist", mnist, offline, accept_count_change=True)  # as an older convert left it
    manifest, store = parse_manifest(_short_stream("mnist")), LocalObjectStore(tmp_path / "store")
    with pytest.raises(CountMismatchError) as refused:
        prepare_stream(manifest, store, image_size=16, offline_dir=offline)
    assert all(line in str(refused.value) for line in MNIST_PINNED)
    assert "Source 'mnist'" in str(refused.value)
    assert not list(store.list("datasets/"))  # nothing was written
    report = prepare_stream(manifest, store, image_size=16, offline_dir=offline, accept_count_change=True)
    assert any("accepted (--accept-count-change)" in note for note in report.datasets[0].notes)
    from workers.stream.shards import load_index

    check = load_index(store, "nevis:mnist", 16).source["counts_check"]
    assert check["accepted_change"]["flag"] == "--accept-count-change"
    assert check["rows"] == {"train": 5, "test": 3} and check["pinned"]["rows"]["train"] == 60000


def test_a_task_class_count_differing_from_the_data_fails_prepare(mnist: Path, tmp_path: Path) -> None:
    offline = tmp_path / "offline"
    convert_source("mnist", mnist, offline, accept_count_change=True)
    doc = _short_stream("mnist")
    doc["tasks"][0]["num_classes"] = 11
    with pytest.raises(CountMismatchError, match="says 11 classes, the data has 10"):
        prepare_stream(
            parse_manifest(doc),
            LocalObjectStore(tmp_path / "store"),
            image_size=16,
            offline_dir=offline,
            accept_count_change=False,
        )


def test_matching_counts_pass_and_are_recorded() -> None:
    source = parse_source(
        {
            "key": "toy",
            "needs": "none",
            "files": [],
            "expected": {"classes": 3, "rows": {"train": 4, "test": 2}, "from": "TFDS"},
        }
    )
    record = count_record(source, 3, {"train": 4, "test": 2}, accept=False)
    assert record["pinned"]["rows"] == {"train": 4, "test": 2} and "accepted_change" not in record
    with pytest.raises(CountMismatchError, match=r"classes: expected 3, found 2"):
        count_record(source, 2, {"train": 4, "test": 2}, accept=False)


def test_hand_placed_files_are_held_to_the_catalogue_checksums(
    settings_env: Path, mnist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = mnist / "sources" / "mnist"
    sums = {p.name: _sha256(p) for p in folder.iterdir()}
    _catalogue_with(tmp_path, monkeypatch, "mnist", sums)
    done = convert_one("mnist", mnist, tmp_path / "offline", accept_count_change=True)
    assert done.status == CONVERTED and "checksums: 4 of 4 files verified" in done.detail, done.detail

    sums["train-labels-idx1-ubyte.gz"] = "md5:" + "0" * 32  # the catalogue's bytes differ
    sums["t10k-labels-idx1-ubyte.gz"] = None  # nothing known of this one
    _catalogue_with(tmp_path, monkeypatch, "mnist", sums)
    refused = convert_one("mnist", mnist, tmp_path / "other", accept_count_change=True)
    assert refused.status == FAILED and not (tmp_path / "other").exists()
    assert f"train-labels-idx1-ubyte.gz: checksum mismatch: expected md5:{'0' * 32}" in refused.detail
    assert "NOT verified (no checksum in the catalogue): t10k-labels-idx1-ubyte.gz" in refused.detail
    accepted = convert_one("mnist", mnist, tmp_path / "other", accept_count_change=True, accept_checksum_change=True)
    assert accepted.status == CONVERTED
    assert "mismatch accepted by --accept-checksum-change" in accepted.detail


def test_the_packaged_catalogue_has_a_checksum_for_every_file() -> None:
    """docs/data-fetch.md says convert verifies every file of the NEVIS'22 sources."""
    unknown = [f"{s.key}/{f.name}" for s in load_catalogue().sources for f in s.files if not f.checksum]
    assert unknown == []


def test_lfw_whose_rule_keeps_no_one_says_why(tmp_path: Path) -> None:
    members = {
        f"lfw/P{p}/P{p}_{n:04d}.jpg": image_bytes(8, 8, seed=10 * p + n, fmt="JPEG") for p in range(3) for n in range(4)
    }
    write_tar(tmp_path / "data" / "sources" / "lfw" / "lfw.tgz", members, compression="gz")
    with pytest.raises(RuleKeepsNothingError) as empty:
        convert_source("lfw", tmp_path / "data", tmp_path / "offline", accept_count_change=True)
    assert "'people with at least 5 images' keeps no one" in str(empty.value)
    assert "12 images of 3 people, at most 4 of one person" in str(empty.value)


def test_sun397_whose_rule_keeps_no_image_names_the_rule(tmp_path: Path) -> None:
    members = {"SUN397/a/abbey/sun_notinanylist.jpg": image_bytes(9, 9, fmt="JPEG")}
    write_tar(tmp_path / "data" / "sources" / "sun397" / "SUN397.tar.gz", members, compression="gz")
    (tmp_path / "data" / "sources" / "sun397" / "Partitions.zip").write_bytes(b"")
    with pytest.raises(RuleKeepsNothingError) as empty:
        convert_source("sun397", tmp_path / "data", tmp_path / "offline", accept_count_change=True)
    assert "Source 'sun397': no row of SUN397.tar.gz" in str(empty.value)
    assert "TFDS's sun397/tfds train, validation or test list" in str(empty.value)
    assert not (tmp_path / "offline" / "sun397.parquet").exists()


def test_coco_whose_boxes_are_all_small_names_the_rule(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "sources" / "coco_single_label"
    tables = {}
    for part, image_id in (("train2017", 9), ("val2017", 139)):
        name = f"{image_id:012d}.jpg"
        write_zip(folder / f"{part}.zip", {f"{part}/{name}": image_bytes(64, 48, seed=image_id, fmt="JPEG")})
        tables[f"annotations/instances_{part}.json"] = json.dumps(
            {
                "images": [{"id": image_id, "file_name": name, "width": 64, "height": 48}],
                "annotations": [{"id": 1, "image_id": image_id, "bbox": [1, 1, 15, 40], "category_id": 1}],
                "categories": [{"id": 1, "name": "person"}],
            }
        ).encode()
    write_zip(folder / "annotations_trainval2017.zip", tables)
    with pytest.raises(RuleKeepsNothingError) as empty:
        convert_source("coco_single_label", tmp_path / "data", tmp_path / "offline", accept_count_change=True)
    assert "Source 'coco_single_label': no row of" in str(empty.value)
    assert "box is at least 16 px each way" in str(empty.value)


def test_nevis_data_prepare_stops_on_a_fetched_source_of_other_counts(
    settings_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from services.cli.main import app
    from services.core.errors import DataIntegrityError

    write_idx_source(settings_env, "mnist")
    folder = settings_env / "sources" / "mnist"
    _catalogue_with(tmp_path, monkeypatch, "mnist", {p.name: _sha256(p) for p in folder.iterdir()})
    monkeypatch.setenv("NEVIS_OFFLINE_DATA_DIR", str(tmp_path / "offline"))
    get_settings.cache_clear()
    result = CliRunner().invoke(app, ["data", "prepare", "--stream", "nevis22-short"], env={"COLUMNS": "250"})
    assert isinstance(result.exception, DataIntegrityError), result.output
    assert "1 fetched source(s) of stream 'nevis22-short' failed to convert: mnist:" in str(result.exception)
    assert all(line in str(result.exception) for line in MNIST_PINNED)
    assert not (tmp_path / "offline" / "mnist.parquet").exists()
