"""How sure a run's E is: bootstrap intervals of E and of a paired difference ΔE, and over seeds.

The contract (docs/uncertainty.md states it for users):

- **E on this benchmark (the default).** NEVIS'22's tasks are the population E is defined over,
  not a sample of it, so the default interval keeps the T tasks and resamples only test
  examples, within each task (a stratified bootstrap): resample *r* draws, for every task, N_t
  test examples with replacement from its N_t; e_t^(r) is the task's error on them (accuracy,
  or macro mean average precision over the labels with a positive example in the resample) and
  E^(r) = the mean of e_t^(r) over the T tasks. The interval is the percentile interval of the
  E^(r) at ``level`` (linear interpolation); it sits around E, the stored value.
- **Generalisation to other tasks.** The two-level figure also draws the T tasks with
  replacement in each resample (a task drawn twice counts twice, with the same example
  resample), so it answers "would a stream of other, similar tasks give this E?". Kept beside
  the default as ``generalisation``, always labelled so.
- **Paired.** Two runs on the same stream version are scored on the same test examples, so ΔE =
  E_A − E_B is resampled with the *same* draws for both: the noise they share cancels. Per task,
  Δ_t gets its paired interval and a two-sided p-value (normal, with the bootstrap SD); a task
  is *flagged* when its Holm-adjusted p-value is at most 5 % (:mod:`services.core.multiplicity`).
  These flags cover test-example noise only: seeds are compared in :mod:`services.core.seed_compare`.
- **Reproducible.** Draws come from ``numpy.random.default_rng(seed)`` in a fixed order (the
  task draws, then each task's example draws in task order), so the same predictions, seed and
  number of resamples always give the same intervals, bit for bit.
- **Seeds.** Several runs of one configuration: mean, sample SD and the Student t interval of
  the mean (:func:`over_seeds`).

Everything is a pure function of arrays (:class:`~services.core.predictions.TaskPredictions`);
the work is vectorised over resamples: 27 tasks × 10,000 examples × 1,000 resamples runs in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from services.core.multiplicity import ALPHA, CORRECTION, holm, normal_p_value
from services.core.predictions import TaskPredictions
from services.core.resample import resampled_error

RESAMPLES = 1000
LEVEL = 0.95
SEED = 0
METHOD = "stratified bootstrap: the tasks kept, test examples resampled within each task; percentile interval"
GENERALISATION_METHOD = (
    "generalisation to other tasks: two-level bootstrap (tasks resampled, and test "
    "examples within them); percentile interval"
)
EXAMPLE_NOISE = "test examples only (one run per side: seed variance not covered)"


@dataclass(frozen=True)
class Interval:
    """A two-sided interval at ``level`` (0.95: a 95 % interval)."""

    low: float
    high: float
    level: float

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class ErrorInterval:
    """E of one run with its interval on this benchmark (tasks kept), the task-resampled one
    (generalisation to other tasks), and each task's error with its own (examples resampled)."""

    estimate: float
    interval: Interval  # the default: tasks kept, examples resampled within each
    standard_error: float  # SD of the resampled E (tasks kept)
    task_errors: tuple[float, ...]
    task_intervals: tuple[Interval, ...]
    resamples: int
    seed: int
    generalisation: Interval | None = None  # tasks resampled too
    generalisation_standard_error: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            **_interval_fields(self.interval),
            "standard_error": self.standard_error,
            "resamples": self.resamples,
            "seed": self.seed,
            "method": METHOD,
            "generalisation": generalisation_fields(self.generalisation, self.generalisation_standard_error),
        }


@dataclass(frozen=True)
class TaskDelta:
    """Δ_t = e_t(A) − e_t(B) on one task, with its paired interval (examples resampled), its
    two-sided p-value and the family's Holm-adjusted one."""

    error_a: float
    error_b: float
    delta: float
    interval: Interval
    p_value: float = 1.0
    p_adjusted: float = 1.0

    @property
    def differs(self) -> bool:
        """Flagged: the Holm-adjusted p-value is at most 5 % (beyond the noise the flag covers)."""
        return self.p_adjusted <= ALPHA


