"""Preparing a non-square source: central squares at S for every default read, the
aspect-preserving originals beside them, and shards that follow the stored side and format."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import DataIntegrityError
from services.store.objects import LocalObjectStore
from workers.stream.manifest import SPLITS, StreamManifest
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream
from workers.stream.shards import load_index
from workers.stream.task_data import load_task_data

SIZE = 16
N = 40
HEIGHT, WIDTH = 20, 30  # landscape; the central square is columns 5..25


def _value(i: int) -> int:
    return 40 + 4 * i  # one grey level per image: rows stay identifiable after the split


@pytest.fixture
def offline(tmp_path: Path) -> Path:
    """``wide.npz``: image i has value v_i in its central square and 255 - v_i in the margins."""
    folder = tmp_path / "offline"
    folder.mkdir()
    images = np.empty((N, HEIGHT, WIDTH), np.uint8)
    for i in range(N):
        images[i] = 255 - _value(i)
        images[i, :, 5:25] = _value(i)
    np.savez(folder / "wide.npz", images=images, labels=(np.arange(N) % 2).astype(np.int64))
    (folder / "wide.json").write_text(json.dumps({"class_names": ["a", "b"]}))
    return folder


@pytest.fixture
def manifest() -> StreamManifest:
    mini = load_stream("mini")
    task = replace(mini.tasks[0], order=1, dataset="offline:wide", num_classes=2)
    return replace(mini, name="wide", tasks=(task,))


def _prepare(manifest, store, offline, **kwargs):
    return prepare_stream(manifest, store, image_size=SIZE, offline_dir=offline, **kwargs)


def test_default_reads_are_central_squares_and_originals_keep_the_aspect(manifest, offline, tmp_path):
    store = LocalObjectStore(tmp_path / "store")
    report = _prepare(manifest, store, offline, stored_scale=1.5)
    assert report.stored_side == 24
    data = load_task_data(store, manifest.tasks[0], image_size=SIZE, originals=SPLITS)
    assert data.index.stored_shape == (16, 24)  # 20 x 30 fitted to a long side of 24
    for split in SPLITS:
        images, _ = data.splits[split]
        originals = data.originals[split]
        assert images.shape[1:] == (SIZE, SIZE, 3)
        assert (originals.extents == [16, 24]).all()
        for image, original in zip(images, originals.images, strict=True):
            value = int(image[0, 0, 0])
            assert (image == value).all()  # the central square only, no margin pixel
            assert int(original[8, 12, 0]) == value and int(original[8, 1, 0]) == 255 - value


def test_without_originals_asked_a_read_carries_none(manifest, offline, tmp_path):
    store = LocalObjectStore(tmp_path / "store")
    _prepare(manifest, store, offline)
    data = load_task_data(store, manifest.tasks[0], image_size=SIZE, splits=("train", "test"))
    assert data.originals == {} and data.labelled("train").originals is None


def test_a_changed_stored_scale_rebuilds_the_originals(manifest, offline, tmp_path):
    store = LocalObjectStore(tmp_path / "store")
    _prepare(manifest, store, offline, stored_scale=1.0)
    assert load_index(store, "offline:wide", SIZE).stored_shape == (11, 16)
    again = _prepare(manifest, store, offline, stored_scale=1.0)
    assert [d.status for d in again.datasets] == ["present"]
    changed = _prepare(manifest, store, offline, stored_scale=1.5)
    assert [d.status for d in changed.datasets] == ["rebuilt"]
    index = load_index(store, "offline:wide", SIZE)
    assert index.stored_side == 24 and index.stored_shape == (16, 24)


def test_an_old_format_dataset_is_refused_by_readers_then_rebuilt(manifest, offline, tmp_path):
    store = LocalObjectStore(tmp_path / "store")
    _prepare(manifest, store, offline)
    index = load_index(store, "offline:wide", SIZE)
    doc = json.loads(index.to_json())
    doc["format_version"] = 1
    store.put_bytes(index.key, json.dumps(doc).encode())
    with pytest.raises(DataIntegrityError, match=r"shard format 1.*nevis data prepare"):
        load_task_data(store, manifest.tasks[0], image_size=SIZE)
    report = _prepare(manifest, store, offline)
    assert [d.status for d in report.datasets] == ["rebuilt"]
    assert load_index(store, "offline:wide", SIZE) == index
