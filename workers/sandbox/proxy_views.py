"""Features of augmented views of unlabelled train images, for a label-free rung (LiDAR).

Why here: the ``proxy`` trial scheduler compares trials at their 1/8 and 1/4 steps by LiDAR
instead of dev error (no label is read). LiDAR needs the live network's features of q
augmented views of n clean images, which only the learner's process can compute; harness
code then computes LiDAR from them (``workers.trainer.proxy_scheduler``). The same seeded
images and views go to every trial of a task, so their values are comparable. The passes run
under the trial's meter, so what they cost is charged to the trial like its other passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from services.core.errors import LearnerError
from workers.sandbox.views import augment_views
from workers.stream.task_info import LabelledData


def proxy_features(
    learner: Any, predictor: Any, train: LabelledData, *, n: int, q: int, seed: int, ctx: Any
) -> np.ndarray:
    """``learner.features`` of q augmented views of n seeded train images: (n·q, d), image-major."""
    rows = np.sort(np.random.default_rng(seed).choice(len(train), size=min(n, len(train)), replace=False))
    originals, extents = (None, None) if train.originals is None else train.crop_source(rows)
    views, _ = augment_views(learner, predictor, train.images[rows], q, seed=seed, originals=originals, extents=extents)
    out = np.asarray(learner.features(predictor, views.reshape(-1, *views.shape[2:]), ctx))
    if out.ndim != 2 or out.shape[0] != len(rows) * q:
        raise LearnerError(
            f"features() must return an array shaped (num_images, d) = ({len(rows) * q}, d); got {out.shape}."
        )
    return out


def proxy_images(view: Any, *, n: int, seed: int) -> LabelledData:
    """Where the proxy's unlabelled images come from: the train split, or for a task streamed
    a shard at a time (too large to hold) the first ``n`` rows of a stream seeded by ``seed``
    (a few shards read, not the whole split)."""
    stream = view.train_stream(seed)
    if stream is None:
        return view.train()
    batches = stream.batches(min(n, len(stream)))
    try:
        return next(batches)
    finally:
        batches.close()  # its reader threads end with it


__all__ = ["proxy_features", "proxy_images"]
