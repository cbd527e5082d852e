"""The shard format: round trip, layout, determinism and corruption detection."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import DataIntegrityError
from services.store.objects import LocalObjectStore
from workers.stream.manifest import SPLITS
from workers.stream.shards import (
    DatasetIndex,
    check_dataset_listed,
    encode_shard,
    index_key,
    load_index,
    read_labelled,
    read_split,
    verify_dataset,
    write_dataset,
)
from workers.stream.task_info import Originals

SIZE = 8
CANVAS = (12, 6)  # originals: a portrait canvas, each row with its own valid extent


def _originals(n: int) -> Originals:
    rng = np.random.RandomState(1)
    extents = np.stack([rng.randint(1, CANVAS[0] + 1, n), rng.randint(1, CANVAS[1] + 1, n)], 1)
    return Originals(rng.randint(0, 256, size=(n, *CANVAS, 3), dtype=np.uint8), extents.astype(np.int32))


def _data(n: int = 50, *, multi: bool = False):
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, size=(n, SIZE, SIZE, 3), dtype=np.uint8)
    if multi:
        labels = (rng.rand(n, 3) > 0.5).astype(np.uint8)
    else:
        labels = (np.arange(n) % 3).astype(np.int64)
    rows = {
        "train": np.arange(0, 30),
        "dev": np.arange(30, 36),
        "dev_test": np.arange(36, 40),
        "test": np.arange(40, n),
    }
    return images, labels, rows


def _draft(dataset: str = "offline:toy", *, kind: str = "single") -> DatasetIndex:
    return DatasetIndex(
        dataset=dataset,
        kind=kind,
        class_names=("a", "b", "c"),
        image_size=SIZE,
        resize_method="none",
        stored_side=12,
        stored_shape=CANVAS,
        originals_method="none",
        split_rule={"kind": "random", "fractions": {}, "seed": 0},
        split_how="by hand",
        counts={},
        shards={},
        dedup={"total_removed": 0},
        source_checksum="f" * 64,
        source={"title": "toy"},
    )


def _write(store, *, multi: bool = False, per_shard: int = 7) -> tuple[DatasetIndex, tuple]:
    images, labels, rows = _data(multi=multi)
    index = write_dataset(
        store,
        images=images,
        labels=labels,
        originals=_originals(len(images)),
        split_rows=rows,
        index=_draft(kind="multi" if multi else "single"),
        max_examples_per_shard=per_shard,
    )
    return index, (images, labels, rows)


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "store")


@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_a_written_dataset_reads_back_exactly(store, multi):
    written, (images, labels, rows) = _write(store, multi=multi)
    index = load_index(store, "offline:toy", SIZE)
    assert index == written
    for split in SPLITS:
        x, y = read_split(store, index, split)
        assert np.array_equal(x, images[rows[split]]) and np.array_equal(y, labels[rows[split]])
    assert index.counts == {"train": 30, "dev": 6, "dev_test": 4, "test": 10}


def test_originals_and_their_extents_read_back_only_when_asked(store):
    index, (images, labels, rows) = _write(store)
    originals = _originals(len(images))
    for split in SPLITS:
        data = read_labelled(store, index, split, originals=True)
        assert np.array_equal(data.images, images[rows[split]])
        assert np.array_equal(data.originals.images, originals.images[rows[split]])
        assert np.array_equal(data.originals.extents, originals.extents[rows[split]])
        assert read_labelled(store, index, split, originals=False).originals is None
    assert index.stored_shape == CANVAS and index.stored_side == 12


def test_an_index_of_the_old_shard_format_is_refused_with_how_to_rebuild(store):
    index, _ = _write(store)
    doc = json.loads(index.to_json())
    doc["format_version"] = 1
    store.put_bytes(index.key, json.dumps(doc).encode())
    with pytest.raises(DataIntegrityError, match=r"shard format 1.*nevis data prepare"):
        load_index(store, "offline:toy", SIZE)


def test_write_refuses_originals_that_do_not_match_the_index_canvas(store):
    images, labels, rows = _data()
    wrong = Originals(np.zeros((len(images), 6, 12, 3), np.uint8), np.full((len(images), 2), 6, np.int32))
    with pytest.raises(ValueError, match="stored_shape"):
        write_dataset(store, images=images, labels=labels, originals=wrong, split_rows=rows, index=_draft())


def test_shards_follow_the_documented_layout_and_size_limit(store):
    index, _ = _write(store, per_shard=7)
    keys = list(store.list("datasets/offline/toy/8px"))
    assert "datasets/offline/toy/8px/index.json" in keys
    assert [s.key for s in index.shards["train"]] == [f"datasets/offline/toy/8px/train-{i:05d}.npz" for i in range(5)]
    assert all(s.num_examples <= 7 for s in index.all_shards)
    assert [s.num_examples for s in index.shards["train"]] == [7, 7, 7, 7, 2]
    assert index.key == index_key("offline:toy", SIZE)


def test_the_index_records_what_a_reader_needs(store):
    index, _ = _write(store)
    assert index.num_classes == 3 and index.class_names == ("a", "b", "c")
    assert index.source_checksum == "f" * 64 and index.dedup == {"total_removed": 0}
    for shard in index.all_shards:
        info = store.info(shard.key)
        assert (info.sha256, info.size) == (shard.sha256, shard.size)


def test_shard_bytes_depend_only_on_the_arrays():
    images, labels, _ = _data()
    rows, originals = np.arange(10), _originals(10)
    assert encode_shard(images[:10], labels[:10], rows, originals) == encode_shard(
        images[:10].copy(), labels[:10].copy(), rows.copy(), originals.take(slice(None))
    )


def test_an_empty_split_reads_as_empty_arrays(store):
    images, labels, rows = _data()
    rows["dev_test"] = np.array([], dtype=np.int64)
    index = write_dataset(
        store, images=images, labels=labels, originals=_originals(len(images)), split_rows=rows, index=_draft()
    )
    x, y = read_split(store, index, "dev_test")
    assert x.shape == (0, SIZE, SIZE, 3) and y.shape == (0,) and index.shards["dev_test"] == ()
    empty = read_labelled(store, index, "dev_test", originals=True).originals
    assert empty.images.shape == (0, *CANVAS, 3) and empty.extents.shape == (0, 2)


def test_a_dataset_without_index_is_not_loaded(store):
    index, _ = _write(store)
    store.delete(index.key)
    assert load_index(store, "offline:toy", SIZE) is None


def test_an_unreadable_index_is_an_integrity_error(store):
    store.put_bytes(index_key("offline:toy", SIZE), b'{"format_version": 1}')
    with pytest.raises(DataIntegrityError, match="index.json is unreadable"):
        load_index(store, "offline:toy", SIZE)


def _flip_a_byte_on_disk(store: LocalObjectStore, key: str) -> None:
    sha = store.info(key).sha256
    blob = store.root / "blobs" / sha[:2] / sha
    os.chmod(blob, 0o644)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))


def test_a_shard_damaged_on_disk_is_named_by_read_and_verify(store):
    index, _ = _write(store)
    damaged = index.shards["test"][1].key
    _flip_a_byte_on_disk(store, damaged)
    with pytest.raises(DataIntegrityError, match=damaged):
        read_split(store, index, "test")
    with pytest.raises(DataIntegrityError, match=damaged):
        verify_dataset(store, index)
    read_split(store, index, "train")  # the other splits are still readable


def test_a_shard_replaced_behind_the_index_is_detected(store):
    index, _ = _write(store)
    replaced = index.shards["dev"][0].key
    images, labels, _ = _data()
    store.put_bytes(replaced, encode_shard(images[:6], labels[:6], np.arange(6), _originals(6)))
    with pytest.raises(DataIntegrityError, match=replaced):
        read_split(store, index, "dev")
    with pytest.raises(DataIntegrityError, match=replaced):
        verify_dataset(store, index)


def test_a_missing_shard_is_named(store):
    index, _ = _write(store)
    gone = index.shards["train"][2].key
    store.delete(gone)
    with pytest.raises(DataIntegrityError, match=gone):
        verify_dataset(store, index)


def test_verify_counts_every_shard(store):
    index, _ = _write(store, per_shard=7)
    assert verify_dataset(store, index) == 5 + 1 + 1 + 2


def test_the_listing_check_names_a_missing_or_resized_shard_without_reading_any(store):
    index, _ = _write(store, per_shard=7)
    assert check_dataset_listed(store, index) == 5 + 1 + 1 + 2
    gone, resized = index.shards["train"][2].key, index.shards["dev"][0].key
    store.delete(gone)
    with pytest.raises(DataIntegrityError, match=gone):
        check_dataset_listed(store, index)
    _write(store, per_shard=7)
    images, labels, _ = _data()
    store.put_bytes(resized, encode_shard(images[:2], labels[:2], np.arange(2), _originals(2)))
    with pytest.raises(DataIntegrityError, match=resized):
        check_dataset_listed(store, index)


def test_a_flipped_byte_passes_the_listing_check_and_is_caught_by_the_read(store):
    # The trade a task's worker makes: its check lists, and the read that needs a shard hashes it.
    index, _ = _write(store)
    damaged = index.shards["test"][1].key
    _flip_a_byte_on_disk(store, damaged)
    assert check_dataset_listed(store, index) == len(index.all_shards)
    with pytest.raises(DataIntegrityError, match=damaged):
        read_split(store, index, "test")
