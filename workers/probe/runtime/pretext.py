"""The pretext curve: the learner's own loss and error on held-out examples, per checkpoint.

The convergence index of METRICS.md §2 is found on a held-out pretext loss: at each
checkpoint the probe worker scores the learner's own predictions on the current task's probe
examples (dev and dev_test, never trained on; the same examples as the target probes, see
:mod:`workers.probe.runtime.data`) and :func:`held_out_loss` turns them into a cross-entropy. These
passes are the analysis's compute, made for the probe worker: metered like any of its learner
calls and recorded as the job's analysis FLOPs (:mod:`workers.probe.runtime.context`), never in the
learner's cFLOP. The learner protocol lets ``predict`` return logits or probabilities, so the scores
are read as probabilities when they already are (single-label: every row non-negative and
summing to 1; multi-label: every value in [0, 1]) and as logits otherwise.

Kept for reference and for trials probed before this (it is no longer the default): the
runner records every ``ctx.progress(step, loss=...)`` call of a trial as its ``curve``,
which :func:`services.store.runs.records.record_trial` keeps in ``trial_curves``. The
convergence index of METRICS.md §2 is computed on the pretext loss "at the measured checkpoints": :func:`loss_at_checkpoints`
turns the per-step curve into one value per checkpoint, the mean of the losses recorded
since the previous checkpoint (so a noisy mini-batch loss is smoothed over the interval it
stands for). The untrained checkpoint, which has no loss of its own, takes the first loss
recorded at or after it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from sqlalchemy.orm import Session

from services.store.db import jsonfloats
from services.store.db.models_probe import TrialCurve


def held_out_loss(scores: np.ndarray, labels: np.ndarray, kind: str) -> float:
    """Mean cross-entropy of the learner's scores (mean binary CE per label if multi-label).

    Examples:
        >>> round(held_out_loss(np.array([[0.5, 0.5], [0.9, 0.1]]), np.array([0, 0]), "single"), 4)
        0.3993
        >>> round(held_out_loss(np.array([[0.0, 0.0]]), np.array([1]), "single"), 4)
        0.6931
    """
    x = np.asarray(scores, dtype=np.float64)
    if kind == "multi":
        y = np.asarray(labels, dtype=np.float64)
        if x.min() >= 0.0 and x.max() <= 1.0:
            p = np.clip(x, 1e-12, 1.0 - 1e-12)
            return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p)))
        return float(np.mean(np.logaddexp(0.0, x) - y * x))  # BCE with logits
    rows = np.arange(len(x))
    y = np.asarray(labels).reshape(-1).astype(np.int64)
    if x.min() >= 0.0 and np.allclose(x.sum(axis=1), 1.0, atol=1e-4):
        return float(-np.mean(np.log(np.clip(x[rows, y], 1e-12, None))))
    top = x.max(axis=1, keepdims=True)
    log_z = top[:, 0] + np.log(np.exp(x - top).sum(axis=1))
    return float(np.mean(log_z - x[rows, y]))


def read_training_curve(session: Session, *, trial_id: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(steps, losses)`` of a trial's stored curve, points without a loss dropped; or None."""
    row = session.get(TrialCurve, trial_id)
    if row is None:
        return None
    pairs = [(s, v) for s, v in zip(row.steps, jsonfloats.decode(row.losses)) if v is not None]
    if not pairs:
        return None
    steps, losses = zip(*pairs)
    return np.asarray(steps, dtype=np.int64), np.asarray(losses, dtype=np.float64)


def loss_at_checkpoints(checkpoint_steps: Sequence[int], steps: np.ndarray, losses: np.ndarray) -> np.ndarray | None:
    """One pretext loss per checkpoint (see the module docstring), or None if any is missing.

    Diverged losses (+inf) stay +inf: a diverged run is the worst loss, not a missing one.

    Examples:
        >>> loss_at_checkpoints([0, 2, 4], np.array([1, 2, 3, 4]), np.array([4.0, 2.0, 1.0, 3.0]))
        array([4., 3., 2.])
    """
    out = np.empty(len(checkpoint_steps))
    previous = -math.inf
    for i, step in enumerate(checkpoint_steps):
        window = (steps > previous) & (steps <= step)
        if not window.any():
            after = np.flatnonzero(steps >= step)
            if after.size == 0:
                return None
            window = np.zeros_like(window)
            window[after[0]] = True
        with np.errstate(invalid="ignore"):
            out[i] = float(np.mean(losses[window]))
        previous = step
    return out


__all__ = ["held_out_loss", "loss_at_checkpoints", "read_training_curve"]
