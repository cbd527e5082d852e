"""The headline metrics of METRICS.md §1: the task error e_i, E and cFLOP.

They sit in the lowest layer because every layer above reports them: the trainer scores
trials and tasks, the probe pool scores its target models, and the run summary of the store
(what ``nevis results``, the API and the dashboard show) averages E and sums cFLOP.

e = 1 − top-1 accuracy (single-label) or 1 − macro mean average precision over the labels
that have a positive example (multi-label). Scores that are not a finite (N, K) array are a
:class:`~services.core.errors.LearnerError`: a malformed prediction is the learner's bug,
reported as such, never silently scored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from services.core.errors import LearnerError
from services.core.metric_specs import HEADLINE_METRICS, Aggregation, MetricSpec


def check_scores(scores: object, *, num_examples: int, num_classes: int) -> np.ndarray:
    """Validate a learner's predictions and return them as float64 (N, K)."""
    if not isinstance(scores, np.ndarray):
        try:
            scores = np.asarray(scores)
        except Exception as exc:
            raise LearnerError(f"predict() must return an array; got {type(scores).__name__}") from exc
    if scores.shape != (num_examples, num_classes):
        raise LearnerError(
            f"predict() must return scores shaped (num_images, num_classes) = "
            f"({num_examples}, {num_classes}); got {scores.shape}."
        )
    if not np.issubdtype(scores.dtype, np.number) or np.issubdtype(scores.dtype, np.complexfloating):
        raise LearnerError(f"predict() must return real numbers; got dtype {scores.dtype}.")
    scores = scores.astype(np.float64, copy=False)
    if not np.isfinite(scores).all():
        bad = int((~np.isfinite(scores)).any(axis=1).sum())
        raise LearnerError(f"predict() returned non-finite scores for {bad} of {num_examples} images.")
    return scores


def task_error(scores: np.ndarray, labels: np.ndarray, kind: Literal["single", "multi"]) -> float:
    """The NEVIS'22 task error of ``scores`` against ``labels``.

    Examples:
        >>> task_error(np.array([[2.0, 1.0], [0.0, 3.0]]), np.array([0, 0]), "single")
        0.5
    """
    if kind == "single":
        labels = np.asarray(labels).reshape(-1)
        scores = check_scores(scores, num_examples=labels.shape[0], num_classes=scores.shape[1])
        return float(1.0 - np.mean(scores.argmax(axis=1) == labels))
    if kind == "multi":
        labels = np.asarray(labels)
        scores = check_scores(scores, num_examples=labels.shape[0], num_classes=labels.shape[1])
        return 1.0 - mean_average_precision(scores, labels)
    raise ValueError(f"kind must be 'single' or 'multi'; got {kind!r}")


def mean_average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Macro mean of per-label average precision, over labels with a positive example."""
    present = np.flatnonzero(labels.sum(axis=0) > 0)
    if present.size == 0:
        raise ValueError("No label has a positive example: mean average precision is undefined.")
    return float(np.mean([average_precision(labels[:, k], scores[:, k]) for k in present]))


def average_precision(positive: np.ndarray, scores: np.ndarray) -> float:
    """Average precision of one label: sum over the distinct score thresholds, highest first,
    of the recall gained at each times the precision there (ties count as one threshold),
    scikit-learn's ``average_precision_score`` exactly (tests compare the two). Written here
    because every learner host scores dev splits with it, and importing scikit-learn cost a
    host about 0.9 s at its first multi-label task."""
    order = np.argsort(-scores, kind="stable")
    ranked, hits = scores[order], np.asarray(positive, dtype=np.float64)[order]
    last_of_tie = np.r_[np.flatnonzero(np.diff(ranked)), ranked.size - 1]
    true_pos = np.cumsum(hits)[last_of_tie]
    precision = true_pos / (last_of_tie + 1)
    recall = true_pos / true_pos[-1]
    return float(np.sum(np.diff(recall, prepend=0.0) * precision))


def mean_error(errors: Iterable[float]) -> float | None:
    """E: the mean of the task errors given (the phase's committed tasks); None if none."""
    values = [float(e) for e in errors]
    return sum(values) / len(values) if values else None


def cflop(task_flops: Iterable[float]) -> float:
    """cFLOP: every FLOP the learner spent on the committed tasks, search included."""
    return float(sum(float(f) for f in task_flops))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which (cFLOP, E) points are on the Pareto front (METRICS.md §1): no other point has
    both lower-or-equal cFLOP and lower-or-equal E with at least one strictly lower.

    Examples:
        >>> pareto_front([(1.0, 0.5), (2.0, 0.4), (3.0, 0.45), (1.0, 0.5)])
        [True, True, False, True]
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    on_front = [False] * len(points)
    best_error = math.inf  # lowest E among points of strictly lower cFLOP
    i = 0
    while i < len(order):
        flops = points[order[i]][0]
        group = [j for j in order[i:] if points[j][0] == flops]
        lowest = min(points[j][1] for j in group)
        for j in group:  # equal cFLOP: only the lowest E of the group, and only if it beats cheaper ones
            on_front[j] = points[j][1] == lowest and lowest < best_error
        best_error = min(best_error, lowest)
        i += len(group)
    return on_front


def regret_curve(errors: Sequence[float | None], baseline: Sequence[float | None]) -> list[float | None]:
    """Regret against a baseline at each task i: sum over j <= i of (e_j - e_j^baseline)
    (METRICS.md §1); None from the first task where either error is missing."""
    curve: list[float | None] = []
    total = 0.0
    for mine, theirs in zip(errors, baseline, strict=True):
        if mine is None or theirs is None or (curve and curve[-1] is None):
            curve.append(None)
            continue
        total += float(mine) - float(theirs)
        curve.append(total)
    return curve


__all__ = [
    "HEADLINE_METRICS",
    "Aggregation",
    "MetricSpec",
    "average_precision",
    "cflop",
    "check_scores",
    "mean_average_precision",
    "mean_error",
    "pareto_front",
    "regret_curve",
    "task_error",
]