@dataclass(frozen=True)
class PairedDelta:
    """ΔE = E(A) − E(B) over the tasks both runs scored, with its paired interval on this
    benchmark and the task-resampled one."""

    delta: float
    interval: Interval
    standard_error: float
    tasks: tuple[TaskDelta, ...]
    resamples: int
    seed: int
    generalisation: Interval | None = None
    noise: str = EXAMPLE_NOISE
    correction: str = CORRECTION

    @property
    def differs(self) -> bool:
        return self.interval.excludes(0.0)


@dataclass(frozen=True)
class SeedSummary:
    """A learner's E over its runs with different seeds."""

    runs: int
    mean: float
    sd: float | None  # sample SD (n − 1); None for one run
    interval: Interval | None  # Student t interval of the mean; None for one run


def error_interval(
    tasks: Sequence[TaskPredictions], *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED
) -> ErrorInterval:
    """E's interval on this benchmark (tasks kept) and the task-resampled one (see the contract).

    Examples:
        >>> from services.core.predictions import TaskPredictions
        >>> t = TaskPredictions("single", np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0]))
        >>> result = error_interval([t, t], resamples=200)
        >>> result.estimate, result.interval.low <= 0.25 <= result.interval.high
        (0.25, True)
    """
    _check(tasks, resamples, level)
    errors = resampled_task_errors(tasks, resamples=resamples, seed=seed)
    fixed = errors.per_task.mean(axis=1)
    drawn = np.take_along_axis(errors.per_task, errors.task_draws, axis=1).mean(axis=1)
    observed = tuple(t.error for t in tasks)
    return ErrorInterval(
        estimate=float(np.mean(observed)),
        interval=percentile_interval(fixed, level),
        standard_error=_sd(fixed),
        task_errors=observed,
        task_intervals=tuple(percentile_interval(errors.per_task[:, i], level) for i in range(len(tasks))),
        resamples=resamples,
        seed=seed,
        generalisation=percentile_interval(drawn, level),
        generalisation_standard_error=_sd(drawn),
    )


def paired_delta(
    a: Sequence[TaskPredictions],
    b: Sequence[TaskPredictions],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
) -> PairedDelta:
    """The paired bootstrap of ΔE = E(a) − E(b), task i of ``a`` paired with task i of ``b`` (the
    same test examples, in the same order), with Holm-controlled per-task flags.

    Raises:
        ValueError: the lists differ in length, or a pair of tasks was not scored on the same
            labels (not the same stream version).
    """
    check_paired([a, b])
    _check(a, resamples, level)
    ea = resampled_task_errors(a, resamples=resamples, seed=seed)
    eb = resampled_task_errors(b, resamples=resamples, seed=seed)
    diff = ea.per_task - eb.per_task
    fixed = diff.mean(axis=1)
    drawn = np.take_along_axis(diff, ea.task_draws, axis=1).mean(axis=1)
    observed = [x.error - y.error for x, y in zip(a, b, strict=True)]
    p = [normal_p_value(d, _sd(diff[:, i])) for i, d in enumerate(observed)]
    deltas = tuple(
        TaskDelta(
            error_a=x.error,
            error_b=y.error,
            delta=d,
            interval=percentile_interval(diff[:, i], level),
            p_value=p[i],
            p_adjusted=adjusted,
        )
        for i, (x, y, d, adjusted) in enumerate(zip(a, b, observed, holm(p), strict=True))
    )
    return PairedDelta(
        delta=float(np.mean(observed)),
        interval=percentile_interval(fixed, level),
        standard_error=_sd(fixed),
        tasks=deltas,
        resamples=resamples,
        seed=seed,
        generalisation=percentile_interval(drawn, level),
    )


def check_paired(runs: Sequence[Sequence[TaskPredictions]]) -> None:
    """Every run has the same tasks, scored on the same test examples.

    Raises:
        ValueError: naming the first task (or the count) that differs.
    """
    first = runs[0]
    for run in runs[1:]:
        if len(run) != len(first):
            raise ValueError(f"Paired runs must have the same tasks; got {len(first)} and {len(run)}.")
        for i, (x, y) in enumerate(zip(first, run, strict=True)):
            if x.kind != y.kind or x.labels.shape != y.labels.shape or not np.array_equal(x.labels, y.labels):
                raise ValueError(
                    f"Task {i} of the two runs was not scored on the same test examples: "
                    "only runs on one stream version can be paired."
                )


