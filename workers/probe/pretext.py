"""The pretext curve: the learner's own training loss, stored per trial and read per checkpoint.

The runner records every ``ctx.progress(step, loss=...)`` call of a trial as its ``curve``,
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

from services.store.db.models_probe import TrialCurve
from services.store.db import jsonfloats


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


def loss_at_checkpoints(checkpoint_steps: Sequence[int], steps: np.ndarray,
                        losses: np.ndarray) -> np.ndarray | None:
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


__all__ = ["loss_at_checkpoints", "read_training_curve"]
