"""A Pareto study's results: one row per point, aggregates over seeds, written as CSV/JSON.

Why here: the study (``nevis study pareto``) is many ordinary runs, so its numbers are read
back from the database with the same read models as every view of a run (``load_summary``
for E and cFLOP, ``task_facts`` for domains and training-set sizes); this module only
arranges them. Per point: learner, budget, seed, E (mean error over the phase's tasks),
cFLOP (every committed task's FLOPs, search included) and the number of tasks E averages.
Per (learner, budget): the mean of E over seeds, its sample standard deviation and the Student t
95 % interval of that mean (:func:`services.core.uncertainty.over_seeds`; None with a single
seed, which is why the study runs three seeds by default), the mean cFLOP, and whether the pair is on that learner's Pareto front
(METRICS.md §1, :func:`~services.core.metrics.pareto_front`). Only complete points (every
headline task scored) enter the aggregates and the figures.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from services.core.metrics import pareto_front
from services.core.uncertainty import over_seeds
from services.dashboard.views import to_csv
from services.store.db.models import Submission
from services.store.runs.details import task_facts
from services.store.runs.summary import RunSummary, load_summary
from workers.trainer.study_plan import StudyPlan, StudyPoint

POINT_COLUMNS = ("learner", "budget", "trials", "steps", "seed", "submission_id", "status", "E", "cFLOP", "tasks")
AGGREGATE_COLUMNS = (
    "learner",
    "budget",
    "trials",
    "steps",
    "seeds",
    "E_mean",
    "E_std",
    "E_ci_low",
    "E_ci_high",
    "cFLOP_mean",
    "on_front",
)
POINTS_CSV, AGGREGATE_CSV, RESULTS_JSON = "points.csv", "aggregate.csv", "results.json"


@dataclass(frozen=True)
class TaskPoint:
    """One task of a point's run: what the regret curves and the slices need."""

    order: int
    dataset: str
    phase: str
    domain: str | None
    train_size: int | None
    error: float | None


@dataclass(frozen=True)
class PointResult:
    """One point of the study as stored (status ``planned`` before its run exists)."""

    learner: str
    budget: str
    trials: int
    steps: int
    seed: int
    submission_id: int | None
    status: str
    phase: str
    mean_error: float | None
    cflop: float
    tasks: int  # headline tasks scored (E averages over these)
    headline_tasks: int
    task_rows: tuple[TaskPoint, ...] = ()

    @property
    def complete(self) -> bool:
        """Finished with every headline task scored: fit for the aggregates and figures."""
        return self.mean_error is not None and self.headline_tasks > 0 and self.tasks == self.headline_tasks

    def row(self) -> dict[str, Any]:
        return {
            "learner": self.learner,
            "budget": self.budget,
            "trials": self.trials,
            "steps": self.steps,
            "seed": self.seed,
            "submission_id": self.submission_id,
            "status": self.status,
            "E": self.mean_error,
            "cFLOP": self.cflop,
            "tasks": self.tasks,
        }


@dataclass(frozen=True)
class AggregateRow:
    """One (learner, budget) over its complete seeds."""

    learner: str
    budget: str
    trials: int
    steps: int
    seeds: int
    mean_error: float
    std_error: float | None  # sample standard deviation over seeds; None with one seed
    mean_cflop: float
    on_front: bool  # on this learner's Pareto front of (mean cFLOP, mean E)
    ci_low: float | None = None  # Student t 95 % interval of the mean E over seeds; None with one seed
    ci_high: float | None = None

    @property
    def ci_half_width(self) -> float | None:
        """Half the width of the seeds' 95 % interval (the figure's error bar); None with one seed."""
        return None if self.ci_high is None else self.ci_high - self.mean_error

    def row(self) -> dict[str, Any]:
        return {
            "learner": self.learner,
            "budget": self.budget,
            "trials": self.trials,
            "steps": self.steps,
            "seeds": self.seeds,
            "E_mean": self.mean_error,
            "E_std": self.std_error,
            "E_ci_low": self.ci_low,
            "E_ci_high": self.ci_high,
            "cFLOP_mean": self.mean_cflop,
            "on_front": self.on_front,
        }


# --- reading -----------------------------------------------------------------------------------


