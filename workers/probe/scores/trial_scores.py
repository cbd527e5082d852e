"""The mismatch scores of one trial, target task and probe kind (METRICS.md §2); pure numpy.

Inputs are the measurements of the trial's checkpoints, in step order: each probe fold's
held-out target loss and error, the pretext error, and the pretext loss (the learner's own
loss on the same held-out examples at each checkpoint, see :mod:`workers.probe.runtime.pretext`). The step is the
integer unit of the grid. The convergence index c is found on the pretext loss; every
curve is cut at c; OFM scores the target loss, SM3 the target error (percent), and M3 the
target error against the pretext error (both percent), exactly as the metric library
defines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.store.probes.settings import ProbeSettings
from workers.probe.scores.probe_metrics import convergence_epoch, mm3_cv, soft_mismatch_cv


@dataclass(frozen=True)
class TrialMismatch:
    """Headline scores, their fold spreads, and the curves that produced them."""

    conv_step: int
    converged: bool
    scores: dict[str, float]
    spreads: dict[str, dict[str, float]]
    curves: dict[str, Any]


def _at_steps(grid: np.ndarray, curve: np.ndarray, steps: Sequence[int]) -> list[float]:
    """A grid curve read at the checkpoint steps it covers."""
    start = int(grid[0])
    return [float(curve[s - start]) for s in steps]


def _convergence_curve(
    pretext_loss: Sequence[float] | None, p_error: np.ndarray, loss_source: str
) -> tuple[np.ndarray, str]:
    """The curve c is found on, and its source.

    A diverged loss (+inf) is the worst loss, not a missing one: it becomes twice the
    largest finite loss (the walk only compares values). Without any finite loss, the
    pretext error stands in.
    """
    if pretext_loss is None:
        return p_error, "pretext_error"
    loss = np.asarray(pretext_loss, dtype=np.float64)
    finite = np.isfinite(loss)
    if not finite.any():
        return p_error, "pretext_error"
    if not finite.all():
        worst = float(np.max(np.abs(loss[finite])))
        loss = np.where(finite, loss, 2.0 * worst + 1.0)
    return loss, loss_source


def trial_mismatch(
    steps: Sequence[int],
    fold_losses: np.ndarray,
    fold_errors: np.ndarray,
    pretext_error: Sequence[float],
    pretext_loss: Sequence[float] | None,
    *,
    settings: ProbeSettings,
    loss_source: str = "held_out_loss",
    start_losses: Sequence[float] | None = None,
    start_source: str = "",
) -> TrialMismatch:
    """Mismatch scores from per-checkpoint measurements.

    Args:
        steps: Checkpoint steps, strictly increasing.
        fold_losses: Held-out target loss, checkpoints × folds.
        fold_errors: Held-out target error in [0, 1], checkpoints × folds.
        pretext_error: The learner's own error in [0, 1] per checkpoint.
        pretext_loss: The learner's held-out loss per checkpoint; None falls back to the
            pretext error for the convergence index (recorded in the curves).
        loss_source: What ``pretext_loss`` is ("held_out_loss", or "training_curve" for
            results stored before the held-out loss was measured).
        settings: Patience and min_delta of the convergence index.
        start_losses: The held-out target loss of a fresh network of the same architecture,
            per fold, where the first checkpoint is not untrained (a transfer learner's): OFM
            is measured from it (Stuhr & Brauer's s_0). None: from the first checkpoint.
        start_source: What that fresh network was (recorded in the curves).

    Raises:
        ValueError: Inputs the metric library refuses (empty, non-finite, mismatched).
    """
    steps = [int(s) for s in steps]
    losses = np.asarray(fold_losses, dtype=np.float64).T  # folds × checkpoints
    errors = 100.0 * np.asarray(fold_errors, dtype=np.float64).T
    p_error = 100.0 * np.asarray(pretext_error, dtype=np.float64)
    convergence_curve, source = _convergence_curve(pretext_loss, p_error, loss_source)
    c, _, converged = convergence_epoch(
        steps, convergence_curve, patience=settings.patience, min_delta=settings.min_delta
    )
    ofm = soft_mismatch_cv(steps, losses, c, use_ofm=True, start=start_losses)
    sm3 = soft_mismatch_cv(steps, errors, c, use_ofm=False)
    m3 = mm3_cv(steps, errors, steps, p_error, c)
    scores = {
        "mm3": m3["mean"],
        "msm3": sm3["mean"],
        "csm3": sm3["c"],
        "msm3max": sm3["m"],
        "mofm": ofm["mean"],
        "cofm": ofm["c"],
        "mofm_max": ofm["m"],
    }
    spreads = {
        "mm3": {"plus": m3["plus"], "minus": m3["minus"]},
        "msm3": {"plus": sm3["plus"], "minus": sm3["minus"]},
        "csm3": {"plus": sm3["c_plus"], "minus": sm3["c_minus"]},
        "msm3max": {"plus": sm3["m_plus"], "minus": sm3["m_minus"]},
        "mofm": {"plus": ofm["plus"], "minus": ofm["minus"]},
        "cofm": {"plus": ofm["c_plus"], "minus": ofm["c_minus"]},
        "mofm_max": {"plus": ofm["m_plus"], "minus": ofm["m_minus"]},
    }
    kept = [s for s in steps if s <= c]
    curves = {
        "steps": steps,
        "target_loss": losses.mean(axis=0).tolist(),
        "target_error": (errors.mean(axis=0) / 100.0).tolist(),
        "pretext_error": (p_error / 100.0).tolist(),
        "pretext_loss": convergence_curve.tolist() if source != "pretext_error" else None,
        "pretext_loss_source": source,
        "scored_steps": kept,
        "ofm": _at_steps(ofm["grid"], ofm["curve"], kept),
        "sm3": _at_steps(sm3["grid"], sm3["curve"], kept),
        "m3": _at_steps(m3["grid"], m3["curve"], kept),
        "grid_points": int(len(ofm["grid"])),
        "folds": int(losses.shape[0]),
        "ofm_start": None if start_losses is None else {"loss": float(np.mean(start_losses)), "source": start_source},
    }
    return TrialMismatch(conv_step=int(c), converged=bool(converged), scores=scores, spreads=spreads, curves=curves)


__all__ = ["TrialMismatch", "trial_mismatch"]
