"""Where a run's objects live in the object store, and which predictor each committed task kept.

The layout is :mod:`services.store.key_layout`'s (its run builders are re-exported here for
the trainer's writers); read back here: a learner that builds on earlier tasks (FT-prev, FT-d,
MT) gets the predictors its run committed by reference, one at a time, instead of carrying
them in its state. The key is derived from rows the database already holds (the attempt
number and the best trial's index), so no column duplicates it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.store.db.models import StreamTask, TaskResult, TaskRun, Trial
from services.store.key_layout import (
    LOG_FILE,
    PREDICT_LOG_FILE,
    PREDICTOR_FILE,
    STATE_FILE,
    attempt_prefix,
    predictor_key,
    trial_prefix,
)


def committed_predictor_keys(session: Session, *, submission_id: int) -> dict[int, str]:
    """Task order → key of the predictor the submission committed for it (its best trial's)."""
    rows = session.execute(
        select(StreamTask.order, TaskRun.attempt, Trial.trial_index)
        .select_from(TaskResult)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
        .join(Trial, Trial.id == TaskResult.best_trial_id)
        .where(TaskResult.submission_id == submission_id)
    ).all()
    return {order: predictor_key(submission_id, order, attempt, index) for order, attempt, index in rows}


def kept_predictor_keys(session: Session) -> set[str]:
    """The key of every committed task's chosen predictor, of every submission (what garbage
    collection keeps; the predictors of trials not chosen are orphans once their task commits)."""
    rows = session.execute(
        select(TaskResult.submission_id, StreamTask.order, TaskRun.attempt, Trial.trial_index)
        .select_from(TaskResult)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
        .join(Trial, Trial.id == TaskResult.best_trial_id)
    )
    return {predictor_key(*row) for row in rows}


__all__ = [
    "LOG_FILE",
    "PREDICTOR_FILE",
    "PREDICT_LOG_FILE",
    "STATE_FILE",
    "attempt_prefix",
    "committed_predictor_keys",
    "kept_predictor_keys",
    "predictor_key",
    "trial_prefix",
]
