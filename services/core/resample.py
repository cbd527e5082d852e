"""Each task's error recomputed on resampled test examples, vectorised over resamples.

Kept apart from the intervals (:mod:`services.core.uncertainty`, :mod:`services.core.seed_compare`)
because every bootstrap of the service shares it: one task's predictions and an (R, N) array of
example draws give the (R,) errors on those draws (1 − accuracy, or 1 − macro mean average
precision over the labels with a positive example in the resample; NaN where none has).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from services.core.predictions import TaskPredictions

_CHUNK = 100  # resamples scored at once: bounds memory at about 3 × chunk × N floats


def resampled_error(task: TaskPredictions, draws: np.ndarray) -> np.ndarray:
    """(R,) the task's error on each row of ``draws`` ((R, N) example indices, repeats allowed)."""
    if task.kind == "single":
        correct = task.correct
        return np.concatenate([1.0 - correct[chunk].mean(axis=1) for chunk in _chunks(draws)])
    return np.concatenate([1.0 - _weighted_map(task, _counts(chunk, task.num_examples)) for chunk in _chunks(draws)])


def _chunks(draws: np.ndarray) -> Iterator[np.ndarray]:
    for start in range(0, draws.shape[0], _CHUNK):
        yield draws[start : start + _CHUNK]


def _counts(draws: np.ndarray, n: int) -> np.ndarray:
    """(R, N) how many times each example was drawn in each resample."""
    offsets = draws + (np.arange(draws.shape[0]) * n)[:, None]
    return np.bincount(offsets.ravel(), minlength=draws.shape[0] * n).reshape(draws.shape[0], n).astype(np.float64)


def _weighted_map(task: TaskPredictions, weights: np.ndarray) -> np.ndarray:
    """Macro mean average precision of each resample (weights: (R, N) draw counts), over the
    labels with a positive example in it; NaN where none has. A duplicated example ties with
    itself, so this equals average precision on the resampled examples."""
    total = np.zeros(weights.shape[0])
    present = np.zeros(weights.shape[0])
    for k in range(task.labels.shape[1]):
        order = np.argsort(-task.predicted[:, k], kind="stable")
        ranks, y = task.predicted[order, k], task.labels[order, k].astype(np.float64)
        ends = np.append(np.flatnonzero(np.diff(ranks) != 0), ranks.size - 1)  # last of each tie group
        w = weights[:, order]
        tp = np.cumsum(w * y, axis=1)[:, ends]
        seen = np.cumsum(w, axis=1)[:, ends]
        positives = tp[:, -1]
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.where(seen > 0, tp / seen, 0.0)
            recall = tp / positives[:, None]
        gains = np.diff(recall, axis=1, prepend=0.0)
        ap = np.sum(gains * precision, axis=1)
        has = positives > 0
        total[has] += ap[has]
        present += has
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(present > 0, total / present, np.nan)


__all__ = ["resampled_error"]