def point_result(point: StudyPoint, summary: RunSummary | None, facts: dict[int, Any] | None = None) -> PointResult:
    """A plan point with its run's summary (None: not created yet) and task facts."""
    base = {
        "learner": point.learner,
        "budget": point.budget.label,
        "trials": point.budget.trials,
        "steps": point.budget.steps,
        "seed": point.seed,
        "submission_id": point.submission_id,
    }
    if summary is None:
        return PointResult(**base, status="planned", phase="", mean_error=None, cflop=0.0, tasks=0, headline_tasks=0)
    facts = facts or {}
    rows = tuple(
        TaskPoint(
            order=t.order,
            dataset=t.dataset,
            phase=t.phase,
            domain=getattr(facts.get(t.order), "domain", None),
            train_size=getattr(facts.get(t.order), "train_size", None),
            error=t.error,
        )
        for t in summary.tasks
    )
    scored = sum(r.error is not None for r in rows if r.phase == summary.phase)
    return PointResult(
        **base,
        status=summary.status,
        phase=summary.phase,
        mean_error=summary.mean_error,
        cflop=summary.cflop,
        tasks=scored,
        headline_tasks=summary.headline_tasks,
        task_rows=rows,
    )


def load_results(session: Session, plan: StudyPlan) -> list[PointResult]:
    """Every point of ``plan`` as the database holds it, in plan order."""
    results = []
    for point in plan.points:
        if point.submission_id is None:
            results.append(point_result(point, None))
            continue
        summary = load_summary(session, submission_id=point.submission_id)
        facts = task_facts(session, session.get(Submission, point.submission_id))
        results.append(point_result(point, summary, facts))
    return results


# --- aggregating ---------------------------------------------------------------------------------


def aggregate(points: Sequence[PointResult]) -> list[AggregateRow]:
    """Mean, sample standard deviation and Student t 95 % interval of E over seeds per
    (learner, budget), in the order pairs first appear; with each learner's Pareto front marked."""
    groups: dict[tuple[str, str], list[PointResult]] = {}
    for point in points:
        if point.complete:
            groups.setdefault((point.learner, point.budget), []).append(point)
    rows = []
    for (learner, budget), members in groups.items():
        errors = [float(p.mean_error) for p in members]  # type: ignore[arg-type]
        spread = over_seeds(errors).interval
        rows.append(
            AggregateRow(
                learner=learner,
                budget=budget,
                trials=members[0].trials,
                steps=members[0].steps,
                seeds=len(members),
                mean_error=statistics.fmean(errors),
                std_error=statistics.stdev(errors) if len(errors) > 1 else None,
                mean_cflop=statistics.fmean(p.cflop for p in members),
                on_front=False,
                ci_low=None if spread is None else spread.low,
                ci_high=None if spread is None else spread.high,
            )
        )
    return _mark_fronts(rows)


def _mark_fronts(rows: list[AggregateRow]) -> list[AggregateRow]:
    """Each row with ``on_front`` set within its learner's rows."""
    flags: dict[int, bool] = {}
    for learner in dict.fromkeys(r.learner for r in rows):
        members = [i for i, r in enumerate(rows) if r.learner == learner]
        front = pareto_front([(rows[i].mean_cflop, rows[i].mean_error) for i in members])
        flags.update(zip(members, front, strict=True))
    return [AggregateRow(**{**asdict(r), "on_front": flags[i]}) for i, r in enumerate(rows)]


# --- writing -------------------------------------------------------------------------------------


def results_document(plan: StudyPlan, points: Sequence[PointResult], rows: Sequence[AggregateRow]) -> dict[str, Any]:
    """The JSON of the study's results: the grid, every point (with its per-task errors) and
    the aggregates."""
    grid = plan.grid
    return {
        "stream": grid.stream,
        "phase": grid.phase,
        "learners": list(grid.learners),
        "budgets": [b.label for b in grid.budgets],
        "seeds": list(grid.seeds),
        "points": [
            {
                **p.row(),
                "complete": p.complete,
                "headline_tasks": p.headline_tasks,
                "per_task": [asdict(t) for t in p.task_rows],
            }
            for p in points
        ],
        "aggregate": [r.row() for r in rows],
    }


def write_tables(
    folder: Path, plan: StudyPlan, points: Sequence[PointResult], rows: Sequence[AggregateRow]
) -> list[Path]:
    """``points.csv``, ``aggregate.csv`` and ``results.json`` in ``folder``; their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = {
        POINTS_CSV: to_csv((p.row() for p in points), POINT_COLUMNS),
        AGGREGATE_CSV: to_csv((r.row() for r in rows), AGGREGATE_COLUMNS),
        RESULTS_JSON: json.dumps(results_document(plan, points, rows), indent=2) + "\n",
    }
    for name, text in written.items():
        (folder / name).write_text(text)
    return [folder / name for name in written]


__all__ = [
    "AGGREGATE_COLUMNS",
    "AGGREGATE_CSV",
    "POINTS_CSV",
    "POINT_COLUMNS",
    "RESULTS_JSON",
    "AggregateRow",
    "PointResult",
    "TaskPoint",
    "aggregate",
    "load_results",
    "point_result",
    "results_document",
    "write_tables",
]
