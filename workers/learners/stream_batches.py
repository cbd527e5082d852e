"""Training batches of a task too large for memory, from the view's stream of shards.

Where the harness offers ``view.train_stream(seed)`` (a task above ``NEVIS_STREAM_TRAIN_BYTES``)
the built-in learners train from it instead of ``view.train()``: :class:`StreamBatches` yields
the same ``(x, y)`` pairs as the in-memory pipeline (the paper's crop and flip of the stored
originals, this rank's share of each batch), but its rows come a few shards at a time, read
ahead by the stream's thread. Its batches are a shuffle within a window of shards rather than
over the whole split, so they differ from the in-memory path's, deterministically per seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from workers.learners.augment import AugmentConfig, train_transform
from workers.learners.protocol import LabelledData, TaskView
from workers.stream.shard_stream import ShardStream


def train_source(view: TaskView, seed: int) -> LabelledData | ShardStream:
    """The view's stream of shards where it offers one (a large task), else ``view.train()``."""
    offer = getattr(view, "train_stream", None)
    stream = offer(seed) if callable(offer) else None
    return view.train() if stream is None else stream


def streamed(data: LabelledData | ShardStream) -> bool:
    """Whether ``data`` is a stream of shards (:func:`train_source` chose one)."""
    return isinstance(data, ShardStream)


class StreamBatches:
    """``steps`` augmented training batches ``(x, y)`` from a :class:`ShardStream`.

    Takes :class:`~workers.learners.input_pipeline.TrainBatches`' arguments; ``labels`` is
    unused (each batch brings its own) and ``generator`` too (the stream's seed orders rows).
    """

    def __init__(
        self,
        data: ShardStream,
        labels: Any,
        cfg: AugmentConfig,
        *,
        steps: int,
        batch: int,
        generator: torch.Generator,
        crops: torch.Generator,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
        **_: Any,
    ) -> None:
        self.stream, self.cfg, self.steps, self.batch = data, cfg, steps, batch
        self.crops, self.device = crops, torch.device(device)
        self.rank, self.world_size = rank, world_size

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        batches = self.stream.batches(self.batch)
        for _ in range(self.steps):
            rows = next(batches)
            share = np.arange(self.rank, len(rows), self.world_size)  # this rank's rows
            source, extents = rows.crop_source(share)
            x = train_transform(source, self.cfg, generator=self.crops, device=self.device, extents=extents)
            labels = rows.labels[share]
            y = torch.from_numpy(labels.astype(np.float32 if labels.ndim == 2 else np.int64))
            yield x, y.to(self.device, non_blocking=True)
        batches.close()  # stops the stream's reading thread


__all__ = ["StreamBatches", "streamed", "train_source"]
