"""ShardStream's guarantees on shards made here: every row once per epoch (less the tail it
carries over), never more than buffer + prefetch shards held, the same batches whatever its
readers' timing, and a shard that fails to read fails the learner's thread."""

from __future__ import annotations

import time

import numpy as np
import pytest

from services.core.errors import DataIntegrityError
from workers.stream.shard_stream import ShardStream
from workers.stream.shards import ShardInfo
from workers.stream.task_info import LabelledData, Originals

ROWS, SHARDS = 10, 12


def _shards() -> list[ShardInfo]:
    return [ShardInfo(f"train-{k:05d}.npz", 0, "", ROWS) for k in range(SHARDS)]


def _read(shard: ShardInfo, delay: float = 0.0) -> LabelledData:
    """Shard k holds rows k*ROWS ... (row id in its pixels and as its label)."""
    k = int(shard.key[6:11])
    if delay:
        time.sleep(delay * ((k * 7) % 3))  # readers finish out of order
    rows = np.arange(k * ROWS, (k + 1) * ROWS)
    images = np.repeat(rows.astype(np.uint8)[:, None, None, None], 3, axis=-1) * np.ones((1, 2, 2, 3), np.uint8)
    originals = Originals(np.zeros((ROWS, 3, 3, 3), np.uint8), np.full((ROWS, 2), 3, np.int32))
    return LabelledData(images, rows, originals)


def _labels(stream: ShardStream, batch: int, count: int) -> np.ndarray:
    batches = stream.batches(batch)
    out = np.concatenate([next(batches).labels for _ in range(count)])
    batches.close()
    return out


def test_an_epoch_covers_every_row_once_and_holds_a_few_shards():
    stream = ShardStream(_shards(), _read, seed=1, buffer_shards=2, prefetch=3, readers=2)
    seen = _labels(stream, 8, SHARDS * ROWS // 8)  # 120 rows: exactly one epoch
    assert sorted(seen.tolist()) == list(range(SHARDS * ROWS))
    assert not np.array_equal(seen, np.sort(seen))  # shuffled
    assert 1 <= stream.peak_shards <= stream.limit_shards == 5 < SHARDS


def test_batches_depend_on_the_seed_only_not_on_the_readers():
    slow = ShardStream(_shards(), lambda s: _read(s, 0.01), seed=4, readers=3, prefetch=3)
    quick = ShardStream(_shards(), _read, seed=4, readers=1, prefetch=1)
    np.testing.assert_array_equal(_labels(slow, 16, 20), _labels(quick, 16, 20))
    assert not np.array_equal(_labels(quick, 16, 20), _labels(ShardStream(_shards(), _read, seed=5), 16, 20))


def test_a_shard_that_fails_to_read_fails_the_learners_thread():
    def damaged(shard: ShardInfo) -> LabelledData:
        if shard.key.endswith("00003.npz"):
            raise DataIntegrityError(f"Shard {shard.key} does not match its index")
        return _read(shard)

    with pytest.raises(DataIntegrityError, match="00003"):
        _labels(ShardStream(_shards(), damaged, seed=0), 8, 40)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least one shard"):
        ShardStream([], _read, seed=0)
    with pytest.raises(ValueError, match="readers"):
        ShardStream(_shards(), _read, seed=0, readers=0)
