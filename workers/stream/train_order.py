"""The order train rows are stored in: class-mixed, seeded, reproducible from the index.

Sources list their rows class after class (ImageNet's per-class tars, DomainNet sorted by
class within each domain). Stored in that order, a shard held a few classes and a stream
that shuffles within two shards (:mod:`.shard_stream`) drew each batch from a handful of
them. So the train split is stored in a mixed order, still in bounded memory:

1. each kept train row goes to one of ``B`` buckets by a seeded hash of its row id
   (``B`` = train rows / rows per shard, rounded up, so a bucket holds about one shard);
2. each bucket's rows, ascending, are permuted by ``default_rng([seed, bucket])``;
3. the buckets follow each other (0, 1, ...), and shards are cut from that sequence.

Every shard is then a uniform random sample of the split, so any window of a stream holds
the classes in proportion. Buckets fill while rows are decoded in ascending order; a bucket
whose buffer is full is set aside in the store (``<prefix>/stage/``) and read back when its
turn comes, so memory stays about two shards whatever the split's size. The index records
``seed`` and ``buckets``; each shard's ``rows`` array records the permutation itself, and
:func:`mixed_order` recomputes it from the kept rows.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np

from services.store import key_layout
from services.store.objects.base import ObjectStore

TRAIN_ORDER_SEED = 22
METHOD = "train rows hashed into buckets of about one shard, each bucket permuted (seeded)"
_MIX = np.uint64(0x9E3779B97F4A7C15)


def bucket_count(rows: int, per_bucket: int) -> int:
    """Buckets for ``rows`` train rows (before dedup) at ``per_bucket`` rows each, at least 1."""
    if per_bucket < 1:
        raise ValueError(f"The 'per_bucket' parameter must be an int in [1, inf). Got {per_bucket}.")
    return max(1, -(-int(rows) // per_bucket))


def buckets_of(rows: np.ndarray, seed: int, buckets: int) -> np.ndarray:
    """The bucket of each row id: a splitmix64 hash of (row, seed), modulo ``buckets``."""
    with np.errstate(over="ignore"):
        z = np.asarray(rows, dtype=np.uint64) + np.uint64(seed) * _MIX + _MIX
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(buckets)).astype(np.int64)


def bucket_permutation(size: int, seed: int, bucket: int) -> np.ndarray:
    """The order of a bucket's ``size`` rows (taken ascending) in the stored sequence."""
    return np.random.default_rng([seed, bucket]).permutation(size)


def mixed_order(rows: np.ndarray, seed: int, buckets: int) -> np.ndarray:
    """The kept train rows in their stored order (what the shards' ``rows`` hold, in turn)."""
    rows = np.sort(np.asarray(rows, dtype=np.int64))
    of = buckets_of(rows, seed, buckets)
    parts = [rows[of == b] for b in range(buckets)]
    return np.concatenate(
        [p[bucket_permutation(len(p), seed, b)] for b, p in enumerate(parts)] or [np.zeros(0, np.int64)]
    )


def order_record(seed: int, buckets: int) -> dict[str, Any]:
    """What the index records of the train order (enough to recompute it)."""
    return {"method": METHOD, "seed": int(seed), "buckets": int(buckets)}


Row = tuple[int, np.ndarray, np.ndarray, np.ndarray]  # row id, square, original, extent


class BucketMixer:
    """Takes kept train rows in ascending order; gives them back in :func:`mixed_order`.

    Args:
        store, prefix: where full bucket buffers are set aside (``<prefix>/stage/``).
        seed, buckets: the order's parameters.
        buffer_rows: rows held in memory over all buckets before a bucket is set aside.
    """

    def __init__(self, store: ObjectStore, prefix: str, *, seed: int, buckets: int, buffer_rows: int) -> None:
        self.store, self.prefix, self.seed, self.buckets = store, prefix, seed, buckets
        self.per_bucket = max(16, -(-buffer_rows // buckets))
        self.held: list[list[Row]] = [[] for _ in range(buckets)]
        self.staged: list[list[str]] = [[] for _ in range(buckets)]

    def add(self, row: int, square: np.ndarray, original: np.ndarray, extent: np.ndarray) -> None:
        bucket = int(buckets_of(np.asarray([row]), self.seed, self.buckets)[0])
        self.held[bucket].append((row, square.copy(), original.copy(), np.array(extent)))
        if len(self.held[bucket]) >= self.per_bucket:
            self._set_aside(bucket)

    def drain(self) -> Iterator[Row]:
        """Every row, bucket by bucket, each bucket permuted; set-aside parts are deleted."""
        for bucket in range(self.buckets):
            rows = [r for key in self.staged[bucket] for r in self._read(key)] + self.held[bucket]
            self.held[bucket] = []
            for i in bucket_permutation(len(rows), self.seed, bucket).tolist():
                yield rows[i]
            for key in self.staged[bucket]:
                self.store.delete(key)

    def _set_aside(self, bucket: int) -> None:
        rows = self.held[bucket]
        buffer = io.BytesIO()
        np.savez(
            buffer,
            rows=np.asarray([r[0] for r in rows], np.int64),
            squares=np.stack([r[1] for r in rows]),
            originals=np.stack([r[2] for r in rows]),
            extents=np.stack([r[3] for r in rows]),
        )
        key = key_layout.stage_key(self.prefix, bucket, len(self.staged[bucket]))
        self.store.put_bytes(key, buffer.getvalue())
        self.staged[bucket].append(key)
        self.held[bucket] = []

    def _read(self, key: str) -> list[Row]:
        with np.load(io.BytesIO(self.store.get_bytes(key)), allow_pickle=False) as part:
            rows, squares = part["rows"], part["squares"]
            originals, extents = part["originals"], part["extents"]
        return [(int(rows[i]), squares[i], originals[i], extents[i]) for i in range(len(rows))]


__all__ = [
    "METHOD",
    "TRAIN_ORDER_SEED",
    "BucketMixer",
    "bucket_count",
    "bucket_permutation",
    "buckets_of",
    "mixed_order",
    "order_record",
]
