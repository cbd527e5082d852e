"""Streaming preparation (workers/stream/build.py) stores exactly what preparing in memory
stored: the same shards, byte for byte, the same dedup decisions and the same split, on the
mini stream's datasets and on a Parquet dataset of mixed sizes with duplicates across splits,
with shards and chunks small enough that each split spans several of both."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from services.store.objects import LocalObjectStore
from workers.ingest.writers.parquet_writer import ImageRow, write_parquet_dataset
from workers.stream.adapters import AdapterContext, get_adapter, split_key
from workers.stream.build import build_dataset
from workers.stream.dedup import dedup_splits
from workers.stream.images import ORIGINALS_METHOD, RESIZE_METHOD, source_shape_summary, stored_forms
from workers.stream.manifest import SplitRule
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import dataset_rules
from workers.stream.shards import DatasetIndex, write_dataset
from workers.stream.split_rule import split_rule_key
from workers.stream.splits import SplitAssignment, assign_splits
from workers.stream.train_order import TRAIN_ORDER_SEED, bucket_count, mixed_order, order_record

SIZE, SIDE = 16, 24


def _in_memory(store, task, ctx: AdapterContext, per_shard: int) -> DatasetIndex:
    """The in-memory path, as prepare.py composed it before streaming (train rows mixed)."""
    source, name = split_key(task.dataset)
    raw = get_adapter(source).load(name, ctx)
    images, originals = stored_forms(raw.images, SIZE, SIDE)
    assignment = assign_splits(
        raw.labels,
        rule=task.split,
        given=raw.given_splits,
        attributes=raw.attributes,
        dataset=f"Dataset {task.dataset!r}",
    )
    buckets = bucket_count(len(assignment.rows["train"]), per_shard)
    assignment, stats = dedup_splits(images, assignment)
    mixed = mixed_order(assignment.rows["train"], TRAIN_ORDER_SEED, buckets)
    assignment = SplitAssignment(rows={**assignment.rows, "train": mixed}, how=assignment.how)
    draft = DatasetIndex(
        dataset=task.dataset,
        kind=raw.kind,
        class_names=raw.class_names,
        image_size=SIZE,
        resize_method=RESIZE_METHOD,
        stored_side=SIDE,
        stored_shape=(int(originals.images.shape[1]), int(originals.images.shape[2])),
        originals_method=ORIGINALS_METHOD,
        split_rule=split_rule_key(task.split),
        split_how=assignment.how,
        counts={},
        shards={},
        dedup=stats.as_dict(),
        source_checksum=raw.source_checksum,
        source={**raw.metadata, "num_examples": raw.num_examples, "original_shape": source_shape_summary(raw.images)},
        train_order=order_record(TRAIN_ORDER_SEED, buckets),
    )
    return write_dataset(
        store,
        images=images,
        labels=raw.labels,
        originals=originals,
        split_rows=assignment.rows,
        index=draft,
        max_examples_per_shard=per_shard,
    )


def _contents(store: LocalObjectStore) -> dict[str, bytes]:
    return {key: store.get_bytes(key) for key in store.list("")}


def _same_as_in_memory(task, ctx: AdapterContext, tmp_path: Path, per_shard: int, chunk: int) -> DatasetIndex:
    memory, streamed = LocalObjectStore(tmp_path / "memory"), LocalObjectStore(tmp_path / "stream")
    expected = _in_memory(memory, task, ctx, per_shard)
    stages: list[str] = []
    index = build_dataset(streamed, task, ctx, SIDE, per_shard, stages.append, chunk_rows=chunk)
    assert stages == ["load", "split", "write"]
    assert index == expected
    got, want = _contents(streamed), _contents(memory)
    assert sorted(got) == sorted(want)
    assert all(got[key] == want[key] for key in want), "a shard's bytes differ"
    return index


@pytest.mark.parametrize("dataset", list(dataset_rules(load_stream("mini"))))
def test_mini_datasets_stream_to_the_same_shards(dataset, tmp_path):
    task = dataset_rules(load_stream("mini"))[dataset]
    index = _same_as_in_memory(task, AdapterContext(image_size=SIZE), tmp_path, 400, 150)
    assert len(index.shards["train"]) > 1  # several shards and chunks per split


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_mixed_sizes_with_duplicates_stream_to_the_same_shards(tmp_path):
    """Rows of four extents, grey and RGB, PNG and raw, in small row groups; every fifth row
    repeats an earlier one, so duplicates fall within and across splits."""
    rng = np.random.RandomState(3)
    shapes = [(40, 120, 3), (120, 40, 3), (30, 30, 1), (64, 48, 3)]
    images = []
    for k in range(240):
        if k % 5 == 4:
            images.append(images[k // 2])
        else:
            images.append(rng.randint(0, 256, size=shapes[k % 4], dtype=np.uint8))
    rows = (
        ImageRow(
            image=_png(image[..., 0] if image.shape[-1] == 1 else image) if k % 2 else image,
            label=k % 3,
            attributes={"part": k % 7},
        )
        for k, image in enumerate(images)
    )
    write_parquet_dataset(rows, tmp_path / "mixed.parquet", class_names=["a", "b", "c"], row_group_rows=32)
    task = replace(
        dataset_rules(load_stream("mini"))["sklearn:digits"],
        dataset="parquet:mixed",
        split=SplitRule(kind="random", seed=5),
        num_classes=3,
    )
    ctx = AdapterContext(offline_dir=tmp_path, image_size=SIZE)
    index = _same_as_in_memory(task, ctx, tmp_path, 50, 17)
    assert index.dedup["total_removed"] > 0
    assert sum(index.dedup["removed_across_splits"].values()) > 0
    assert index.stored_shape == (24, 24)  # the dataset's canvas, not one chunk's
