"""Training batches for the built-in learners, made where the network runs, ready before it asks.

Why: at the paper's scale (ResNet-34, 64 px) an accelerator trains far more images per second
than a Python loop on a few CPU cores crops. So the crop source (the stored originals, or the
task images where none were sent) is, in order of preference:

1. *resident* on the accelerator: copied there once as uint8 when it fits in a share of the
   device's free memory; each step is then an index, a gather and :func:`crop_flip` on the
   device, and the host only draws the random numbers;
2. *streamed*: each step's rows gathered on the host into pinned memory by a background thread
   one step ahead, copied with ``non_blocking=True`` and cropped on the device;
3. on CPUs, the same batched :func:`crop_flip` inline (a thread would only compete for cores).

Random draws are exactly those of the loop they replace: each step draws its batch order
(``epoch_batches`` over ``generator``) and then its crops (``crops``), in step order, in one
thread. Prefetching is refused when something else draws from those generators between steps
(an auxiliary objective), since drawing one step ahead would reorder its draws.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from workers.learners.augment import AugmentConfig, crop_params
from workers.learners.batch_crop import crop_flip
from workers.learners.protocol import LabelledData
from workers.learners.training import epoch_batches

RESIDENT_SHARE = 0.25
"""The largest share of the device's free memory a resident crop source may take."""


@dataclass
class InputTimes:
    """Seconds the training loop waited for batches (host work not hidden by prefetching)."""

    waited: float = 0.0
    batches: int = 0


@dataclass
class _Draws:
    """One step's host-side work: its rows (this rank's share), crop matrices and rows' data."""

    index: torch.Tensor
    theta: torch.Tensor
    extents: torch.Tensor | None
    rows: torch.Tensor | None  # uint8 rows gathered on the host (streamed and CPU modes)
    labels: torch.Tensor


class TrainBatches:
    """``steps`` augmented training batches ``(x, y)`` of ``data`` on ``device``.

    Args:
        data: the training split; its originals are cropped where present.
        labels: the loss's targets for every row (``training.label_tensor``).
        cfg: the crop, flip and normalisation.
        steps, batch: the step budget and the global batch size.
        generator: draws the batch order (shared by every rank).
        crops: draws the crops and flips (``generator`` itself for a one-worker trial).
        device: where batches are made and returned.
        rank, world_size: this worker's share of each batch (rows ``rank::world_size``).
        prefetch: prepare the next batch in a background thread on CUDA (on CPUs only with
            ``prefetch_on_cpu``, where it competes with the step for the cores).
        resident: ``None``: keep the source on CUDA devices when it fits; ``False``: stream.
        channels_last: batches in channels-last memory; ``None``: on CUDA only (as
            :class:`~workers.learners.acceleration.Acceleration`'s default for the network).
    """

    def __init__(
        self,
        data: LabelledData,
        labels: torch.Tensor,
        cfg: AugmentConfig,
        *,
        steps: int,
        batch: int,
        generator: torch.Generator,
        crops: torch.Generator,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
        prefetch: bool = True,
        resident: bool | None = None,
        channels_last: bool | None = None,
        prefetch_on_cpu: bool = False,
    ) -> None:
        self.cfg, self.device = cfg, torch.device(device)
        self.rank, self.world_size = rank, world_size
        self.labels, self.crops = labels, crops
        self.order = epoch_batches(len(data), batch, steps, generator)
        if data.originals is None:
            self.images, self.extents = data.images, None
        else:
            self.images, self.extents = data.originals.images, data.originals.extents
        self.canvas = (int(self.images.shape[1]), int(self.images.shape[2]))
        cuda = self.device.type == "cuda"
        self.channels_last = cuda if channels_last is None else channels_last
        self.source = self._resident() if cuda and resident is not False else None
        self.prefetch = prefetch and self.source is None and (cuda or prefetch_on_cpu)
        self.times = InputTimes()

    def _resident(self) -> torch.Tensor | None:
        """The whole crop source on the device as uint8, or ``None`` if it would not fit."""
        free, _ = torch.cuda.mem_get_info(self.device)
        if self.images.nbytes > RESIDENT_SHARE * free:
            return None
        return torch.from_numpy(np.ascontiguousarray(self.images)).to(self.device)

    @property
    def mode(self) -> str:
        """ "resident", "streamed" (CUDA, host rows) or "cpu"."""
        return "resident" if self.source is not None else "streamed" if self.device.type == "cuda" else "cpu"

    def _draw(self) -> _Draws | None:
        """The next step's draws and host work, or ``None`` after the last step."""
        idx = next(self.order, None)
        if idx is None:
            return None
        index = idx.numpy()[self.rank :: self.world_size]
        extents = None if self.extents is None else self.extents[index]
        theta = crop_params(len(index), self.cfg, self.crops, extents=extents, canvas=self.canvas)
        valid = None if extents is None else torch.from_numpy(np.ascontiguousarray(extents))
        rows_index = torch.from_numpy(index)
        labels = self.labels[rows_index]
        rows = None if self.source is not None else torch.from_numpy(self.images[index])
        if self.device.type == "cuda":  # pinned, so the copies below overlap the device's work
            theta, labels, rows_index = theta.pin_memory(), labels.pin_memory(), rows_index.pin_memory()
            valid = None if valid is None else valid.pin_memory()
            rows = None if rows is None else rows.pin_memory()
        return _Draws(rows_index, theta, valid, rows, labels)

    def _make(self, draws: _Draws) -> tuple[torch.Tensor, torch.Tensor]:
        dev = self.device
        if self.source is not None:
            rows = self.source.index_select(0, draws.index.to(dev, non_blocking=True))
        else:
            rows = draws.rows.to(dev, non_blocking=True)
        extents = None if draws.extents is None else draws.extents.to(dev, non_blocking=True)
        theta = draws.theta.to(dev, non_blocking=True)
        x = crop_flip(rows, theta, self.cfg, extents, channels_last=self.channels_last)
        return x, draws.labels.to(dev, non_blocking=True)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if not self.prefetch:
            while True:
                start = time.perf_counter()
                draws = self._draw()
                if draws is None:
                    return
                batch = self._make(draws)
                self.times.waited += time.perf_counter() - start
                self.times.batches += 1
                yield batch
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nevis-input") as pool:
            pending: Future[_Draws | None] = pool.submit(self._draw)
            while True:
                start = time.perf_counter()
                draws = pending.result()
                if draws is None:
                    return
                pending = pool.submit(self._draw)  # the next step's host work, during this step
                batch = self._make(draws)
                self.times.waited += time.perf_counter() - start
                self.times.batches += 1
                yield batch


__all__ = ["RESIDENT_SHARE", "InputTimes", "TrainBatches"]