def over_seeds(values: Sequence[float], *, level: float = LEVEL) -> SeedSummary:
    """Mean, sample SD and the Student t interval of the mean of a learner's E over seeds.

    Examples:
        >>> s = over_seeds([0.2, 0.3, 0.4])
        >>> round(s.mean, 6), round(s.sd, 6), round(s.interval.high, 4)
        (0.3, 0.1, 0.5484)
    """
    if not values:
        raise ValueError("The 'values' parameter of over_seeds must not be empty.")
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if x.size < 2:
        return SeedSummary(runs=1, mean=mean, sd=None, interval=None)
    # The t quantile from scipy.special: scipy.stats, the same function, took 3× longer to import
    # (2.6 s against 0.8 s on a loaded 2-core machine, 2026-12-07), and a server's first
    # leaderboard read paid it (issue 48).
    from scipy.special import stdtrit  # noqa: PLC0415 - scipy is slow to import

    sd = float(x.std(ddof=1))
    half = float(stdtrit(x.size - 1, 0.5 + level / 2)) * sd / math.sqrt(x.size)
    return SeedSummary(runs=int(x.size), mean=mean, sd=sd, interval=Interval(mean - half, mean + half, level))


@dataclass(frozen=True)
class ResampledErrors:
    """The draws of a bootstrap and each task's error under them."""

    task_draws: np.ndarray  # (R, T) task indices (used by the task-resampled figure only)
    per_task: np.ndarray  # (R, T): e_t on resample r's examples of task t


def bootstrap_draws(sizes: Sequence[int], *, resamples: int, seed: int) -> tuple[np.ndarray, Iterator[np.ndarray]]:
    """The random draws of a bootstrap, in their fixed order: the (R, T) task draws, then, lazily
    and in task order, each task's (R, N_t) example draws."""
    rng = np.random.default_rng(seed)
    tasks = rng.integers(0, len(sizes), size=(resamples, len(sizes)))

    def examples() -> Iterator[np.ndarray]:
        for n in sizes:
            yield rng.integers(0, n, size=(resamples, n), dtype=np.int32)

    return tasks, examples()


def resampled_task_errors(tasks: Sequence[TaskPredictions], *, resamples: int, seed: int) -> ResampledErrors:
    """Each task's error on each resample's examples, and the resamples' task draws."""
    task_draws, example_draws = bootstrap_draws([t.num_examples for t in tasks], resamples=resamples, seed=seed)
    per_task = np.empty((resamples, len(tasks)))
    for i, (task, draws) in enumerate(zip(tasks, example_draws, strict=True)):
        per_task[:, i] = resampled_error(task, draws)
    return ResampledErrors(task_draws=task_draws, per_task=per_task)


def percentile_interval(values: np.ndarray, level: float) -> Interval:
    """The percentile interval of resampled values (resamples with an undefined value skipped)."""
    tail = (1.0 - level) / 2
    low, high = np.nanquantile(values, [tail, 1.0 - tail])
    return Interval(float(low), float(high), level)


def generalisation_fields(interval: Interval | None, standard_error: float | None) -> dict[str, Any]:
    """The API's labelled task-resampled figure (nulls where it was not computed)."""
    return {
        "low": interval.low if interval else None,
        "high": interval.high if interval else None,
        "standard_error": standard_error,
        "method": GENERALISATION_METHOD,
    }


def _sd(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0


def _check(tasks: Sequence[TaskPredictions], resamples: int, level: float) -> None:
    if not tasks:
        raise ValueError("A bootstrap needs at least one task with stored predictions; got none.")
    if not isinstance(resamples, int) or resamples < 2:
        raise ValueError(f"The 'resamples' parameter must be an int in [2, inf). Got {resamples!r} instead.")
    if not 0.0 < level < 1.0:
        raise ValueError(f"The 'level' parameter must be a float in (0, 1). Got {level!r} instead.")


def _interval_fields(interval: Interval) -> dict[str, float]:
    return {"low": interval.low, "high": interval.high, "level": interval.level}


__all__ = [
    "EXAMPLE_NOISE",
    "GENERALISATION_METHOD",
    "LEVEL",
    "METHOD",
    "RESAMPLES",
    "SEED",
    "ErrorInterval",
    "Interval",
    "PairedDelta",
    "ResampledErrors",
    "SeedSummary",
    "TaskDelta",
    "bootstrap_draws",
    "check_paired",
    "error_interval",
    "generalisation_fields",
    "over_seeds",
    "paired_delta",
    "percentile_interval",
    "resampled_task_errors",
]
