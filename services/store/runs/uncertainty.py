"""How sure a run's E is, and how two runs compare, read from stored predictions.

The read models behind ``nevis results``, ``nevis compare``, ``GET /v1/submissions/{id}``,
``GET /v1/compare`` and the dashboard: the bootstrap interval of a run's E and the paired
comparison of two runs (:mod:`services.core.uncertainty`), over the same tasks E averages (the
run's phase's committed tasks). E and cFLOP are always the stored ones; the resampling only
adds the intervals. Where the intervals cannot be computed (a task committed before
predictions were kept, runs on different stream versions), the figure is None and ``reason``
says why; nothing is invented.

Results are cached per process, keyed by the committed attempts they were computed from, so a
run that commits another task is recomputed and a finished one is not; E's interval is also kept
in the object store beside the predictions (:mod:`services.store.runs.interval_cache`), so a
leaderboard of many runs reads a few bytes per run instead of resampling each.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.core.uncertainty import (
    LEVEL,
    RESAMPLES,
    SEED,
    ErrorInterval,
    Interval,
    PairedDelta,
    error_interval,
    paired_delta,
)
from services.store.db import transaction
from services.store.db.models import Submission
from services.store.objects import ObjectStore
from services.store.runs.board_summaries import keep_board_interval
from services.store.runs.interval_cache import (
    interval_key,
    keep_interval,
    load_interval,
)
from services.store.runs.predictions import (
    StoredPredictions,
    committed_attempts,
    load_committed,
)
from services.store.runs.summary import RunSummary, TaskRow, load_summary


class IncomparableRunsError(NevisError, ValueError):
    """Two runs that were not scored on the same test examples (stream version and phase)."""


log = logging.getLogger("nevis.uncertainty")
METHOD = "two-level bootstrap (tasks, and test examples within tasks), percentile interval"
_TOLERANCE = 1e-9  # a stored error and its predictions' error agree to rounding


@dataclass(frozen=True)
class RunInterval:
    """A run's E with its interval, or why there is none."""

    submission_id: int
    estimate: float | None  # the stored E
    result: ErrorInterval | None
    orders: tuple[int, ...]  # the tasks E averages, in order
    reason: str | None = None

    @property
    def interval(self) -> Interval | None:
        return self.result.interval if self.result else None

    def task_interval(self, order: int) -> Interval | None:
        if self.result is None or order not in self.orders:
            return None
        return self.result.task_intervals[self.orders.index(order)]

    def to_dict(self) -> dict[str, Any]:
        """The API's ``error_interval`` object."""
        result = self.result
        return {
            "low": result.interval.low if result else None, "high": result.interval.high if result else None,
            "level": LEVEL, "standard_error": result.standard_error if result else None,
            "resamples": result.resamples if result else RESAMPLES, "seed": result.seed if result else SEED,
            "tasks": len(self.orders), "method": METHOD, "unavailable": self.reason,
        }


@dataclass(frozen=True)
class TaskComparison:
    order: int
    dataset: str
    error_a: float
    error_b: float
    flops_a: float
    flops_b: float
    delta: float  # error_a − error_b
    interval: Interval | None  # paired, examples of this task resampled
    differs: bool | None  # the interval excludes 0; None without one

    @property
    def delta_flops(self) -> float:
        return self.flops_a - self.flops_b


