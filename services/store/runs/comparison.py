"""Run A against run B, or A's seeds against B's: the read model of ``nevis compare`` and
``GET /v1/compare`` (the method is docs/uncertainty.md).

One run a side gives the paired bootstrap of ΔE with the tasks kept (this benchmark) and the
task-resampled figure beside it, labelled as generalisation to other tasks
(:func:`services.core.uncertainty.paired_delta`); its per-task flags cover test examples only.
Two runs or more a side (seeds of one configuration each) give ΔE over seeds and examples, the
probability of improvement P(A < B) and per-task flags that cover seed variance too
(:func:`services.core.seed_compare.seeds_delta`). Either way the flags are a family, controlled by
Holm. E and cFLOP are always the stored ones; where no interval can be computed, ``reason`` says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from services.core.multiplicity import ALPHA, CORRECTION
from services.core.seed_compare import METHOD as SEEDS_METHOD
from services.core.seed_compare import POI_METHOD, SeedsDelta, seeds_delta
from services.core.uncertainty import (
    GENERALISATION_METHOD,
    LEVEL,
    METHOD,
    RESAMPLES,
    SEED,
    Interval,
    PairedDelta,
    generalisation_fields,
    paired_delta,
)
from services.store.db.models import Submission
from services.store.objects import ObjectStore
from services.store.runs.predictions import load_committed
from services.store.runs.summary import RunSummary, load_summary
from services.store.runs.uncertainty import IncomparableRunsError, cached, headline_rows, store_name, unusable

QUESTION = "this benchmark: the tasks kept"


@dataclass(frozen=True)
class TaskComparison:
    order: int
    dataset: str
    error_a: float  # mean over A's runs
    error_b: float
    flops_a: float
    flops_b: float
    delta: float  # error_a − error_b
    interval: Interval | None  # examples (and seeds) of this task resampled
    differs: bool | None  # flagged after Holm; None without predictions
    p_value: float | None = None
    p_adjusted: float | None = None  # Holm

    @property
    def delta_flops(self) -> float:
        return self.flops_a - self.flops_b


@dataclass(frozen=True)
class Comparison:
    """A's runs against B's on one stream version and phase, over the tasks every run committed:
    ΔE with its interval; Δ cFLOP, which is counted, not sampled (its interval is the point)."""

    a: RunSummary  # A's first run
    b: RunSummary
    tasks: tuple[TaskComparison, ...]
    delta_error: float | None
    result: PairedDelta | SeedsDelta | None
    reason: str | None
    runs_a: tuple[RunSummary, ...] = ()
    runs_b: tuple[RunSummary, ...] = ()

    @property
    def sides(self) -> tuple[tuple[RunSummary, ...], tuple[RunSummary, ...]]:
        return self.runs_a or (self.a,), self.runs_b or (self.b,)

    @property
    def delta_cflop(self) -> float:
        a, b = self.sides
        return _mean(r.cflop for r in a) - _mean(r.cflop for r in b)

    @property
    def interval(self) -> Interval | None:
        return self.result.interval if self.result else None

    @property
    def differing_tasks(self) -> tuple[int, ...]:
        return tuple(t.order for t in self.tasks if t.differs)

    @property
    def over_seeds(self) -> bool:
        return min(len(side) for side in self.sides) >= 2

    def to_dict(self) -> dict[str, Any]:
        """The answer of ``GET /v1/compare``."""
        a, b = self.sides
        r = self.result
        seeds = r if isinstance(r, SeedsDelta) else None
        paired = r if isinstance(r, PairedDelta) else None
        errors_a, errors_b = [s.mean_error for s in a], [s.mean_error for s in b]
        return {
            "a": self.a.submission_id,
            "b": self.b.submission_id,
            "runs_a": [s.submission_id for s in a],
            "runs_b": [s.submission_id for s in b],
            "stream": self.a.stream,
            "stream_version": self.a.stream_version,
            "phase": self.a.phase,
            "error_a": None if None in errors_a else _mean(errors_a),
            "error_b": None if None in errors_b else _mean(errors_b),
            "delta_error": self.delta_error,
            "delta_error_interval": {
                "low": r.interval.low if r else None,
                "high": r.interval.high if r else None,
                "level": LEVEL,
                "standard_error": r.standard_error if r else None,
                "resamples": RESAMPLES,
                "seed": SEED,
                "tasks": len(self.tasks),
                "method": SEEDS_METHOD if self.over_seeds else "paired " + METHOD,
                "question": QUESTION,
                "unavailable": self.reason,
                "generalisation": generalisation_fields(paired.generalisation if paired else None, None)
                if not self.over_seeds
                else None,
            },
            "probability_of_improvement": {
                "estimate": seeds.improvement if seeds else None,
                "low": seeds.improvement_interval.low if seeds else None,
                "high": seeds.improvement_interval.high if seeds else None,
                "level": LEVEL,
                "method": POI_METHOD,
                "unavailable": None if seeds else (self.reason or "needs two runs or more (seeds) on each side"),
            },
            "flags": {
                "noise": r.noise if r else None,
                "correction": CORRECTION,
                "alpha": ALPHA,
                "family": len(self.tasks),
            },
            "cflop_a": _mean(s.cflop for s in a),
            "cflop_b": _mean(s.cflop for s in b),
            "delta_cflop": self.delta_cflop,
            "delta_cflop_interval": {
                "low": self.delta_cflop,
                "high": self.delta_cflop,
                "level": LEVEL,
                "note": "FLOPs are counted, not sampled: no sampling noise",
            },
            "tasks": [
                {
                    "order": t.order,
                    "dataset": t.dataset,
                    "error_a": t.error_a,
                    "error_b": t.error_b,
                    "delta": t.delta,
                    "low": t.interval.low if t.interval else None,
                    "high": t.interval.high if t.interval else None,
                    "differs": t.differs,
                    "p_value": t.p_value,
                    "p_adjusted": t.p_adjusted,
                    "flops_a": t.flops_a,
                    "flops_b": t.flops_b,
                    "delta_flops": t.delta_flops,
                }
                for t in self.tasks
            ],
            "differing_tasks": list(self.differing_tasks),
        }


def compare(session: Session, store: ObjectStore, *, a: int | Sequence[int], b: int | Sequence[int]) -> Comparison:
    """A's run(s) against B's: one each (paired), or two or more each (seeds).

    Raises:
        UnknownNameError: a run does not exist.
        IncomparableRunsError: the runs are not all on one stream version and phase, a run is
            named twice, or one side has one run and the other several.
    """
    ids_a, ids_b = _ids(a), _ids(b)
    _check_sides(ids_a, ids_b)
    summaries = {i: load_summary(session, submission_id=i) for i in (*ids_a, *ids_b)}
    first = summaries[ids_a[0]]
    versions = {i: session.get(Submission, i).stream_version_id for i in summaries}
    for i, s in summaries.items():
        if versions[i] != versions[ids_a[0]] or s.phase != first.phase:
            raise IncomparableRunsError(
                f"Runs {ids_a[0]} ({first.stream} {first.stream_version}, {first.phase}) and {i} "
                f"({s.stream} {s.stream_version}, {s.phase}) cannot be compared: a paired comparison needs the "
                "same stream version and phase (the same test examples)."
            )
    rows = {i: {r.order: r for r in headline_rows(s)} for i, s in summaries.items()}
    orders = tuple(o for o in rows[ids_a[0]] if all(o in found for found in rows.values()))
    result, reason = None, None
    if not orders:
        reason = "the runs have no committed task in common"
    else:
        stored = {i: load_committed(session, store, submission_id=i, orders=orders) for i in summaries}
        reason = next(
            (why for i in summaries if (why := unusable(stored[i], [rows[i][o] for o in orders], run=i))), None
        )
        if reason is None:
            key = (
                "compare",
                store_name(store),
                *(tuple((i, tuple(stored[i].attempts[o] for o in orders)) for i in side) for side in (ids_a, ids_b)),
            )
            runs = {i: [stored[i].tasks[o] for o in orders] for i in summaries}
            try:
                result = cached(key, lambda: _resample([runs[i] for i in ids_a], [runs[i] for i in ids_b]))
            except ValueError as exc:
                reason = str(exc)
    tasks = tuple(
        _task(order, k, [rows[i][order] for i in ids_a], [rows[i][order] for i in ids_b], result)
        for k, order in enumerate(orders)
    )
    delta = sum(t.delta for t in tasks) / len(tasks) if tasks else None
    return Comparison(
        a=first,
        b=summaries[ids_b[0]],
        tasks=tasks,
        delta_error=delta,
        result=result,
        reason=reason,
        runs_a=tuple(summaries[i] for i in ids_a),
        runs_b=tuple(summaries[i] for i in ids_b),
    )


def _resample(a: list, b: list) -> PairedDelta | SeedsDelta:
    if len(a) == 1:
        return paired_delta(a[0], b[0])
    return seeds_delta(a, b)


def _task(order: int, k: int, rows_a: list, rows_b: list, result: PairedDelta | SeedsDelta | None) -> TaskComparison:
    found = result.tasks[k] if result else None
    error_a, error_b = _mean(r.error for r in rows_a), _mean(r.error for r in rows_b)
    return TaskComparison(
        order=order,
        dataset=rows_a[0].dataset,
        error_a=error_a,
        error_b=error_b,
        flops_a=_mean(r.flops for r in rows_a),
        flops_b=_mean(r.flops for r in rows_b),
        delta=error_a - error_b,
        interval=found.interval if found else None,
        differs=found.differs if found else None,
        p_value=found.p_value if found else None,
        p_adjusted=found.p_adjusted if found else None,
    )


def _ids(side: int | Sequence[int]) -> tuple[int, ...]:
    return (side,) if isinstance(side, int) else tuple(side)


def _check_sides(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    if not a or not b:
        raise IncomparableRunsError("A comparison needs at least one run on each side.")
    named = [*a, *b]
    if len(set(named)) != len(named):
        twice = sorted({i for i in named if named.count(i) > 1})
        raise IncomparableRunsError(
            f"Run(s) {', '.join(map(str, twice))} named twice: each run counts once, on one side."
        )
    if (len(a) == 1) != (len(b) == 1):
        raise IncomparableRunsError(
            f"Side A has {len(a)} run(s) and side B {len(b)}: compare one run with one run (paired), or two "
            "runs or more (seeds) on each side."
        )


def _mean(values: Iterable[float]) -> float:
    found = [float(v) for v in values]
    return sum(found) / len(found)


__all__ = ["GENERALISATION_METHOD", "QUESTION", "Comparison", "TaskComparison", "compare"]
