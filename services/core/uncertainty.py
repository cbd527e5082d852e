"""How sure a run's E is: bootstrap intervals of E, of a paired difference ΔE, and over seeds.

The contract (docs/uncertainty.md states it for users):

- **Two-level bootstrap of E.** Resample *r* (of ``resamples``) draws T tasks with replacement
  from the run's T tasks and, for every task, N_t test examples with replacement from its N_t;
  each task's error e_t^(r) is recomputed on its resampled examples (accuracy, or macro mean
  average precision over the labels with a positive example in the resample), and
  E^(r) = the mean of e_t^(r) over the T drawn tasks (a task drawn twice counts twice, with the
  same example resample). The interval is the percentile interval of the E^(r) at ``level``
  (linear interpolation between order statistics); it sits around E, which is the stored value,
  never a resampled one.
- **Paired.** Two runs on the same stream version are scored on the same test examples, so ΔE =
  E_A − E_B is resampled with the *same* task and example draws for both: the noise the two runs
  share (which examples happen to be hard) cancels. Per task, Δ_t is resampled with that task's
  example draws; a task *differs beyond noise* when its interval excludes 0.
- **Reproducible.** Draws come from ``numpy.random.default_rng(seed)`` in a fixed order (the
  task draws, then each task's example draws in task order), so the same predictions, seed and
  number of resamples always give the same interval, bit for bit.
- **Seeds.** Several runs of one learner (different seeds): mean, sample SD and the Student t
  interval of the mean (:func:`over_seeds`).

Everything is a pure function of arrays (:class:`~services.core.predictions.TaskPredictions`);
the work is vectorised over resamples: 27 tasks × 10,000 examples × 1,000 resamples runs in
seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from services.core.predictions import TaskPredictions

RESAMPLES = 1000
LEVEL = 0.95
SEED = 0
_CHUNK = 100  # resamples scored at once: bounds memory at about 3 × chunk × N floats


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
    """E of one run with its bootstrap interval, and each task's error with its own
    (examples resampled within the task)."""

    estimate: float
    interval: Interval
    standard_error: float  # SD of the resampled E
    task_errors: tuple[float, ...]
    task_intervals: tuple[Interval, ...]
    resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, **_interval_fields(self.interval),
                "standard_error": self.standard_error, "resamples": self.resamples, "seed": self.seed,
                "method": "two-level bootstrap (tasks, and test examples within tasks), percentile interval"}


@dataclass(frozen=True)
class TaskDelta:
    """Δ_t = e_t(A) − e_t(B) on one task, with its paired interval (examples resampled)."""

    error_a: float
    error_b: float
    delta: float
    interval: Interval

    @property
    def differs(self) -> bool:
        """The interval excludes 0: the two runs differ on this task beyond sampling noise."""
        return self.interval.excludes(0.0)


@dataclass(frozen=True)
class PairedDelta:
    """ΔE = E(A) − E(B) over the tasks both runs scored, with its paired bootstrap interval."""

    delta: float
    interval: Interval
    standard_error: float
    tasks: tuple[TaskDelta, ...]
    resamples: int
    seed: int

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


def error_interval(tasks: Sequence[TaskPredictions], *, resamples: int = RESAMPLES, level: float = LEVEL,
                   seed: int = SEED) -> ErrorInterval:
    """The two-level bootstrap interval of E over ``tasks`` (see the module's contract).

    Examples:
        >>> from services.core.predictions import TaskPredictions
        >>> t = TaskPredictions("single", np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0]))
        >>> result = error_interval([t, t], resamples=200)
        >>> result.estimate, result.interval.low <= 0.25 <= result.interval.high
        (0.25, True)
    """
    _check(tasks, resamples, level)
    errors = resampled_task_errors(tasks, resamples=resamples, seed=seed)
    totals = np.take_along_axis(errors.per_task, errors.task_draws, axis=1).mean(axis=1)
    observed = tuple(t.error for t in tasks)
    return ErrorInterval(
        estimate=float(np.mean(observed)), interval=percentile_interval(totals, level),
        standard_error=float(np.std(totals, ddof=1)), task_errors=observed,
        task_intervals=tuple(percentile_interval(errors.per_task[:, i], level) for i in range(len(tasks))),
        resamples=resamples, seed=seed,
    )


def paired_delta(a: Sequence[TaskPredictions], b: Sequence[TaskPredictions], *, resamples: int = RESAMPLES,
                 level: float = LEVEL, seed: int = SEED) -> PairedDelta:
    """The paired bootstrap interval of ΔE = E(a) − E(b), task i of ``a`` paired with task i of
    ``b`` (the same test examples, in the same order).

    Raises:
        ValueError: the lists differ in length, or a pair of tasks was not scored on the same
            labels (not the same stream version).
    """
    if len(a) != len(b):
        raise ValueError(f"Paired runs must have the same tasks; got {len(a)} and {len(b)}.")
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.kind != y.kind or x.labels.shape != y.labels.shape or not np.array_equal(x.labels, y.labels):
            raise ValueError(f"Task {i} of the two runs was not scored on the same test examples: "
                             "only runs on one stream version can be paired.")
    _check(a, resamples, level)
    ea = resampled_task_errors(a, resamples=resamples, seed=seed)
    eb = resampled_task_errors(b, resamples=resamples, seed=seed)
    diff = ea.per_task - eb.per_task
    totals = np.take_along_axis(diff, ea.task_draws, axis=1).mean(axis=1)
    deltas = tuple(
        TaskDelta(error_a=x.error, error_b=y.error, delta=x.error - y.error,
                  interval=percentile_interval(diff[:, i], level))
        for i, (x, y) in enumerate(zip(a, b, strict=True)))
    return PairedDelta(
        delta=float(np.mean([d.delta for d in deltas])), interval=percentile_interval(totals, level),
        standard_error=float(np.std(totals, ddof=1)), tasks=deltas, resamples=resamples, seed=seed,
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
    from scipy.stats import t as student_t  # noqa: PLC0415 - scipy is slow to import

    sd = float(x.std(ddof=1))
    half = float(student_t.ppf(0.5 + level / 2, df=x.size - 1)) * sd / math.sqrt(x.size)
    return SeedSummary(runs=int(x.size), mean=mean, sd=sd, interval=Interval(mean - half, mean + half, level))


@dataclass(frozen=True)
class ResampledErrors:
    """The draws of a bootstrap and each task's error under them."""

    task_draws: np.ndarray  # (R, T) task indices
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
        per_task[:, i] = _resampled_error(task, draws)
    return ResampledErrors(task_draws=task_draws, per_task=per_task)


def percentile_interval(values: np.ndarray, level: float) -> Interval:
    """The percentile interval of resampled values (resamples with an undefined value skipped)."""
    tail = (1.0 - level) / 2
    low, high = np.nanquantile(values, [tail, 1.0 - tail])
    return Interval(float(low), float(high), level)


def _resampled_error(task: TaskPredictions, draws: np.ndarray) -> np.ndarray:
    if task.kind == "single":
        correct = task.correct
        return np.concatenate([1.0 - correct[chunk].mean(axis=1) for chunk in _chunks(draws)])
    return np.concatenate([1.0 - _weighted_map(task, _counts(chunk, task.num_examples))
                           for chunk in _chunks(draws)])


def _chunks(draws: np.ndarray) -> Iterator[np.ndarray]:
    for start in range(0, draws.shape[0], _CHUNK):
        yield draws[start:start + _CHUNK]


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
    "LEVEL", "RESAMPLES", "SEED", "ErrorInterval", "Interval", "PairedDelta", "ResampledErrors", "SeedSummary",
    "TaskDelta", "bootstrap_draws", "error_interval", "over_seeds", "paired_delta", "percentile_interval",
    "resampled_task_errors",
]
