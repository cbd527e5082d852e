"""Which probe jobs a submission needs, and queueing them (idempotently).

Only committed work is probed: for each task with a committed result, the trials of the
task run that produced it and every checkpoint they saved. Each checkpoint gets a
``checkpoint`` job, each trial with checkpoints a ``trial`` job (its mismatch curves), and
the submission one ``summary`` job (the proxy correlations). Job keys name the object and
the settings hash, so planning again queues only what is new; when something new is
queued, the finished summary is reopened so it covers the new tasks too.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.store.db.models import Checkpoint, StreamTask, Submission, TaskResult, Trial
from services.store.db.models_probe import ProbeJob
from workers.probe import queue
from workers.probe.queue import JobSpec
from workers.probe.settings import ProbeSettings


def checkpoint_key(checkpoint_id: int, settings_hash: str) -> str:
    return f"checkpoint:{checkpoint_id}:{settings_hash}"


def trial_key(trial_id: int, settings_hash: str) -> str:
    return f"trial:{trial_id}:{settings_hash}"


def summary_key(submission_id: int, settings_hash: str) -> str:
    return f"summary:{submission_id}:{settings_hash}"


def committed_orders(session: Session, *, submission_id: int) -> list[int]:
    """Orders of the submission's committed tasks, ascending."""
    return list(session.scalars(
        select(StreamTask.order).join(TaskResult, TaskResult.stream_task_id == StreamTask.id)
        .where(TaskResult.submission_id == submission_id).order_by(StreamTask.order)
    ))


def plan_jobs(session: Session, *, submission_id: int, settings_hash: str,
              task_order: int | None = None) -> list[JobSpec]:
    """The jobs of a submission's committed tasks (or of task ``task_order`` only).

    Raises:
        NevisError: No such submission, or ``task_order`` is not a committed task of it.
    """
    if session.get(Submission, submission_id) is None:
        raise NevisError(f"No run with id {submission_id} in this database.")
    query = (
        select(StreamTask.order, Trial.id, Checkpoint.id)
        .select_from(TaskResult)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(Trial, Trial.task_run_id == TaskResult.task_run_id)
        .join(Checkpoint, Checkpoint.trial_id == Trial.id)
        .where(TaskResult.submission_id == submission_id)
        .order_by(StreamTask.order, Trial.trial_index, Checkpoint.step)
    )
    if task_order is not None:
        orders = committed_orders(session, submission_id=submission_id)
        if task_order not in orders:
            raise NevisError(
                f"Task {task_order} of run {submission_id} has no committed result to probe; "
                f"committed tasks: {orders or 'none yet'}."
            )
        query = query.where(StreamTask.order == task_order)
    jobs: list[JobSpec] = []
    trials: dict[int, int] = {}
    for order, trial_id, checkpoint_id in session.execute(query):
        jobs.append(JobSpec(checkpoint_key(checkpoint_id, settings_hash), "checkpoint",
                            submission_id, order, settings_hash, trial_id, checkpoint_id))
        trials.setdefault(trial_id, order)
    jobs += [JobSpec(trial_key(t, settings_hash), "trial", submission_id, order, settings_hash, t)
             for t, order in trials.items()]
    if jobs:
        jobs.append(JobSpec(summary_key(submission_id, settings_hash), "summary", submission_id,
                            0, settings_hash))
    return jobs


def enqueue_submission(session: Session, *, submission_id: int, settings: ProbeSettings,
                       task_order: int | None = None, retry_failed: bool = False,
                       max_attempts: int = queue.DEFAULT_MAX_ATTEMPTS) -> int:
    """Store the settings and queue the submission's missing jobs; returns how many were new.

    With ``retry_failed``, failed jobs of the submission (same settings) are queued again.
    Storing the settings is the first statement, a write (see :func:`enqueue_committed`).
    """
    settings_hash = queue.ensure_settings(session, settings)
    jobs = plan_jobs(session, submission_id=submission_id, settings_hash=settings_hash,
                     task_order=task_order)
    added = queue.enqueue(session, jobs, max_attempts=max_attempts)
    reopened = 0
    if retry_failed:
        failed = queue.failed_jobs(session, submission_id=submission_id, settings_hash=settings_hash)
        keys = {key for key, _, _ in failed}
        # A trial's mismatch curves must be recomputed once its missing checkpoints are back.
        keys |= {trial_key(t, settings_hash) for _, kind, t in failed if kind == "checkpoint"}
        reopened = queue.reopen(session, job_keys=sorted(keys))
    if added or reopened:
        queue.reopen(session, job_keys=[summary_key(submission_id, settings_hash)])
    return added


def enqueue_committed(session: Session, *, settings: ProbeSettings) -> int:
    """Queue the jobs of committed tasks that have none yet (the pool's watch mode).

    Only (run, task) pairs without a checkpoint job under these settings are planned, so a
    poll costs two small queries once everything is queued.
    """
    # Write before reading: on SQLite a transaction that reads first cannot later take the
    # write lock if another worker wrote meanwhile ("database is locked", no waiting).
    settings_hash = queue.ensure_settings(session, settings)
    committed = {tuple(row) for row in session.execute(
        select(TaskResult.submission_id, StreamTask.order)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
    )}
    planned = {tuple(row) for row in session.execute(
        select(ProbeJob.submission_id, ProbeJob.task_order).distinct()
        .where(ProbeJob.settings_hash == settings_hash, ProbeJob.kind == "checkpoint")
    )}
    return sum(enqueue_submission(session, submission_id=sub, settings=settings, task_order=order)
               for sub, order in sorted(committed - planned))


__all__ = [
    "checkpoint_key", "committed_orders", "enqueue_committed", "enqueue_submission", "plan_jobs",
    "summary_key", "trial_key",
]