@dataclass(frozen=True)
class Comparison:
    """Run A against run B on the same stream version and phase: ΔE = E(A) − E(B) over the tasks
    both committed, with its paired interval; Δ cFLOP over the whole stream, which is counted,
    not sampled (its interval is the point: no sampling noise)."""

    a: RunSummary
    b: RunSummary
    tasks: tuple[TaskComparison, ...]
    delta_error: float | None
    result: PairedDelta | None
    reason: str | None

    @property
    def delta_cflop(self) -> float:
        return self.a.cflop - self.b.cflop

    @property
    def interval(self) -> Interval | None:
        return self.result.interval if self.result else None

    @property
    def differing_tasks(self) -> tuple[int, ...]:
        return tuple(t.order for t in self.tasks if t.differs)

    def to_dict(self) -> dict[str, Any]:
        """The answer of ``GET /v1/compare``."""
        interval = self.interval
        return {
            "a": self.a.submission_id, "b": self.b.submission_id,
            "stream": self.a.stream, "stream_version": self.a.stream_version, "phase": self.a.phase,
            "error_a": self.a.mean_error, "error_b": self.b.mean_error,
            "delta_error": self.delta_error,
            "delta_error_interval": {
                "low": interval.low if interval else None, "high": interval.high if interval else None,
                "level": LEVEL, "standard_error": self.result.standard_error if self.result else None,
                "resamples": RESAMPLES, "seed": SEED, "tasks": len(self.tasks),
                "method": "paired " + METHOD, "unavailable": self.reason,
            },
            "cflop_a": self.a.cflop, "cflop_b": self.b.cflop, "delta_cflop": self.delta_cflop,
            "delta_cflop_interval": {"low": self.delta_cflop, "high": self.delta_cflop, "level": LEVEL,
                                     "note": "FLOPs are counted, not sampled: no sampling noise"},
            "tasks": [{
                "order": t.order, "dataset": t.dataset, "error_a": t.error_a, "error_b": t.error_b,
                "delta": t.delta, "low": t.interval.low if t.interval else None,
                "high": t.interval.high if t.interval else None, "differs": t.differs,
                "flops_a": t.flops_a, "flops_b": t.flops_b, "delta_flops": t.delta_flops,
            } for t in self.tasks],
            "differing_tasks": list(self.differing_tasks),
        }


def run_interval(session: Session, store: ObjectStore, *, summary: RunSummary) -> RunInterval:
    """The bootstrap interval of ``summary``'s E from its stored predictions."""
    rows = headline_rows(summary)
    orders = tuple(r.order for r in rows)
    if not rows:
        return RunInterval(summary.submission_id, None, None, orders, "no task of the run is committed yet")
    attempts = committed_attempts(session, submission_id=summary.submission_id)
    key = interval_key(summary.submission_id, [(o, attempts[o]) for o in orders], resamples=RESAMPLES, seed=SEED)
    result = _CACHE.get((_where(store), key)) or load_interval(store, key)  # computed before: nothing to read
    if result is None:
        stored = load_committed(session, store, submission_id=summary.submission_id, orders=orders)
        reason = _unusable(stored, rows)
        if reason:
            return RunInterval(summary.submission_id, summary.mean_error, None, orders, reason)
        result = error_interval([stored.tasks[o] for o in orders])
        keep_interval(store, key, result)
    _cached((_where(store), key), lambda: result)
    return RunInterval(summary.submission_id, summary.mean_error, result, orders)


def run_interval_of(session: Session, store: ObjectStore, *, submission_id: int) -> RunInterval:
    return run_interval(session, store, summary=load_summary(session, submission_id=submission_id))


def keep_run_interval(sessions: Callable[[], Session], store: ObjectStore, *, submission_id: int) -> None:
    """Compute E's interval as a run ends and keep it (:mod:`~services.store.runs.interval_cache`)
    and on the run's leaderboard summary row, so leaderboards read it instead of resampling; a
    failure here is logged, never the run's."""
    try:
        with sessions() as session:
            found = run_interval_of(session, store, submission_id=submission_id)
            if found.result is None:
                return
            committed = committed_attempts(session, submission_id=submission_id)
        attempts = [(order, committed[order]) for order in found.orders if order in committed]
        kept = load_interval(store, interval_key(submission_id, attempts, resamples=RESAMPLES, seed=SEED))
        if kept is not None:  # the interval over exactly these attempts (one committed since would differ)
            with transaction(sessions) as session:  # type: ignore[arg-type]
                keep_board_interval(session, submission_id=submission_id, result=kept, attempts=attempts)
    except Exception:  # noqa: BLE001 - a figure for readers: the run's results are committed already
        log.warning("E's interval of run %d was not kept", submission_id, exc_info=True)


