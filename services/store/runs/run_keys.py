"""Where a run's objects live in the object store, and which predictor each committed task kept.

One layout, written by the trainer (checkpoints, predictors and states under a task
attempt's prefix) and read back here: a learner that builds on earlier tasks (FT-prev, FT-d,
MT) gets the predictors its run committed by reference, one at a time, instead of carrying
them in its state. The key is derived from rows the database already holds (the attempt
number and the best trial's index), so no column duplicates it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.store.db.models import StreamTask, TaskResult, TaskRun, Trial

PREDICTOR_FILE = "predictor.bin"
STATE_FILE = "state.pkl"
LOG_FILE = "log.txt"
"""A trial's log (its learner host's output and failures, bounded) under the trial's prefix."""
PREDICT_LOG_FILE = "predict-log.txt"
"""The log of an attempt's prediction job (scoring the chosen predictor) under the attempt's prefix."""


def attempt_prefix(submission_id: int, order: int, attempt: int) -> str:
    """The prefix of every object one attempt at one task writes."""
    return f"runs/{submission_id}/task-{order:03d}/attempt-{attempt}"


def trial_prefix(attempt_key_prefix: str, trial_index: int) -> str:
    """The prefix of one trial's objects inside its attempt."""
    return f"{attempt_key_prefix}/trial-{trial_index:03d}"


def predictor_key(submission_id: int, order: int, attempt: int, trial_index: int) -> str:
    """The key of the predictor a trial saved."""
    return f"{trial_prefix(attempt_prefix(submission_id, order, attempt), trial_index)}/{PREDICTOR_FILE}"


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


__all__ = [
    "LOG_FILE", "PREDICTOR_FILE", "PREDICT_LOG_FILE", "STATE_FILE", "attempt_prefix", "committed_predictor_keys", "predictor_key",
    "trial_prefix",
]
