"""A streamed task's train split inside the learner host: shards asked of harness code one at a time.

A task whose train split is larger than ``NEVIS_STREAM_TRAIN_BYTES`` is not sent to the host
whole. The host holds no store credentials, so it cannot read the shards itself: it asks the
harness for each one (``train_shard``), which reads and verifies it and sends its rows. The
view then offers the split as :class:`~workers.stream.shard_stream.ShardStream` batches (what
the built-in learners train from) and, if a learner asks for it whole, assembles it (its own
memory limit is the learner's to respect).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from services.core.errors import CausalityError
from workers.learners.protocol import LabelledData
from workers.sandbox.ops import HostOp, frame
from workers.stream.shard_stream import ShardStream
from workers.stream.shards import ShardInfo

Ask = Callable[[dict, list], tuple[dict, list]]
"""Sends a request frame to harness code and returns its answer (header, parts)."""


class WireShards:
    """The train split of a streamed task, as shards fetched through ``ask``."""

    def __init__(self, rows: Sequence[int], ask: Ask) -> None:
        if not rows or any(int(n) < 0 for n in rows):
            raise ValueError(f"A streamed split needs one or more shards of rows. Got {list(rows)!r} instead.")
        self.shards = tuple(
            ShardInfo(key=str(number), size=0, sha256="", num_examples=int(n)) for number, n in enumerate(rows)
        )
        self._ask = ask
        self.fetched = 0  # shards asked for, all streams and wholes together

    def __len__(self) -> int:
        return sum(s.num_examples for s in self.shards)

    def read(self, shard: ShardInfo) -> LabelledData:
        """One shard's rows with the originals training crops (harness code checked it)."""
        header, parts = self._ask(frame(HostOp.TRAIN_SHARD, shard=int(shard.key)), [])
        if not header.get("ok"):
            raise CausalityError(str(header.get("message", "not available")))
        self.fetched += 1
        return LabelledData.from_arrays(parts)

    def stream(self, seed: int) -> ShardStream:
        """Shuffled batches, a few shards in memory at a time (``view.train_stream(seed)``)."""
        return ShardStream(self.shards, self.read, seed=seed)

    def whole(self) -> LabelledData:
        """Every shard in order, joined (``view.train()`` of a streamed task)."""
        parts = [self.read(shard).to_arrays() for shard in self.shards]
        return LabelledData.from_arrays([np.concatenate(column) for column in zip(*parts, strict=True)])


__all__ = ["Ask", "WireShards"]
