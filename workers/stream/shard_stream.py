"""A task's train split read as a stream of shards, for tasks larger than memory.

``view.train()`` hands a learner the whole split as arrays; an ImageNet-sized task (1.2 M
images, tens of GB of originals) does not fit. :class:`ShardStream` reads it a few shards at a
time instead:

- each epoch visits the shards in a fresh order (seeded), and the rows of ``buffer_shards``
  shards at a time in a fresh order, so batches mix shards and classes;
- background threads read the next ``prefetch`` shards (fetch, checksum, decompress) while
  the learner trains on the current ones;
- it holds at most ``buffer_shards + prefetch`` shards (the pool being filled and those read
  ahead) and counts what it held (``peak_shards``, ``peak_bytes``);
- the same seed gives the same batches: the threads only read, all shuffling is done in the
  learner's thread, and shards are taken in their drawn order.

Reading goes through :func:`~workers.stream.shards.read_shard` (every shard checked against
its index), so a damaged shard fails as it does for ``view.train()``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import numpy as np

from services.store.objects.base import ObjectStore
from workers.stream.shards import DatasetIndex, ShardInfo, read_shard
from workers.stream.task_info import LabelledData, Originals

ReadShard = Callable[[ShardInfo], LabelledData]


class ShardStream:
    """Endless shuffled batches of one split, a few shards in memory at a time.

    Args:
        shards: the split's shards (from its index).
        read: one shard as :class:`LabelledData` (with originals where training crops them).
        seed: decides the shard order and the row order of every epoch.
        buffer_shards: shards whose rows are shuffled together.
        prefetch: shards read ahead (being read or read, not yet shuffled).
        readers: threads reading them (decompression and checksums release the GIL).
    """

    def __init__(
        self,
        shards: Sequence[ShardInfo],
        read: ReadShard,
        *,
        seed: int,
        buffer_shards: int = 2,
        prefetch: int = 2,
        readers: int = 2,
    ) -> None:
        if not shards:
            raise ValueError("The 'shards' parameter of ShardStream must name at least one shard.")
        if min(buffer_shards, prefetch, readers) < 1:
            raise ValueError(
                "The 'buffer_shards', 'prefetch' and 'readers' parameters of "
                "ShardStream must be ints in [1, inf). Got "
                f"{buffer_shards}, {prefetch}, {readers} instead."
            )
        self.shards, self.read, self.seed = tuple(shards), read, seed
        self.buffer_shards, self.prefetch, self.readers = buffer_shards, prefetch, readers
        self.peak_shards = self.peak_bytes = 0
        self._held: dict[int, int] = {}  # id of a shard's data -> its bytes, while held
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(s.num_examples for s in self.shards)

    @property
    def limit_shards(self) -> int:
        """The most shards it may hold at once: the pool being filled and those read ahead."""
        return self.buffer_shards + self.prefetch

    def batches(self, batch: int) -> Iterator[LabelledData]:
        """Batches of ``batch`` rows, epoch after epoch (a short tail joins the next pool)."""
        if batch < 1:
            raise ValueError(f"The 'batch' parameter must be an int in [1, inf). Got {batch}.")
        carry: LabelledData | None = None
        epoch = 0
        while True:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(len(self.shards))
            for pool in self._pools(order):
                rows = _concat([carry, *pool]) if carry is not None else _concat(pool)
                shuffled = rng.permutation(len(rows))
                full = len(shuffled) - len(shuffled) % batch
                for start in range(0, full, batch):
                    yield _take(rows, shuffled[start : start + batch])
                carry = _take(rows, shuffled[full:])
                for part in pool:  # counted as held until its rows are used up
                    self._release(part)
            epoch += 1

    def _pools(self, order: np.ndarray) -> Iterator[list[LabelledData]]:
        """The shards in ``order``, ``buffer_shards`` at a time, read ahead by ``readers``
        threads (taken in order, so the threads' timing never changes a batch)."""
        numbers = iter(order.tolist())
        with ThreadPoolExecutor(self.readers, thread_name_prefix="nevis-shard-stream") as threads:
            pending = deque(threads.submit(self._read, n) for n in islice(numbers, self.prefetch))
            try:
                pool: list[LabelledData] = []
                while pending:
                    pool.append(pending.popleft().result())
                    following = next(numbers, None)
                    if following is not None:
                        pending.append(threads.submit(self._read, following))
                    if len(pool) == self.buffer_shards:
                        yield pool
                        pool = []
                if pool:
                    yield pool
            finally:
                for future in pending:
                    future.cancel()

    def _read(self, number: int) -> LabelledData:
        return self._hold(self.read(self.shards[number]))

    def _hold(self, data: LabelledData) -> LabelledData:
        size = sum(a.nbytes for a in data.to_arrays())
        with self._lock:
            self._held[id(data)] = size
            self.peak_shards = max(self.peak_shards, len(self._held))
            self.peak_bytes = max(self.peak_bytes, sum(self._held.values()))
        return data

    def _release(self, data: LabelledData) -> None:
        with self._lock:
            self._held.pop(id(data), None)


def _concat(parts: Sequence[LabelledData]) -> LabelledData:
    originals = None
    if parts[0].originals is not None:
        originals = Originals(
            np.concatenate([p.originals.images for p in parts]), np.concatenate([p.originals.extents for p in parts])
        )
    return LabelledData(np.concatenate([p.images for p in parts]), np.concatenate([p.labels for p in parts]), originals)


def _take(data: LabelledData, rows: np.ndarray) -> LabelledData:
    originals = None if data.originals is None else data.originals.take(rows)
    return LabelledData(data.images[rows], data.labels[rows], originals)


def split_bytes(index: DatasetIndex, split: str) -> int:
    """What a split takes in memory read whole with its originals (images, originals)."""
    height, width = index.stored_shape
    per_row = 3 * (index.image_size**2 + height * width)
    return int(index.counts.get(split, 0)) * per_row


def store_stream(
    store: ObjectStore,
    index: DatasetIndex,
    split: str = "train",
    *,
    originals: bool = True,
    buffer_shards: int = 2,
    prefetch: int = 2,
    readers: int = 2,
) -> Callable[[int], ShardStream]:
    """A factory ``seed -> ShardStream`` over a prepared split in ``store`` (harness side)."""

    def read(shard: ShardInfo) -> LabelledData:
        images, labels, stored = read_shard(store, index, shard, originals)
        return LabelledData(images, labels, stored)

    return lambda seed: ShardStream(
        index.shards[split], read, seed=seed, buffer_shards=buffer_shards, prefetch=prefetch, readers=readers
    )


def large_train_stream(store: ObjectStore, index: DatasetIndex, threshold: int) -> Callable[[int], ShardStream] | None:
    """The train split's stream factory where it takes more than ``threshold`` bytes read
    whole (``NEVIS_STREAM_TRAIN_BYTES``), else ``None``: what a harness offers the view."""
    if not index.shards["train"] or split_bytes(index, "train") <= threshold:
        return None
    return store_stream(store, index, "train")


__all__ = ["ReadShard", "ShardStream", "large_train_stream", "split_bytes", "store_stream"]
