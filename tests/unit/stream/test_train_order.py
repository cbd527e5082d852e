"""Train rows are stored class-mixed (issue 47, item 3): a source listed class after class,
prepared in small shards and read as a stream of shards, gives every class in its first 1,024
rows; the order is the seeded one the index records, and the same on every build."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest

from services.store.objects import LocalObjectStore
from workers.ingest.writers.parquet_writer import ImageRow, write_parquet_dataset
from workers.stream.adapters import AdapterContext
from workers.stream.build import build_dataset
from workers.stream.manifest import SplitRule
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import dataset_rules
from workers.stream.shard_stream import store_stream
from workers.stream.shards import read_shard
from workers.stream.train_order import TRAIN_ORDER_SEED, BucketMixer, bucket_count, buckets_of, mixed_order

SIZE, SIDE, PER_SHARD, CLASSES, PER_CLASS = 8, 12, 128, 20, 200


@pytest.fixture(scope="module")
def sorted_source(tmp_path_factory):
    """(task, context): 20 classes of 200 distinct 8x8 images, listed class after class."""
    folder = tmp_path_factory.mktemp("sorted")
    rng = np.random.default_rng(0)
    rows = (
        ImageRow(image=rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), label=k // PER_CLASS)
        for k in range(CLASSES * PER_CLASS)
    )
    write_parquet_dataset(
        rows, folder / "sorted.parquet", class_names=[f"c{i}" for i in range(CLASSES)], row_group_rows=200
    )
    task = replace(
        dataset_rules(load_stream("mini"))["sklearn:digits"],
        dataset="parquet:sorted",
        split=SplitRule(kind="random", seed=5),
        num_classes=CLASSES,
    )
    return task, AdapterContext(offline_dir=folder, image_size=SIZE)


@pytest.fixture(scope="module")
def built(sorted_source, tmp_path_factory):
    task, ctx = sorted_source
    store = LocalObjectStore(tmp_path_factory.mktemp("store"))
    return store, build_dataset(store, task, ctx, SIDE, PER_SHARD, lambda stage: None)


def test_the_first_1024_streamed_rows_hold_every_class(built):
    store, index = built
    assert index.counts["train"] > 1024 and len(index.shards["train"]) > 8
    batches = store_stream(store, index, originals=False)(7).batches(64)
    labels = np.concatenate([next(batches).labels for _ in range(1024 // 64)])
    assert set(labels.tolist()) == set(range(CLASSES))
    share = np.bincount(labels, minlength=CLASSES) / len(labels)
    assert share.max() < 3 / CLASSES  # in proportion, not a few classes at a time


def test_every_train_shard_mixes_classes(built):
    store, index = built
    for shard in index.shards["train"]:
        _, labels, _ = read_shard(store, index, shard)
        assert len(set(labels.tolist())) >= CLASSES // 2, shard.key  # source order: 1 or 2


def test_the_stored_order_is_the_recorded_one(built, sorted_source, tmp_path):
    store, index = built
    order = index.train_order
    assert order["seed"] == TRAIN_ORDER_SEED  # no duplicates here: kept = drawn train rows
    assert order["buckets"] == bucket_count(index.counts["train"], PER_SHARD) > 1
    stored = np.concatenate([np.load(io.BytesIO(store.get_bytes(s.key)))["rows"] for s in index.shards["train"]])
    assert not np.array_equal(stored, np.sort(stored))
    assert np.array_equal(stored, mixed_order(stored, order["seed"], order["buckets"]))
    again = build_dataset(LocalObjectStore(tmp_path), *sorted_source, SIDE, PER_SHARD, lambda stage: None)
    assert again == index  # same seed, same shards (checksums in the index)
    assert not list(store.list(f"{index.key.rsplit('/', 1)[0]}/stage"))  # set-aside parts gone


def test_the_mixer_sets_full_buckets_aside_and_gives_the_same_order(tmp_path):
    store = LocalObjectStore(tmp_path)
    mixer = BucketMixer(store, "d", seed=3, buckets=4, buffer_rows=40)
    rows = np.arange(0, 300, 2)
    for row in rows.tolist():
        mixer.add(
            row, np.full((2, 2, 3), row % 256, np.uint8), np.zeros((3, 3, 3), np.uint8), np.array([3, 3], np.int32)
        )
    assert any(mixer.staged) and list(store.list("d/stage"))
    out = list(mixer.drain())
    assert [r[0] for r in out] == mixed_order(rows, 3, 4).tolist()
    assert all(int(r[1][0, 0, 0]) == r[0] % 256 for r in out)  # pixels travel with their row
    assert not list(store.list("d/stage"))
    assert set(np.bincount(buckets_of(rows, 3, 4)).tolist()) != {len(rows)}  # hash spreads


def test_prepare_rebuilds_an_index_whose_train_rows_are_in_source_order(sorted_source, tmp_path):
    import json

    from workers.stream.prepare import prepare_stream

    task, ctx = sorted_source
    manifest = replace(load_stream("mini"), name="sorted", tasks=(task,))
    store = LocalObjectStore(tmp_path)
    first = prepare_stream(
        manifest,
        store,
        image_size=SIZE,
        offline_dir=ctx.offline_dir,
        max_examples_per_shard=PER_SHARD,
        stored_scale=SIDE / SIZE,
    )
    key = first.datasets[0].index_key
    doc = json.loads(store.get_bytes(key))
    assert doc["train_order"]["seed"] == TRAIN_ORDER_SEED
    del doc["train_order"]  # as written before train rows were mixed
    store.put_bytes(key, json.dumps(doc).encode())
    again = prepare_stream(
        manifest,
        store,
        image_size=SIZE,
        offline_dir=ctx.offline_dir,
        max_examples_per_shard=PER_SHARD,
        stored_scale=SIDE / SIZE,
    )
    assert again.datasets[0].status == "rebuilt"
    assert json.loads(store.get_bytes(key))["train_order"]["seed"] == TRAIN_ORDER_SEED
