"""Build one dataset's shards in bounded memory (the work of ``nevis data prepare``).

A dataset of any size is prepared without holding its pixels: only its small columns
(labels, extents, splits, attributes) are read whole. Then

1. its splits are assigned from labels and attributes alone (no pixels needed);
2. the splits are visited in the dedup keep order (test, dev_test, dev, train), each split's
   rows ascending, a chunk of rows at a time; each chunk is decoded once into both stored
   forms (:func:`~workers.stream.images.stored_forms`, on the dataset's canvas, known from
   the extents);
3. a row whose evaluation image was already seen is dropped
   (:class:`~workers.stream.dedup.FirstCopies`, the same decisions as
   :func:`~workers.stream.dedup.dedup_splits`), and kept rows fill a shard, written when full;
4. kept train rows are first mixed (:mod:`workers.stream.train_order`: seeded, recorded in
   the index as ``train_order``), so every train shard holds the classes in proportion.

Memory is one chunk, about two shards and one digest per distinct image, whatever the
dataset's size; the shards and the index are byte for byte those of building the dataset in
memory (``stored_forms`` + ``dedup_splits`` + ``mixed_order`` of train + ``write_dataset``),
which a test checks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from services.core.errors import DatasetFormatError
from services.store import key_layout
from services.store.objects.base import ObjectStore
from workers.stream.adapters import AdapterContext, RawDataset, get_adapter, split_key
from workers.stream.dedup import KEEP_ORDER, FirstCopies
from workers.stream.image_rows import ImageRows
from workers.stream.images import (
    ORIGINALS_METHOD,
    RESIZE_METHOD,
    SourceImages,
    originals_canvas,
    source_shape_summary,
    stored_forms,
)
from workers.stream.imported_splits import check_split_mode
from workers.stream.manifest import SPLITS, TaskSpec
from workers.stream.pinned_data import check_counts
from workers.stream.shards import DatasetIndex, ShardInfo, dataset_prefix, encode_shard, sha256_hex
from workers.stream.split_rule import split_rule_key
from workers.stream.split_salt import salt_digest
from workers.stream.splits import SplitAssignment, assign_splits
from workers.stream.task_info import Originals
from workers.stream.train_order import TRAIN_ORDER_SEED, BucketMixer, bucket_count, order_record

DEFAULT_CHUNK_ROWS = 1024
"""Rows decoded together (at most one shard's worth): the decoded part of the peak memory."""


def build_dataset(
    store: ObjectStore,
    task: TaskSpec,
    ctx: AdapterContext,
    side: int,
    max_per_shard: int,
    stage: Callable[[str], None],
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    *,
    accept_count_change: bool = False,
    split_salt: str = "",
) -> DatasetIndex:
    """Load, split, then resize, dedup and write one dataset shard by shard; its index.

    ``split_salt`` is the deployment's secret salt for split draws (""), of which the index
    records only a digest.

    Raises:
        CountMismatchError: the data's classes differ from the task's, or a catalogue
            source's classes or rows per split from its pinned counts, and not
            ``accept_count_change`` (nothing is written then).
        DatasetFormatError: a file imported to keep the reference's splits, under a rule that
            would re-deal it (:mod:`workers.stream.imported_splits`).
    """
    stage("load")
    source, name = split_key(task.dataset)
    raw = get_adapter(source).load(name, ctx)
    if raw.kind != task.kind:
        raise DatasetFormatError(
            f"Dataset {task.dataset!r} is {raw.kind}-label, but task {task.order} says "
            f"{task.kind}-label; fix the manifest or the dataset."
        )
    check_split_mode(task, raw)
    counts = check_counts(task, raw, accept=accept_count_change)
    stage("split")
    assignment = assign_splits(
        raw.labels,
        rule=task.split,
        given=raw.given_splits,
        attributes=raw.attributes,
        dataset=f"Dataset {task.dataset!r}",
        salt=split_salt,
    )
    stage("write")
    prefix = dataset_prefix(task.dataset, ctx.image_size)
    for key in sorted(store.list(prefix), key=lambda k: not k.endswith("/index.json")):
        store.delete(key)  # index first: a half-replaced dataset never looks complete
    draft = DatasetIndex(
        dataset=task.dataset,
        kind=raw.kind,
        class_names=raw.class_names,
        image_size=ctx.image_size,
        resize_method=RESIZE_METHOD,
        stored_side=side,
        stored_shape=originals_canvas(raw.images, side),
        originals_method=ORIGINALS_METHOD,
        split_rule=split_rule_key(task.split),
        split_how=assignment.how,
        counts={},
        shards={},
        dedup={},
        source_checksum=raw.source_checksum,
        source={
            **raw.metadata,
            "num_examples": raw.num_examples,
            "original_shape": source_shape_summary(raw.images),
            **counts,
        },
        split_salt=salt_digest(split_salt),
    )
    return write_streaming(store, raw, assignment, draft, max_per_shard, chunk_rows)


def write_streaming(
    store: ObjectStore,
    raw: RawDataset,
    assignment: SplitAssignment,
    draft: DatasetIndex,
    max_per_shard: int,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> DatasetIndex:
    """Every split's kept rows as shards, then the index (last); ``draft`` gives the rest."""
    if max_per_shard < 1 or chunk_rows < 1:
        raise ValueError(
            "The 'max_per_shard' and 'chunk_rows' parameters of write_streaming "
            f"must be ints in [1, inf). Got {max_per_shard}, {chunk_rows} instead."
        )
    first, step = FirstCopies(), min(chunk_rows, max_per_shard)
    shards: dict[str, tuple[ShardInfo, ...]] = {}
    buckets = bucket_count(len(assignment.rows["train"]), max_per_shard)
    for split in KEEP_ORDER:
        writer = _ShardWriter(store, draft, split, raw.labels, max_per_shard)
        mixer = (
            BucketMixer(store, writer.prefix, seed=TRAIN_ORDER_SEED, buckets=buckets, buffer_rows=max_per_shard)
            if split == "train"
            else None
        )
        take = writer.add if mixer is None else mixer.add
        rows = np.sort(np.asarray(assignment.rows[split], dtype=np.int64))
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            squares, originals = stored_forms(
                _take(raw.images, part), draft.image_size, draft.stored_side, draft.stored_shape
            )
            for j, row in enumerate(part.tolist()):
                if first.keep(split, hashlib.sha256(squares[j].tobytes()).digest()):
                    take(row, squares[j], originals.images[j], originals.extents[j])
        for row_data in mixer.drain() if mixer is not None else ():
            writer.add(*row_data)
        shards[split] = writer.close()
    counts = {s: sum(p.num_examples for p in shards[s]) for s in SPLITS}
    final = replace(
        draft,
        counts=counts,
        shards={s: shards[s] for s in SPLITS},
        dedup=first.stats.as_dict(),
        split_how=first.how(assignment.how),
        train_order=order_record(TRAIN_ORDER_SEED, buckets),
    )
    store.put_bytes(final.key, final.to_json())
    return final


def _take(images: SourceImages, rows: np.ndarray) -> SourceImages:
    """The rows ``rows`` of a source, pixels decoded only when read (ImageRows)."""
    return images.take(rows) if isinstance(images, ImageRows) else images[rows]


class _ShardWriter:
    """One split's kept rows, stored a full shard at a time (``<split>-00000.npz``, ...)."""

    def __init__(self, store: ObjectStore, index: DatasetIndex, split: str, labels: np.ndarray, capacity: int) -> None:
        self.store, self.split, self.labels, self.capacity = store, split, labels, capacity
        self.prefix = dataset_prefix(index.dataset, index.image_size)
        size, (height, width) = index.image_size, index.stored_shape
        self.squares = np.empty((capacity, size, size, 3), np.uint8)
        self.originals = np.empty((capacity, height, width, 3), np.uint8)
        self.extents = np.empty((capacity, 2), np.int32)
        self.rows: list[int] = []
        self.written: list[ShardInfo] = []

    def add(self, row: int, square: np.ndarray, original: np.ndarray, extent: np.ndarray) -> None:
        i = len(self.rows)
        self.squares[i], self.originals[i], self.extents[i] = square, original, extent
        self.rows.append(row)
        if len(self.rows) == self.capacity:
            self._flush()

    def close(self) -> tuple[ShardInfo, ...]:
        if self.rows:
            self._flush()
        return tuple(self.written)

    def _flush(self) -> None:
        n, rows = len(self.rows), np.asarray(self.rows, dtype=np.int64)
        data = encode_shard(self.squares[:n], self.labels[rows], rows, Originals(self.originals[:n], self.extents[:n]))
        info = self.store.put_bytes(key_layout.shard_key(self.prefix, self.split, len(self.written)), data)
        self.written.append(ShardInfo(info.key, info.size, sha256_hex(data), n))
        self.rows = []


__all__ = ["DEFAULT_CHUNK_ROWS", "build_dataset", "write_streaming"]
