"""The real offline datasets (``NEVIS_OFFLINE_DATA_DIR``, ../shared/datasets beside the repo)
prepared into a temporary local store, and the full NEVIS'22 stream refused with its list of
missing datasets.

To stay quick, the prepare test uses a five-dataset subset of the ``offline`` stream at 32px
that still covers every interesting case: provided splits, an official train/test split
(USPS), exact duplicates (UMIST, MPEG-7) and images of 16 to 112 pixels.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import DatasetNotFoundError
from services.store.objects import LocalObjectStore
from workers.stream.adapters import AdapterContext, find_dataset
from workers.stream.dedup import image_hashes
from workers.stream.manifest import SPLITS
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream, verify_stream
from workers.stream.shards import load_index
from workers.stream.task_data import load_task_data

REPO = Path(__file__).resolve().parents[2]
SUBSET = ("orl_faces", "mpeg7_shapes", "umist_faces", "usps", "semeion")
# NEVIS'22 names of the twelve offline datasets, as the nevis22-full manifest spells them.
NEVIS_FOUND = {
    "nevis:olivetti_face",
    "nevis:coil20",
    "nevis:coil100",
    "nevis:mpeg7",
    "nevis:mnist",
    "nevis:caltech101",
    "nevis:umist",
    "nevis:extended_yaleb",
    "nevis:cifar10",
    "nevis:usps",
    "nevis:semeion",
    "nevis:fashion_mnist",
}


@pytest.fixture(scope="module")
def offline_dir() -> Path:
    configured = os.environ.get("NEVIS_OFFLINE_DATA_DIR")
    folder = Path(configured) if configured else REPO.parent / "shared" / "datasets"
    if not (folder / "mnist.json").is_file():
        pytest.fail(
            f"The offline datasets are not in {folder}. Set NEVIS_OFFLINE_DATA_DIR to the "
            "folder that holds <name>.npz + <name>.json (../shared/datasets beside the clone).",
            pytrace=False,
        )
    return folder


@pytest.fixture(scope="module")
def subset(offline_dir, tmp_path_factory):
    """The subset stream prepared once: (manifest, store, report)."""
    offline = load_stream("offline")
    tasks = tuple(t for t in offline.tasks if t.dataset_name in SUBSET)
    manifest = replace(offline, name="offline-subset", tasks=tasks)
    store = LocalObjectStore(tmp_path_factory.mktemp("offline") / "store")
    report = prepare_stream(manifest, store, image_size=32, offline_dir=offline_dir)
    return manifest, store, report


def _sidecar(offline_dir: Path, name: str) -> dict:
    return json.loads((offline_dir / f"{name}.json").read_text())


def test_every_dataset_of_the_offline_stream_is_found(offline_dir):
    ctx = AdapterContext(offline_dir=offline_dir)
    stream = load_stream("offline")
    assert len(stream.datasets) == 12
    assert [find_dataset(key, ctx) for key in stream.datasets] == [None] * 12


def test_the_subset_is_prepared_with_the_provided_splits(subset, offline_dir):
    manifest, store, report = subset
    assert [d.status for d in report.datasets] == ["prepared"] * len(SUBSET)
    for item in report.datasets:
        sizes = _sidecar(offline_dir, item.dataset.split(":")[1])["split"]["sizes"]
        removed = load_index(store, item.dataset, 32).dedup["removed"]
        # provided lists are kept as they are, less the duplicates removed from each split
        assert item.counts["train"] == sizes["train"] - removed["train"]
        assert item.counts["test"] == sizes["test"] - removed["test"]
        dev_sets = item.counts["dev"] + item.counts["dev_test"]
        assert dev_sets == sizes["val"] - removed["dev"] - removed["dev_test"]
        assert abs(item.counts["dev"] - item.counts["dev_test"]) <= 1 + removed["dev"] + removed["dev_test"]


def test_known_exact_duplicates_are_removed(subset, offline_dir):
    for item in subset[2].datasets:
        known = _sidecar(offline_dir, item.dataset.split(":")[1])["exact_duplicate_images"]
        # the sidecar counts duplicates at the source size; shrinking may add a few more
        assert item.duplicates_removed >= known
    removed = {d.dataset: d.duplicates_removed for d in subset[2].datasets}
    assert removed["offline:umist_faces"] >= 10 and removed["offline:mpeg7_shapes"] >= 3


def test_no_image_is_in_two_splits_and_the_index_names_its_source(subset, offline_dir):
    manifest, store, _ = subset
    for task in manifest.tasks:
        data = load_task_data(store, task, image_size=32)
        owners: dict[bytes, str] = {}
        for split in SPLITS:
            images, labels = data.splits[split]
            assert images.shape[1:] == (32, 32, 3) and labels.dtype == np.int64
            for digest in image_hashes(images):
                assert owners.setdefault(digest, split) == split, task.dataset
        meta = _sidecar(offline_dir, task.dataset_name)
        assert data.index.source_checksum == meta["npz_sha256"]
        assert data.index.class_names == tuple(meta["class_names"])


def test_a_second_prepare_does_nothing_and_everything_verifies(subset, offline_dir):
    manifest, store, first = subset
    again = prepare_stream(manifest, store, image_size=32, offline_dir=offline_dir)
    assert again.nothing_to_do
    assert again.shards_verified == sum(d.num_shards for d in first.datasets)
    assert all(v.startswith("ok") for v in verify_stream(manifest, store, image_size=32).values())


def test_nevis_names_of_the_full_stream_find_exactly_the_offline_datasets(offline_dir):
    ctx = AdapterContext(offline_dir=offline_dir)
    full = load_stream("nevis22-full")
    found = {key for key in full.datasets if find_dataset(key, ctx) is None}
    assert found == NEVIS_FOUND


def test_preparing_the_full_stream_lists_every_missing_dataset_and_writes_nothing(offline_dir, tmp_path):
    full = load_stream("nevis22-full")
    store = LocalObjectStore(tmp_path / "store")
    with pytest.raises(DatasetNotFoundError) as caught:
        prepare_stream(full, store, image_size=32, offline_dir=offline_dir)
    message = str(caught.value)
    missing = [key for key in full.datasets if key not in NEVIS_FOUND]
    assert len(missing) == len(full.datasets) - 12
    assert f"needs {len(missing)} of its {len(full.datasets)} datasets" in message
    for key in missing:
        assert key in message
    assert "nevis:mnist," not in message and "nevis:mnist\n" not in message
    assert f"NEVIS_OFFLINE_DATA_DIR={offline_dir}" in message
    assert list(store.list("")) == []
