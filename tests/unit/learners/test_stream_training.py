"""A task larger than the memory it is allowed trains as a stream of shards (issue 21, item 4).

``indep_small`` trains on a prepared mini task whose train split takes more bytes than the
threshold (set tiny here, as ``NEVIS_STREAM_TRAIN_BYTES`` would be for ImageNet): it never asks
for the split whole, the stream holds at most its limit of shards (a few of the split's many),
and what Python allocated at its peak (tracemalloc: numpy arrays included) stays below the
split's size. The stream is deterministic per seed.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from services.store.objects import LocalObjectStore
from workers.learners.loading import load_learner
from workers.learners.protocol import LabelledData
from workers.stream.adapters import AdapterContext
from workers.stream.build import build_dataset
from workers.stream.images import stored_side
from workers.stream.manifest_files import load_stream
from workers.stream.shard_stream import ShardStream, large_train_stream, split_bytes, store_stream
from workers.stream.shards import read_labelled
from workers.stream.task_data import load_task_index
from workers.stream.task_info import task_info
from workers.stream.task_view import CausalTaskView

from .conftest import RecordingContext

SIZE, PER_SHARD = 32, 48


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Digits prepared in small shards (about 1,100 train rows in 23 shards)."""
    task = next(t for t in load_stream("mini").tasks if t.dataset == "sklearn:digits")
    store = LocalObjectStore(tmp_path_factory.mktemp("stream") / "store")
    build_dataset(store, task, AdapterContext(image_size=SIZE), stored_side(SIZE, 1.5), PER_SHARD, lambda stage: None)
    return store, task, load_task_index(store, task, image_size=SIZE)


def test_indep_small_trains_a_large_task_from_a_bounded_stream(prepared):
    store, task, index = prepared
    factory = large_train_stream(store, index, threshold=1)  # every task is "large"
    assert factory is not None and large_train_stream(store, index, 1 << 40) is None
    made: list[ShardStream] = []

    def offer(seed: int) -> ShardStream:
        made.append(factory(seed))
        return made[-1]

    def never() -> LabelledData:
        raise AssertionError("the learner asked for the large train split whole")

    dev = read_labelled(store, index, "dev", originals=False)
    view = CausalTaskView(task_info(task, index, SIZE), never, dev, {}, lambda o: dev, 1, train_stream=offer)
    learner, ctx = load_learner("indep_small"), RecordingContext(seed=3, steps=12)
    learner.train(view, None, {}, RecordingContext(steps=2))  # imports and caches, once
    made.clear()
    tracemalloc.start()
    try:
        learner.train(view, None, {"learning_rate": 0.05}, ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    stream = made[0]
    total = split_bytes(index, "train")
    assert len(index.shards["train"]) >= 20  # the split is many shards ...
    assert 1 <= stream.peak_shards <= stream.limit_shards == 4  # ... of which a few are held
    assert stream.peak_bytes < total / 4
    assert peak < total, f"tracemalloc peak {peak} B, the split takes {total} B"
    assert len(ctx.losses) == 13 and all(np.isfinite(x) for x in ctx.losses[1:])


def test_the_stream_is_deterministic_per_seed_and_covers_every_row_each_epoch(prepared):
    store, _, index = prepared
    factory = store_stream(store, index, "train", originals=False, buffer_shards=3)
    n = len(factory(0))

    def rows(seed: int, count: int) -> np.ndarray:
        batches = factory(seed).batches(16)
        out = np.concatenate([next(batches).labels for _ in range(count)])
        batches.close()
        return out

    first = rows(5, n // 16)
    np.testing.assert_array_equal(first, rows(5, n // 16))
    assert not np.array_equal(first, rows(6, n // 16))
    whole = read_labelled(store, index, "train", originals=False).labels
    covered = first[: n - n % 16]  # an epoch, less the tail carried into the next one
    counts = np.bincount(whole, minlength=10) - np.bincount(covered, minlength=10)
    assert counts.min() >= 0 and counts.sum() == n % 16
