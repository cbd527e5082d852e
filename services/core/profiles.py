"""Performance profiles over the tasks of a stream version (issue 23, item 3).

A mean error hides where a learner wins: one large loss on one task weighs as much as many
small wins. A performance profile (Dolan & Moré; AlgoPerf ranks training algorithms by them)
asks instead, for each submission, on what fraction of the tasks it is within a factor τ of
the best submission on that task, as a curve over τ ≥ 1; its area, normalised to [0, 1], is
one score: 1 means best on every task, 0 means never within ``tau_max`` of the best.

Two profiles are defined here, both computed from a (submissions × tasks) matrix:

- **error**: the ratio of a submission's task error to the best error on that task. Errors
  are in [0, 1] and a best error of 0 is common on easy tasks, so both are offset by
  :data:`ERROR_FLOOR` (0.001, a tenth of a percentage point) before dividing: a ratio is
  ``(e + 0.001) / (best + 0.001)``. A task a submission has no result for counts as never
  within any τ (ratio ∞).
- **cflop to reach a reference** (Indep by default): on each task, only submissions whose
  error is at most the reference's error on that task qualify; the ratio is a qualifying
  submission's task FLOPs to the least FLOPs of any qualifying submission, ∞ for one that
  does not qualify. Tasks the reference has no result for are left out of this profile.

The score is the area under the step curve ρ(τ) on [1, ``tau_max``], divided by
``tau_max − 1`` (ratios are compared on a linear τ axis, as AlgoPerf does; ``tau_max`` = 4).
Which way is better is each metric's spec (:func:`services.core.metric_specs.metric_spec`:
E and cFLOP are lower-is-better), read when a profile is computed: the best is the least of a
lower-is-better metric and the ratio ``v / best``, the greatest of a higher-is-better one and
the ratio ``best / v``.

Everything is vectorised: 1,000 submissions × 106 tasks take milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.core.metric_specs import metric_spec

ERROR_FLOOR = 1e-3
TAU_MAX = 4.0


@dataclass(frozen=True)
class Profile:
    """One profile: ``fractions[s, j]`` is ρ_s(taus[j]); ``scores[s]`` the normalised area."""

    taus: np.ndarray  # (T,) increasing, from 1 to tau_max
    fractions: np.ndarray  # (S, T)
    scores: np.ndarray  # (S,)
    tasks: int  # tasks the profile is over


def ratios_to_best(values: np.ndarray, *, floor: float = 0.0, higher_is_better: bool = False) -> np.ndarray:
    """``(v + floor) / (min over rows + floor)`` per column (``higher_is_better``: the inverse
    ratio to the max); NaN (no result) becomes ∞.

    ``values`` is (submissions, tasks); a column with no finite value is all ∞.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError(f"expected a (submissions, tasks) matrix; got shape {values.shape}")
    if higher_is_better:  # v / best is best / v of the reciprocals: a value of 0 is never within τ
        with np.errstate(divide="ignore"):
            values = np.where(values + floor > 0, 1.0 / (values + floor), np.inf) - floor
    shifted = np.where(np.isnan(values), np.inf, values + floor)
    best = shifted.min(axis=0, initial=np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = shifted / best
    ratios[~np.isfinite(best) | np.isinf(shifted)] = np.inf
    ratios[(best == 0) & (shifted == 0)] = 1.0  # both zero (only without a floor): as good as the best
    ratios[(best == 0) & (shifted > 0)] = np.inf
    return ratios


def profile(ratios: np.ndarray, *, tau_max: float = TAU_MAX, points: int = 121) -> Profile:
    """The profile of a (submissions, tasks) matrix of ratios to the best (≥ 1, ∞ allowed)."""
    ratios = np.asarray(ratios, dtype=np.float64)
    if ratios.ndim != 2:
        raise ValueError(f"expected a (submissions, tasks) matrix; got shape {ratios.shape}")
    if tau_max <= 1:
        raise ValueError(f"tau_max must be above 1; got {tau_max}")
    submissions, tasks = ratios.shape
    taus = np.linspace(1.0, tau_max, points)
    if tasks == 0:
        empty = np.zeros((submissions, points))
        return Profile(taus=taus, fractions=empty, scores=np.zeros(submissions), tasks=0)
    ordered = np.sort(ratios, axis=1)
    within = (
        np.stack([np.searchsorted(row, taus, side="right") for row in ordered])
        if submissions
        else np.zeros((0, points), dtype=np.int64)
    )
    fractions = within / tasks
    return Profile(taus=taus, fractions=fractions, scores=_exact_area(ordered, tau_max), tasks=tasks)


def _exact_area(ordered: np.ndarray, tau_max: float) -> np.ndarray:
    """The area under each row's step curve on [1, tau_max], normalised: a task whose ratio is
    r ≤ tau_max contributes (tau_max − max(r, 1)) / (tau_max − 1) / tasks."""
    tasks = ordered.shape[1]
    clipped = np.clip(ordered, 1.0, tau_max)
    contribution = np.where(np.isfinite(ordered) & (ordered <= tau_max), tau_max - clipped, 0.0)
    return contribution.sum(axis=1) / ((tau_max - 1.0) * tasks)


def error_profile(errors: np.ndarray, *, tau_max: float = TAU_MAX) -> Profile:
    """The error profile of a (submissions, tasks) matrix of task errors (NaN: no result)."""
    higher = metric_spec("E").higher_is_better
    return profile(ratios_to_best(errors, floor=ERROR_FLOOR, higher_is_better=higher), tau_max=tau_max)


def cflop_to_reference_profile(
    errors: np.ndarray, flops: np.ndarray, reference_errors: np.ndarray, *, tau_max: float = TAU_MAX
) -> Profile:
    """The profile of FLOPs spent to reach the reference's error, task by task.

    ``errors`` and ``flops`` are (submissions, tasks); ``reference_errors`` is (tasks,), NaN
    where the reference has no result (those tasks are left out).
    """
    errors, flops = np.asarray(errors, dtype=np.float64), np.asarray(flops, dtype=np.float64)
    reference = np.asarray(reference_errors, dtype=np.float64)
    if errors.shape != flops.shape or reference.shape != errors.shape[1:]:
        raise ValueError(f"shapes differ: errors {errors.shape}, flops {flops.shape}, reference {reference.shape}")
    kept = ~np.isnan(reference)
    errors, flops, reference = errors[:, kept], flops[:, kept], reference[kept]
    reached = ~np.isnan(errors) & (
        (errors >= reference) if metric_spec("E").higher_is_better else (errors <= reference)
    )
    higher = metric_spec("cFLOP").higher_is_better
    return profile(ratios_to_best(np.where(reached, flops, np.nan), higher_is_better=higher), tau_max=tau_max)


__all__ = [
    "ERROR_FLOOR",
    "TAU_MAX",
    "Profile",
    "cflop_to_reference_profile",
    "error_profile",
    "profile",
    "ratios_to_best",
]
