"""Where each committed task's evaluation predictions live, and reading them back.

The trainer writes an attempt's predictions (:mod:`services.core.predictions`) under the
attempt's prefix before the task's commit; the key follows from rows the database already holds
(the submission, the task's order and the committed attempt's number), so no column records it.
A run committed before predictions were kept simply has none: :func:`load_committed` says which
tasks lack them, and every reader reports that plainly instead of a number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import ObjectNotFoundError
from services.core.predictions import TaskPredictions, decode
from services.store.db.models import StreamTask, TaskResult, TaskRun
from services.store.key_layout import PREDICTIONS_FILE, predictions_key
from services.store.objects import ObjectStore


def committed_attempts(session: Session, *, submission_id: int) -> dict[int, int]:
    """Task order → number of the attempt the submission committed for it."""
    rows = session.execute(
        select(StreamTask.order, TaskRun.attempt)
        .select_from(TaskResult)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
        .where(TaskResult.submission_id == submission_id)
    ).all()
    return dict(rows)


def committed_predictions_keys(session: Session) -> Iterable[str]:
    """The predictions key of every committed task of every submission (what garbage collection keeps)."""
    rows = session.execute(
        select(TaskResult.submission_id, StreamTask.order, TaskRun.attempt)
        .select_from(TaskResult)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
    )
    return (predictions_key(*row) for row in rows)


@dataclass(frozen=True, eq=False)
class StoredPredictions:
    """The predictions found for the tasks asked for, and the orders that have none."""

    tasks: dict[int, TaskPredictions]
    missing: tuple[int, ...]
    attempts: dict[int, int]  # order → committed attempt, the identity of what was read


def load_committed(
    session: Session, store: ObjectStore, *, submission_id: int, orders: Iterable[int]
) -> StoredPredictions:
    """The stored predictions of the submission's committed tasks among ``orders``."""
    attempts = committed_attempts(session, submission_id=submission_id)
    tasks: dict[int, TaskPredictions] = {}
    missing = []
    for order in orders:
        if order not in attempts:
            missing.append(order)
            continue
        try:
            tasks[order] = decode(store.get_bytes(predictions_key(submission_id, order, attempts[order])))
        except ObjectNotFoundError:
            missing.append(order)
    return StoredPredictions(tasks=tasks, missing=tuple(missing), attempts=attempts)


__all__ = [
    "PREDICTIONS_FILE",
    "StoredPredictions",
    "committed_attempts",
    "committed_predictions_keys",
    "load_committed",
    "predictions_key",
]
