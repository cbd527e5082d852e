"""What each page shows, computed from the store's read models (no SQL here)."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from services.core.errors import UnknownNameError
from services.core.metrics import mean_error, regret_curve
from services.dashboard import figures
from services.store.db.models import Submission
from services.store.runs.details import EventRow, TaskFacts, indep_reference, owner_of, recent_events, task_facts
from services.store.runs.summary import RunSummary, load_summary

LIVE_STATUSES = frozenset({"queued", "running"})
SIZE_BUCKETS = ((1_000, "< 1k"), (10_000, "1k – 10k"), (100_000, "10k – 100k"), (float("inf"), "≥ 100k"))
TASK_COLUMNS = (
    "order",
    "dataset",
    "year",
    "phase",
    "domain",
    "train_size",
    "status",
    "error",
    "split",
    "flops",
    "flops_paper",
    "flops_validation",
    "flops_prediction",
    "flops_floored",
    "inconsistent",
    "cpu_seconds",
    "retried_flops",
    "trials",
    "failed_trials",
    "wall_time_s",
)


@dataclass(frozen=True)
class SubmissionView:
    summary: RunSummary
    owner: str | None
    live: bool
    done: int
    tasks: list[dict[str, Any]]
    by_domain: dict[str, float]
    by_size: dict[str, float]
    reference: int | None
    events: list[EventRow]
    figures: dict[str, dict[str, Any]]
    visibility: str = "public"  # "private": only its owner and admins are shown this page


def submission_view(session: Session, submission_id: int) -> SubmissionView:
    """The submission page's data; an unknown id is an UnknownNameError."""
    summary = load_summary(session, submission_id=submission_id)
    submission = session.get(Submission, submission_id)
    facts = task_facts(session, submission)
    tasks = task_table(summary, facts)
    headline = [t for t in tasks if t["phase"] == summary.phase and t["error"] is not None]
    by_domain = _means((t["domain"] or "unknown", t["error"]) for t in headline)
    by_size = _means(
        ((_size_bucket(t["train_size"]), t["error"]) for t in headline),
        order=[label for _, label in SIZE_BUCKETS] + ["unknown"],
    )
    orders = [t["order"] for t in tasks]
    charts = {
        "tasks": figures.task_errors(
            orders, [t["error"] for t in tasks], [t["flops"] for t in tasks], labels=[t["dataset"] for t in tasks]
        )
    }
    reference = indep_reference(session, submission, summary.cflop)
    if reference is not None:
        theirs = {t.order: t.error for t in load_summary(session, submission_id=reference).tasks}
        curve = regret_curve([t["error"] for t in tasks], [theirs.get(o) for o in orders])
        charts["regret"] = figures.regret(orders, curve, reference=reference)
    if by_domain:
        charts["domains"] = figures.slices(by_domain, title="E by domain", axis="domain")
    if by_size:
        charts["sizes"] = figures.slices(by_size, title="E by training-set size", axis="train examples")
    return SubmissionView(
        summary=summary,
        owner=owner_of(session, submission_id),
        live=summary.status in LIVE_STATUSES,
        done=sum(t["status"] == "committed" for t in tasks),
        tasks=tasks,
        by_domain=by_domain,
        by_size=by_size,
        reference=reference,
        events=recent_events(session, submission_id),
        figures=charts,
        visibility=submission.visibility,
    )


def task_table(summary: RunSummary, facts: dict[int, TaskFacts]) -> list[dict[str, Any]]:
    """A run's per-task rows with their domain and train-split size."""
    rows = []
    for task in summary.tasks:
        fact = facts.get(task.order)
        rows.append(
            {
                "order": task.order,
                "dataset": task.dataset,
                "year": task.year,
                "phase": task.phase,
                "domain": fact.domain if fact else None,
                "train_size": fact.train_size if fact else None,
                "status": task.status,
                "error": task.error,
                "split": task.split,
                "flops": task.flops,
                "retried_flops": task.retried_flops,
                "trials": task.trials,
                "failed_trials": task.failed_trials,
                "wall_time_s": task.wall_time_s,
                "cpu_seconds": task.cpu_seconds,
                "flops_floored": task.flops_floored,
                "flops_near_floor": task.flops_near_floor,
                "cpu_estimated": task.cpu_estimated,
                "flops_paper": task.flops_paper,
                "flops_validation": task.flops_validation,
                "flops_prediction": task.flops_prediction,
                "inconsistent": task.inconsistent,
            }
        )
    return rows


def submission_tasks(session: Session, submission_id: int) -> list[dict[str, Any]]:
    summary = load_summary(session, submission_id=submission_id)
    return task_table(summary, task_facts(session, session.get(Submission, submission_id)))


@dataclass(frozen=True)
class CompareView:
    summaries: list[RunSummary]
    rows: list[dict[str, Any]]
    figure: dict[str, Any]


def compare_view(session: Session, ids: Sequence[int]) -> CompareView:
    """Submissions side by side, task by task (matched on stream order)."""
    summaries = [load_summary(session, submission_id=i) for i in ids]
    streams = {(s.stream, s.stream_version) for s in summaries}
    if len(streams) > 1:
        raise UnknownNameError(
            "Only submissions of one stream version can be compared; got "
            + ", ".join(f"{a}/{b}" for a, b in sorted(streams))
            + "."
        )
    orders = sorted({t.order for s in summaries for t in s.tasks})
    by_order = [{t.order: t for t in s.tasks} for s in summaries]
    rows = []
    for order in orders:
        first = next(m[order] for m in by_order if order in m)
        row: dict[str, Any] = {"order": order, "dataset": first.dataset, "phase": first.phase}
        for summary, tasks in zip(summaries, by_order, strict=True):
            task = tasks.get(order)
            row[f"error_{summary.submission_id}"] = task.error if task else None
            row[f"flops_{summary.submission_id}"] = task.flops if task else None
        rows.append(row)
    series = {
        f"#{s.submission_id} {s.learner}": (orders, [m.get(o).error if m.get(o) else None for o in orders])
        for s, m in zip(summaries, by_order, strict=True)
    }
    return CompareView(summaries, rows, figures.compare(series))


def to_csv(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as CSV with a header; values a spreadsheet would read as formulas are quoted off."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in columns})
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value  # CSV injection: a learner's name is a stranger's text
    return "" if value is None else value


def _means(pairs: Iterable[tuple[str, float]], order: Sequence[str] | None = None) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for key, value in pairs:
        groups[key].append(value)
    keys = sorted(groups, key=(lambda k: order.index(k)) if order else None)
    return {key: mean_error(groups[key]) for key in keys}


def _size_bucket(size: int | None) -> str:
    if size is None:
        return "unknown"
    return next(label for bound, label in SIZE_BUCKETS if size < bound)


__all__ = [
    "LIVE_STATUSES",
    "TASK_COLUMNS",
    "CompareView",
    "SubmissionView",
    "compare_view",
    "submission_tasks",
    "submission_view",
    "task_table",
    "to_csv",
]