def compare(session: Session, store: ObjectStore, *, a: int, b: int) -> Comparison:
    """Run ``a`` against run ``b``.

    Raises:
        UnknownNameError: either run does not exist.
        IncomparableRunsError: the runs are not on the same stream version and phase (nothing to pair).
    """
    summary_a, summary_b = load_summary(session, submission_id=a), load_summary(session, submission_id=b)
    version_a, version_b = (session.get(Submission, i).stream_version_id for i in (a, b))
    if version_a != version_b or summary_a.phase != summary_b.phase:
        raise IncomparableRunsError(
            f"Runs {a} ({summary_a.stream} {summary_a.stream_version}, {summary_a.phase}) and {b} "
            f"({summary_b.stream} {summary_b.stream_version}, {summary_b.phase}) cannot be compared: a paired "
            "comparison needs the same stream version and phase (the same test examples).")
    rows_b = {r.order: r for r in headline_rows(summary_b)}
    pairs = [(r, rows_b[r.order]) for r in headline_rows(summary_a) if r.order in rows_b]
    orders = tuple(r.order for r, _ in pairs)
    result, reason = None, None
    if not pairs:
        reason = "the two runs have no committed task in common"
    else:
        stored_a = load_committed(session, store, submission_id=a, orders=orders)
        stored_b = load_committed(session, store, submission_id=b, orders=orders)
        reason = (_unusable(stored_a, [r for r, _ in pairs], run=a)
                  or _unusable(stored_b, [r for _, r in pairs], run=b))
        if reason is None:
            key = ("pair", _where(store), a, b, tuple(stored_a.attempts[o] for o in orders),
                   tuple(stored_b.attempts[o] for o in orders))
            try:
                result = _cached(key, lambda: paired_delta([stored_a.tasks[o] for o in orders],
                                                           [stored_b.tasks[o] for o in orders]))
            except ValueError as exc:
                reason = str(exc)
    tasks = tuple(
        TaskComparison(order=ra.order, dataset=ra.dataset, error_a=ra.error, error_b=rb.error,
                       flops_a=ra.flops, flops_b=rb.flops, delta=ra.error - rb.error,
                       interval=result.tasks[i].interval if result else None,
                       differs=result.tasks[i].differs if result else None)
        for i, (ra, rb) in enumerate(pairs))
    delta = sum(t.delta for t in tasks) / len(tasks) if tasks else None
    return Comparison(a=summary_a, b=summary_b, tasks=tasks, delta_error=delta, result=result, reason=reason)


def headline_rows(summary: RunSummary) -> list[TaskRow]:
    """The committed tasks E averages over (the run's phase's)."""
    return [r for r in summary.tasks if r.phase == summary.phase and r.error is not None]


def _unusable(stored: StoredPredictions, rows: list[TaskRow], *, run: int | None = None) -> str | None:
    """Why the stored predictions cannot give an interval; None when they can."""
    of = f" of run {run}" if run is not None else ""
    if stored.missing:
        listed = ", ".join(str(o) for o in stored.missing[:5]) + (" …" if len(stored.missing) > 5 else "")
        return (f"no stored test predictions for {len(stored.missing)} task(s){of} ({listed}); "
                "tasks committed before predictions were kept have none")
    for row in rows:
        recomputed = stored.tasks[row.order].error
        if abs(recomputed - float(row.error)) > _TOLERANCE:
            return (f"the stored predictions of task {row.order}{of} give error {recomputed:.6f}, "
                    f"not the stored {row.error:.6f}")
    return None


def _where(store: ObjectStore) -> str:
    """Which store (and so which database) a cached result came from."""
    return str(getattr(store, "url", id(store)))


_CACHE: OrderedDict[Hashable, Any] = OrderedDict()
_CACHE_SIZE = 512
_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget this process's cached results (after objects were removed by hand, and in tests)."""
    with _LOCK:
        _CACHE.clear()


def _cached(key: Hashable, compute):
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    value = compute()
    with _LOCK:
        _CACHE[key] = value
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return value


__all__ = ["METHOD", "Comparison", "IncomparableRunsError", "clear_cache", "keep_run_interval", "RunInterval", "TaskComparison", "compare", "headline_rows", "run_interval",
           "run_interval_of"]
