"""The ``proxy`` trial scheduler: ASHA's rule on LiDAR instead of dev error, no label read.

Why: LiDAR (METRICS.md §3) ranks representations without labels. At a trial's 1/8 and 1/4
steps (the default checkpoints; :func:`services.core.proxy_policies.rung_steps`) its learner
host passes q augmented views of n seeded, unlabelled train images through the live network
(:mod:`workers.sandbox.proxy_views`, under the trial's FLOP meter, so the passes are charged
to the trial like ASHA's dev passes); harness code here takes their LiDAR and the task's
harness actor applies ASHA's promotion rule (:class:`~workers.trainer.early_stopping.SuccessiveHalving`)
to −LiDAR, so the higher LiDAR goes on. The chosen trial is still the one with the lowest
final dev error among those that ran to their end. ``nevis study proxies`` replays the same
rule offline from probe rows.

LiDAR here is the probe pool's own (:func:`services.core.ranks.lidar_at_deltas`, METRICS.md's
formula) with its default relative ridge (δ = 1e-4 × tr(Σ_w)/d, ε = 1e-8).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from services.core.proxy_policies import ETA, rung_steps
from services.core.ranks import lidar_at_deltas
from workers.trainer.early_stopping import StoppingRule

PROXY_N = 64
"""Clean train images per rung (the same seeded images for every trial of a task)."""

PROXY_Q = 4
"""Augmented views of each: n·q = 256 feature rows, about what four training steps of 64 images cost forward."""

PROXY_SEED = 0
PROXY_MAX_DIM = 2048
"""Widest features a rung report may carry by default (``NEVIS_PROXY_MAX_DIM``): ResNet-50's 2048."""
LIDAR_DELTA, LIDAR_EPS = 1e-4, 1e-8


def proxy(request: Any) -> StoppingRule:
    """ASHA on LiDAR at the trial's 1/8 and 1/4 steps (a ``SearchRequest``'s ``steps``)."""
    return StoppingRule(rung_steps(request.steps), eta=ETA, proxy={"n": PROXY_N, "q": PROXY_Q, "seed": PROXY_SEED})


def lidar_of_views(features: np.ndarray, q: int, *, delta: float = LIDAR_DELTA, eps: float = LIDAR_EPS) -> float:
    """LiDAR of (n·q, d) image-major features (q views of each image), relative ridge δ·tr(Σ_w)/d."""
    rows, d = features.shape
    if q < 2 or rows % q or rows // q < 2:
        raise ValueError(f"LiDAR needs n >= 2 images of q >= 2 views; got {rows} rows for q = {q}.")
    values, _ = lidar_at_deltas(np.asarray(features).reshape(rows // q, q, d), [delta], relative=True, eps=eps)
    return values[delta]


def rung_value(features: Any, how: dict[str, int], *, max_dim: int = PROXY_MAX_DIM) -> float:
    """What the halving rule compares for a trial at a proxy rung: −LiDAR (lower is better).

    Features that are not a finite, numeric array of exactly n·q rows (``how``'s n and q) and
    at most ``max_dim`` columns rank last (+inf), refused before any LiDAR is computed: its
    cost grows as d³, and the learner must not order harness work.
    """
    array = np.asarray(features)
    n, q = int(how["n"]), int(how["q"])
    if array.ndim != 2 or array.shape[0] != n * q or not 1 <= array.shape[1] <= max_dim:
        return math.inf
    if not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
        return math.inf
    return -lidar_of_views(array, q)


__all__ = [
    "LIDAR_DELTA",
    "LIDAR_EPS",
    "PROXY_MAX_DIM",
    "PROXY_N",
    "PROXY_Q",
    "PROXY_SEED",
    "lidar_of_views",
    "proxy",
    "rung_value",
]
