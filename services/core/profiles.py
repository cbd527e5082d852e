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
  The floor is a choice, and the scores move with it: :func:`floor_sensitivity` gives them at
  :data:`SENSITIVITY_FLOORS` (0.0001, 0.001, 0.01) so a reader sees how much a ranking owes to it.
- **cFLOP to reach Indep's median error + 0.01** (:data:`TARGET_NAME`): on each task, the
  target is the median error of Indep's seeds plus :data:`TARGET_TOLERANCE` (one percentage
  point, :func:`indep_target`); a hard cutoff at Indep's mean is failed by about half of
  Indep's own seeds on every task, so the target would say more about seed noise than about
  compute. Only submissions whose error reaches the target on a task qualify; the ratio is a
  qualifying submission's task FLOPs to the least FLOPs of any qualifying submission, ∞ for one
  that does not qualify. Tasks without an Indep result are left out of this profile.

The score is the area under the step curve ρ(τ) on [1, ``tau_max``], divided by
``tau_max − 1`` (ratios are compared on a linear τ axis, as AlgoPerf does; ``tau_max`` = 4).
Which way is better is each metric's spec (:func:`services.core.metric_specs.metric_spec`:
E and cFLOP are lower-is-better), read when a profile is computed: the best is the least of a
lower-is-better metric and the ratio ``v / best``, the greatest of a higher-is-better one and
the ratio ``best / v``.

Everything is vectorised: 1,000 submissions × 106 tasks take milliseconds.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from services.core.metric_specs import metric_spec

ERROR_FLOOR = 1e-3
SENSITIVITY_FLOORS: tuple[float, ...] = (1e-4, ERROR_FLOOR, 1e-2)
"""The floors :func:`floor_sensitivity` reports the error profile at (the second is the one used)."""
TAU_MAX = 4.0
TARGET_TOLERANCE = 0.01
"""How far above the median of Indep's seeds a task error may be and still reach the target."""
TARGET_NAME = "cFLOP to reach Indep's median error + 0.01"
"""What the cFLOP profile measures, as pages and docs name it."""


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


def error_profile(errors: np.ndarray, *, tau_max: float = TAU_MAX, floor: float = ERROR_FLOOR) -> Profile:
    """The error profile of a (submissions, tasks) matrix of task errors (NaN: no result)."""
    higher = metric_spec("E").higher_is_better
    return profile(ratios_to_best(errors, floor=floor, higher_is_better=higher), tau_max=tau_max)


def floor_sensitivity(
    errors: np.ndarray, *, floors: tuple[float, ...] = SENSITIVITY_FLOORS, tau_max: float = TAU_MAX
) -> dict[float, np.ndarray]:
    """Floor → every submission's error-profile score at that floor: how much the scores (and
    the order they give) owe to the floor."""
    return {floor: error_profile(errors, tau_max=tau_max, floor=floor).scores for floor in floors}


def indep_target(seed_errors: np.ndarray, *, tolerance: float = TARGET_TOLERANCE) -> np.ndarray:
    """The cFLOP profile's target per task: the median error of Indep's seeds (rows of a
    (seeds, tasks) matrix, NaN: no result) plus ``tolerance`` (the other way for a
    higher-is-better E); NaN where no seed has a result."""
    seed_errors = np.asarray(seed_errors, dtype=np.float64)
    if seed_errors.ndim != 2:
        raise ValueError(f"expected a (seeds, tasks) matrix; got shape {seed_errors.shape}")
    if seed_errors.shape[1] == 0:
        return np.zeros(0)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN task: NaN, said in the docstring
        median = np.nanmedian(seed_errors, axis=0) if len(seed_errors) else np.full(seed_errors.shape[1], np.nan)
    return median - tolerance if metric_spec("E").higher_is_better else median + tolerance


def cflop_to_target_profile(
    errors: np.ndarray, flops: np.ndarray, target_errors: np.ndarray, *, tau_max: float = TAU_MAX
) -> Profile:
    """The profile of FLOPs spent to reach a target error, task by task (:func:`indep_target`).

    ``errors`` and ``flops`` are (submissions, tasks); ``target_errors`` is (tasks,), NaN
    where there is no target (those tasks are left out).
    """
    errors, flops = np.asarray(errors, dtype=np.float64), np.asarray(flops, dtype=np.float64)
    reference = np.asarray(target_errors, dtype=np.float64)
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
    "SENSITIVITY_FLOORS",
    "TARGET_NAME",
    "TARGET_TOLERANCE",
    "TAU_MAX",
    "Profile",
    "cflop_to_target_profile",
    "error_profile",
    "floor_sensitivity",
    "indep_target",
    "profile",
    "ratios_to_best",
]
