"""Learner A against learner B with several seeds per side: seeds are the unit of a claim.

One run per side says how sure we are of *these two runs* on these test examples; a claim about
the learners needs their run-to-run variation. With ≥ 2 seeds per side (every run on the same
stream version, so on the same test examples):

- **ΔE** = mean over A's seeds of E − mean over B's seeds of E, with a bootstrap over seeds and
  examples: resample *r* draws n_A of A's seeds and n_B of B's with replacement and, for every
  task, N_t test examples (the same draws for every run: paired); Δ^(r) is the mean over tasks
  of the drawn seeds' mean error difference. The tasks are kept (this benchmark); the percentile
  interval is at ``level``.
- **P(A < B)**, the probability of improvement: over tasks, the chance that a run of A drawn at
  random has a lower task error than a run of B drawn at random (ties count a half), as
  rliable's probability of improvement; its interval from the same resamples.
- **Per-task flags**: Welch's t test of the seeds' task errors with the test examples'
  bootstrap variance of the difference added (so the noise covered is the seeds' run-to-run
  variation and the test-example sampling; a task error is a multiple of 1/N_t, so two seeds
  often tie and seed variance alone can read 0), then Holm over the family of tasks.

With 2 seeds a side the seed bootstrap has few distinct draws and reads narrow; the Welch flags
do not (docs/uncertainty.md gives the simulation's false-flag rate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.core.multiplicity import ALPHA, CORRECTION, holm, welch_p_values
from services.core.predictions import TaskPredictions
from services.core.resample import resampled_error
from services.core.uncertainty import LEVEL, RESAMPLES, SEED, Interval, check_paired, percentile_interval

METHOD = (
    "bootstrap over seeds and test examples (tasks kept, the same example draws for every run); percentile interval"
)
SEED_NOISE = (
    "seeds and test examples: Welch's t test of the runs' task errors, the examples' bootstrap "
    "variance of the difference added"
)
POI_METHOD = "P(a task error of a random run of A < that of a random run of B), mean over tasks (ties 1/2)"


@dataclass(frozen=True)
class SeedTaskDelta:
    """One task: the mean error of each side's seeds, their difference, its bootstrap interval,
    Welch's p-value and the family's Holm-adjusted one."""

    error_a: float
    error_b: float
    delta: float
    interval: Interval
    p_value: float
    p_adjusted: float

    @property
    def differs(self) -> bool:
        return self.p_adjusted <= ALPHA


@dataclass(frozen=True)
class SeedsDelta:
    """A's seeds against B's: ΔE with its interval, P(A < B) with its interval, per-task flags."""

    runs_a: int
    runs_b: int
    delta: float
    interval: Interval
    standard_error: float
    improvement: float  # P(A < B)
    improvement_interval: Interval
    tasks: tuple[SeedTaskDelta, ...]
    resamples: int
    seed: int
    noise: str = SEED_NOISE
    correction: str = CORRECTION

    @property
    def differs(self) -> bool:
        return self.interval.excludes(0.0)


def seeds_delta(
    a: Sequence[Sequence[TaskPredictions]],
    b: Sequence[Sequence[TaskPredictions]],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> SeedsDelta:
    """Compare A's runs (seeds) with B's, task i of every run on the same test examples.

    Raises:
        ValueError: fewer than two runs on a side, a bad setting, or runs whose tasks were not
            scored on the same test examples.
    """
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"A comparison over seeds needs two runs or more per side; got {len(a)} and {len(b)}.")
    runs = [*a, *b]
    check_paired(runs)
    if not runs[0]:
        raise ValueError("A bootstrap needs at least one task with stored predictions; got none.")
    if not isinstance(resamples, int) or resamples < 2:
        raise ValueError(f"The 'resamples' parameter must be an int in [2, inf). Got {resamples!r} instead.")
    if not 0.0 < level < 1.0:
        raise ValueError(f"The 'level' parameter must be a float in (0, 1). Got {level!r} instead.")
    rng = np.random.default_rng(seed)
    pick_a = rng.integers(0, len(a), size=(resamples, len(a)))
    pick_b = rng.integers(0, len(b), size=(resamples, len(b)))
    per_run = np.empty((len(runs), resamples, len(runs[0])))  # (runs, R, T)
    for t, task in enumerate(runs[0]):
        draws = rng.integers(0, task.num_examples, size=(resamples, task.num_examples), dtype=np.int32)
        for k, run in enumerate(runs):
            per_run[k, :, t] = resampled_error(run[t], draws)
    rows = np.arange(resamples)[:, None]
    side_a = per_run[: len(a)].transpose(1, 0, 2)[rows, pick_a]  # (R, n_A, T)
    side_b = per_run[len(a) :].transpose(1, 0, 2)[rows, pick_b]
    totals = (side_a.mean(axis=1) - side_b.mean(axis=1)).mean(axis=1)
    observed = np.array([[task.error for task in run] for run in runs])  # (runs, T)
    obs_a, obs_b = observed[: len(a)], observed[len(a) :]
    examples = per_run[: len(a)].mean(axis=0) - per_run[len(a) :].mean(axis=0)  # (R, T): the seeds kept
    p = welch_p_values(obs_a, obs_b, _variance(examples)).tolist()
    diff = side_a.mean(axis=1) - side_b.mean(axis=1)  # (R, T)
    tail = (1.0 - level) / 2
    with np.errstate(invalid="ignore"):
        lows, highs = np.nanquantile(diff, [tail, 1.0 - tail], axis=0)
    tasks = tuple(
        SeedTaskDelta(
            error_a=float(obs_a[:, t].mean()),
            error_b=float(obs_b[:, t].mean()),
            delta=float(obs_a[:, t].mean() - obs_b[:, t].mean()),
            interval=Interval(float(lows[t]), float(highs[t]), level),
            p_value=p[t],
            p_adjusted=adjusted,
        )
        for t, adjusted in enumerate(holm(p))
    )
    finite = totals[np.isfinite(totals)]
    return SeedsDelta(
        runs_a=len(a),
        runs_b=len(b),
        delta=float(np.mean([t.delta for t in tasks])),
        interval=percentile_interval(totals, level),
        standard_error=float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0,
        improvement=float(probability_of_improvement(obs_a[None], obs_b[None])[0]),
        improvement_interval=percentile_interval(probability_of_improvement(side_a, side_b), level),
        tasks=tasks,
        resamples=resamples,
        seed=seed,
    )


def _variance(values: np.ndarray) -> np.ndarray:
    """(T,) the variance over resamples of each column (undefined resamples skipped)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        found = np.nanvar(values, axis=0, ddof=1)
    return np.nan_to_num(found, nan=0.0)


def probability_of_improvement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(R,) P(A < B) of each resample: ``a`` (R, n_A, T) and ``b`` (R, n_B, T) task errors; the
    mean over tasks of the share of (run of A, run of B) pairs where A's error is lower (ties ½).

    Examples:
        >>> a = np.array([[[0.1, 0.5], [0.2, 0.5]]]); b = np.array([[[0.3, 0.4], [0.15, 0.5]]])
        >>> float(probability_of_improvement(a, b)[0])
        0.5
    """
    x, y = a[:, :, None, :], b[:, None, :, :]
    wins = (x < y).astype(np.float64) + 0.5 * (x == y)
    return wins.mean(axis=(1, 2)).mean(axis=1)


__all__ = [
    "METHOD",
    "POI_METHOD",
    "SEED_NOISE",
    "SeedTaskDelta",
    "SeedsDelta",
    "probability_of_improvement",
    "seeds_delta",
]
