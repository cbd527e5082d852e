"""What a submission's page shows beside its summary: owner, task facts, events, and the
Indep run it is compared with (METRICS.md §1, regret against the independent baseline)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.store.db.models import Dataset, Event, Learner, StreamTask, Submission, TaskResult
from services.store.db.models_coordinator import ScheduledSubmission, User
from services.store.runs.board_query import is_baseline

INDEP_NAME = "indep"
"""The built-in independent baseline's registry name (and its variants' prefix, e.g.
``indep_resnet34``)."""


@dataclass(frozen=True)
class TaskFacts:
    order: int
    domain: str | None
    train_size: int | None  # examples in the train split at the submission's image size


@dataclass(frozen=True)
class EventRow:
    id: int
    kind: str
    created_at: datetime
    payload: dict[str, Any]


def owner_of(session: Session, submission_id: int) -> str | None:
    """The submitting user's name; None for a local run (``nevis run``)."""
    return session.scalar(
        select(User.name)
        .join(ScheduledSubmission, ScheduledSubmission.user_id == User.id)
        .where(ScheduledSubmission.submission_id == submission_id)
    )


def task_facts(session: Session, submission: Submission) -> dict[int, TaskFacts]:
    """Domain and train-split size of each task of the submission's stream version."""
    rows = session.execute(
        select(StreamTask.order, StreamTask.domain, Dataset.split_counts)
        .outerjoin(Dataset, (Dataset.key == StreamTask.dataset) & (Dataset.image_size == submission.image_size))
        .where(StreamTask.stream_version_id == submission.stream_version_id)
    ).all()
    return {order: TaskFacts(order, domain, _train(counts)) for order, domain, counts in rows}


def recent_events(session: Session, submission_id: int, *, limit: int = 100) -> list[EventRow]:
    """The submission's newest events, newest first."""
    rows = session.scalars(
        select(Event).where(Event.submission_id == submission_id).order_by(Event.id.desc()).limit(limit)
    )
    return [EventRow(e.id, e.kind, e.created_at, dict(e.payload or {})) for e in rows]


def indep_reference(session: Session, submission: Submission, cflop: float) -> int | None:
    """The finished public Indep submission on the same stream version and phase whose cFLOP
    is closest (on a log scale) to ``cflop``: the regret curve's reference (a private run is
    nobody's reference: every reader of a page may follow its link)."""
    rows = session.execute(
        select(TaskResult.submission_id, func.sum(TaskResult.flops))
        .join(Submission, Submission.id == TaskResult.submission_id)
        .join(Learner, Learner.id == Submission.learner_id)
        .where(
            Submission.stream_version_id == submission.stream_version_id,
            Submission.phase == submission.phase,
            Submission.status == "succeeded",
            Submission.id != submission.id,
            Submission.visibility == "public",
            Learner.entrypoint.startswith(INDEP_NAME),
            is_baseline(Learner.entrypoint),
        )
        .group_by(TaskResult.submission_id)
    ).all()
    if not rows:
        return None
    scale = math.log10(max(cflop, 1.0))
    return min(sorted(rows), key=lambda row: abs(math.log10(max(float(row[1]), 1.0)) - scale))[0]


def _train(counts: Any) -> int | None:
    if isinstance(counts, dict) and isinstance(counts.get("train"), int | float):
        return int(counts["train"])
    return None


__all__ = ["INDEP_NAME", "EventRow", "TaskFacts", "indep_reference", "owner_of", "recent_events", "task_facts"]
