"""How sure a run's E is, and how two runs compare, read from stored predictions.

The read models behind ``nevis results``, ``GET /v1/submissions/{id}`` and the dashboard: the
bootstrap interval of a run's E on this benchmark (the tasks kept, test examples resampled),
with the task-resampled figure beside it labelled as generalisation to other tasks
(:mod:`services.core.uncertainty`), over the tasks E averages (the run's phase's committed
tasks). Comparisons of runs are :mod:`services.store.runs.comparison`. E and cFLOP are always the stored ones; the resampling only
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
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.core.uncertainty import (
    LEVEL,
    METHOD,
    RESAMPLES,
    SEED,
    ErrorInterval,
    Interval,
    error_interval,
    generalisation_fields,
)
from services.store.db import transaction
from services.store.objects import ObjectStore
from services.store.runs.board_summaries import keep_board_interval
from services.store.runs.interval_cache import interval_key, keep_interval, load_interval
from services.store.runs.predictions import StoredPredictions, committed_attempts, load_committed
from services.store.runs.summary import RunSummary, TaskRow, load_summary


class IncomparableRunsError(NevisError, ValueError):
    """Two runs that were not scored on the same test examples (stream version and phase)."""


log = logging.getLogger("nevis.uncertainty")
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
            "low": result.interval.low if result else None,
            "high": result.interval.high if result else None,
            "level": LEVEL,
            "standard_error": result.standard_error if result else None,
            "resamples": result.resamples if result else RESAMPLES,
            "seed": result.seed if result else SEED,
            "tasks": len(self.orders),
            "method": METHOD,
            "question": "this benchmark: the tasks kept",
            "unavailable": self.reason,
            "generalisation": generalisation_fields(
                result.generalisation if result else None, result.generalisation_standard_error if result else None
            ),
        }


def run_interval(session: Session, store: ObjectStore, *, summary: RunSummary) -> RunInterval:
    """The bootstrap interval of ``summary``'s E from its stored predictions."""
    rows = headline_rows(summary)
    orders = tuple(r.order for r in rows)
    if not rows:
        return RunInterval(summary.submission_id, None, None, orders, "no task of the run is committed yet")
    attempts = committed_attempts(session, submission_id=summary.submission_id)
    key = interval_key(summary.submission_id, [(o, attempts[o]) for o in orders], resamples=RESAMPLES, seed=SEED)
    result = _CACHE.get((store_name(store), key)) or load_interval(store, key)  # computed before: nothing to read
    if result is None:
        stored = load_committed(session, store, submission_id=summary.submission_id, orders=orders)
        reason = unusable(stored, rows)
        if reason:
            return RunInterval(summary.submission_id, summary.mean_error, None, orders, reason)
        result = error_interval([stored.tasks[o] for o in orders])
        keep_interval(store, key, result)
    cached((store_name(store), key), lambda: result)
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
    except Exception:
        log.warning("E's interval of run %d was not kept", submission_id, exc_info=True)


def headline_rows(summary: RunSummary) -> list[TaskRow]:
    """The committed tasks E averages over (the run's phase's)."""
    return [r for r in summary.tasks if r.phase == summary.phase and r.error is not None]


def unusable(stored: StoredPredictions, rows: list[TaskRow], *, run: int | None = None) -> str | None:
    """Why the stored predictions cannot give an interval; None when they can."""
    of = f" of run {run}" if run is not None else ""
    if stored.missing:
        listed = ", ".join(str(o) for o in stored.missing[:5]) + (" …" if len(stored.missing) > 5 else "")
        return (
            f"no stored test predictions for {len(stored.missing)} task(s){of} ({listed}); "
            "tasks committed before predictions were kept have none"
        )
    for row in rows:
        recomputed = stored.tasks[row.order].error
        if abs(recomputed - float(row.error)) > _TOLERANCE:
            return (
                f"the stored predictions of task {row.order}{of} give error {recomputed:.6f}, "
                f"not the stored {row.error:.6f}"
            )
    return None


def store_name(store: ObjectStore) -> str:
    """Which store (and so which database) a cached result came from."""
    return str(getattr(store, "url", id(store)))


_CACHE: OrderedDict[Hashable, Any] = OrderedDict()
T = TypeVar("T")
_CACHE_SIZE = 512
_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget this process's cached results (after objects were removed by hand, and in tests)."""
    with _LOCK:
        _CACHE.clear()


def cached(key: Hashable, compute: Callable[[], T]) -> T:
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


__all__ = [
    "METHOD",
    "IncomparableRunsError",
    "RunInterval",
    "cached",
    "clear_cache",
    "headline_rows",
    "keep_run_interval",
    "run_interval",
    "run_interval_of",
    "store_name",
    "unusable",
]
