"""A slow, obvious reference for the bootstrap of services/core/uncertainty.py: Python loops
over resamples and tasks, each task's error recomputed on its resampled examples by the
definition (accuracy, or average precision as scikit-learn defines it, through ``mean_average_precision``),
with the same draws (``bootstrap_draws``). Used by the unit tests of the math and by the
integration test on a real run's stored predictions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.core.metrics import mean_average_precision
from services.core.predictions import TaskPredictions
from services.core.uncertainty import bootstrap_draws


def resampled_error(task: TaskPredictions, rows: np.ndarray) -> float:
    """The task's error on the examples ``rows`` (repeats allowed), by the definition."""
    if task.kind == "single":
        return float(1.0 - np.mean([task.predicted[j] == task.labels[j] for j in rows]))
    labels = task.labels[rows]
    if labels.sum() == 0:
        return float("nan")
    return 1.0 - mean_average_precision(task.predicted[rows].astype(np.float64), labels)


def reference_totals(
    a: Sequence[TaskPredictions], b: Sequence[TaskPredictions] | None, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(R,) resampled E (or ΔE = E(a) − E(b) with ``b``) with the tasks resampled too (the
    generalisation figure), and (R, T) resampled per-task errors (or per-task Δ), by loops."""
    task_draws, example_draws = bootstrap_draws([t.num_examples for t in a], resamples=resamples, seed=seed)
    example_draws = list(example_draws)
    per_task = np.empty((resamples, len(a)))
    for r in range(resamples):
        for t in range(len(a)):
            rows = example_draws[t][r]
            per_task[r, t] = resampled_error(a[t], rows)
            if b is not None:
                per_task[r, t] -= resampled_error(b[t], rows)
    totals = np.array([np.mean([per_task[r, t] for t in task_draws[r]]) for r in range(resamples)])
    return totals, per_task


def fixed_totals(per_task: np.ndarray) -> np.ndarray:
    """(R,) E (or ΔE) of each resample with the tasks kept: the plain mean of its task errors, by a loop."""
    return np.array([sum(row) / len(row) for row in per_task.tolist()])


def reference_interval(totals: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of the resampled values."""
    tail = (1 - level) / 2
    return float(np.nanquantile(totals, tail)), float(np.nanquantile(totals, 1 - tail))


__all__ = ["fixed_totals", "reference_interval", "reference_totals", "resampled_error"]
