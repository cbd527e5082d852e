"""Which probe jobs a submission needs, and queueing them (idempotently).

Only committed work is probed: for each task with a committed result, every checkpoint of
its chosen trial (the one whose predictor was committed) and a sample of the task run's
other trials: the ``other_trials`` with the lowest trial index (the search draws trials in
that order, so they are the first ones it tried; ``None`` takes every trial), each at
``other_checkpoints`` of its checkpoints (the first and the last for 2, evenly spaced
between for more; ``None`` takes them all). Each probed checkpoint gets a
``checkpoint`` job, each trial with checkpoints a ``trial`` job (its mismatch curves), and
the submission one ``summary`` job (the proxy correlations). Job keys name the object and
the settings hash, so planning again queues only what is new; when something new is
queued, the finished summary is reopened so it covers the new tasks too.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.store.db.models import Checkpoint, StreamTask, Submission, TaskResult, Trial
from services.store.db.models_probe import ProbeJob
from services.store.probes import queue_plans
from services.store.probes.queue_plans import JobSpec
from services.store.probes.settings import ProbeSettings


def checkpoint_key(checkpoint_id: int, settings_hash: str) -> str:
    return f"checkpoint:{checkpoint_id}:{settings_hash}"


def trial_key(trial_id: int, settings_hash: str) -> str:
    return f"trial:{trial_id}:{settings_hash}"


def summary_key(submission_id: int, settings_hash: str) -> str:
    return f"summary:{submission_id}:{settings_hash}"


def committed_orders(session: Session, *, submission_id: int) -> list[int]:
    """Orders of the submission's committed tasks, ascending."""
    return list(
        session.scalars(
            select(StreamTask.order)
            .join(TaskResult, TaskResult.stream_task_id == StreamTask.id)
            .where(TaskResult.submission_id == submission_id)
            .order_by(StreamTask.order)
        )
    )


def probed_trials(trials: list[tuple[int, int]], chosen: int, other_trials: int | None) -> set[int]:
    """Ids of the trials to probe: ``chosen`` and the first ``other_trials`` others by index.

    Args:
        trials: (trial id, trial index) of one task run.
        chosen: Id of the trial whose predictor was committed.
        other_trials: How many other trials; None for all.

    Examples:
        >>> sorted(probed_trials([(10, 0), (11, 1), (12, 2), (13, 3)], 12, 1))
        [10, 12]
        >>> sorted(probed_trials([(10, 0), (11, 1)], 10, None))
        [10, 11]
    """
    others = [t for t, _ in sorted(trials, key=lambda row: row[1]) if t != chosen]
    return {chosen, *(others if other_trials is None else others[:other_trials])}


def sampled_checkpoints(steps: list[int], count: int | None) -> set[int]:
    """The ``count`` of ``steps`` to probe on a trial that was not chosen: the first and the
    last, then evenly spaced between them (None or enough: every one).

    Examples:
        >>> sorted(sampled_checkpoints([0, 40, 80, 120, 160, 200], 2))
        [0, 200]
        >>> sorted(sampled_checkpoints([0, 40, 80, 120, 160, 200], 3))
        [0, 80, 200]
        >>> sorted(sampled_checkpoints([0, 40, 80], 1))
        [80]
        >>> sorted(sampled_checkpoints([0, 40, 80], None))
        [0, 40, 80]
    """
    ordered = sorted(set(steps))
    if count is None or count >= len(ordered):
        return set(ordered)
    if count == 1:
        return {ordered[-1]}
    last = len(ordered) - 1
    return {ordered[round(i * last / (count - 1))] for i in range(count)}


def plan_jobs(
    session: Session,
    *,
    submission_id: int,
    settings_hash: str,
    task_order: int | None = None,
    other_trials: int | None = None,
    other_checkpoints: int | None = None,
) -> list[JobSpec]:
    """The jobs of a submission's committed tasks (or of task ``task_order`` only), for
    every checkpoint of the chosen trial and ``other_checkpoints`` checkpoints (first and
    last, ...; None: all) of ``other_trials`` others of each task (None: every trial).

    Raises:
        NevisError: No such submission, or ``task_order`` is not a committed task of it.
    """
    if session.get(Submission, submission_id) is None:
        raise NevisError(f"No run with id {submission_id} in this database.")
    query = (
        select(StreamTask.order, Trial.id, Checkpoint.id, Trial.trial_index, TaskResult.best_trial_id, Checkpoint.step)
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
    rows = session.execute(query).all()
    per_task: dict[int, dict[int, int]] = {}
    steps: dict[int, list[int]] = {}
    for order, trial_id, _, index, _, step in rows:
        per_task.setdefault(order, {})[trial_id] = index
        steps.setdefault(trial_id, []).append(step)
    chosen = {order: best for order, _, _, _, best, _ in rows}
    keep = set().union(*(probed_trials(list(t.items()), chosen[o], other_trials) for o, t in per_task.items()))
    best = set(chosen.values())
    sampled = {
        t: sampled_checkpoints(s, None if t in best else other_checkpoints) for t, s in steps.items() if t in keep
    }
    jobs: list[JobSpec] = []
    trials: dict[int, int] = {}
    for order, trial_id, checkpoint_id, _, _, step in rows:
        if trial_id not in keep or step not in sampled[trial_id]:
            continue
        jobs.append(
            JobSpec(
                checkpoint_key(checkpoint_id, settings_hash),
                "checkpoint",
                submission_id,
                order,
                settings_hash,
                trial_id,
                checkpoint_id,
            )
        )
        trials.setdefault(trial_id, order)
    jobs += [
        JobSpec(trial_key(t, settings_hash), "trial", submission_id, order, settings_hash, t)
        for t, order in trials.items()
    ]
    if jobs:
        jobs.append(JobSpec(summary_key(submission_id, settings_hash), "summary", submission_id, 0, settings_hash))
    return jobs


@dataclass(frozen=True)
class QueuedJobs:
    """What :func:`queue_submission` did: how many jobs were new, and the ids of every job of
    its plan (new, queued before, done, reopened): the jobs its caller may drain."""

    added: int
    job_ids: tuple[int, ...]


def enqueue_submission(
    session: Session,
    *,
    submission_id: int,
    settings: ProbeSettings,
    task_order: int | None = None,
    retry_failed: bool = False,
    max_attempts: int = queue_plans.DEFAULT_MAX_ATTEMPTS,
) -> int:
    """Store the settings and queue the submission's missing jobs; returns how many were new.

    With ``retry_failed``, failed jobs of the submission (same settings) are queued again.
    Storing the settings is the first statement, a write (see :func:`enqueue_committed`).
    """
    added, _ = _enqueue(
        session,
        submission_id=submission_id,
        settings=settings,
        task_order=task_order,
        retry_failed=retry_failed,
        max_attempts=max_attempts,
    )
    return added


def queue_submission(
    session: Session,
    *,
    submission_id: int,
    settings: ProbeSettings,
    task_order: int | None = None,
    retry_failed: bool = False,
    max_attempts: int = queue_plans.DEFAULT_MAX_ATTEMPTS,
) -> QueuedJobs:
    """:func:`enqueue_submission`, also naming the jobs of this plan, so that ``nevis probe
    run`` drains those and no other job waiting in the shared queue."""
    added, keys = _enqueue(
        session,
        submission_id=submission_id,
        settings=settings,
        task_order=task_order,
        retry_failed=retry_failed,
        max_attempts=max_attempts,
    )
    return QueuedJobs(added=added, job_ids=queue_plans.job_ids(session, keys))


def _enqueue(
    session: Session,
    *,
    submission_id: int,
    settings: ProbeSettings,
    task_order: int | None,
    retry_failed: bool,
    max_attempts: int,
) -> tuple[int, list[str]]:
    """Queue the plan; returns how many jobs were new and the keys of the plan's jobs."""
    settings_hash = queue_plans.ensure_settings(session, settings)
    jobs = plan_jobs(
        session,
        submission_id=submission_id,
        settings_hash=settings_hash,
        task_order=task_order,
        other_trials=settings.other_trials,
        other_checkpoints=settings.other_checkpoints,
    )
    added = queue_plans.enqueue(session, jobs, max_attempts=max_attempts)
    keys = {job.job_key for job in jobs}
    reopened = 0
    if retry_failed:
        failed = queue_plans.failed_jobs(session, submission_id=submission_id, settings_hash=settings_hash)
        again = {key for key, _, _ in failed}
        # A trial's mismatch curves must be recomputed once its missing checkpoints are back.
        again |= {trial_key(t, settings_hash) for _, kind, t in failed if kind == "checkpoint"}
        reopened = queue_plans.reopen(session, job_keys=sorted(again))
        keys |= again
    if added or reopened:
        summary = summary_key(submission_id, settings_hash)
        queue_plans.reopen(session, job_keys=[summary])
        keys.add(summary)
    return added, sorted(keys)


def enqueue_committed(session: Session, *, settings: ProbeSettings) -> int:
    """Queue the jobs of committed tasks that have none yet (the pool's watch mode).

    Only (run, task) pairs without a checkpoint job under these settings are planned, so a
    poll costs two small queries once everything is queued.
    """
    # Write before reading: on SQLite a transaction that reads first cannot later take the
    # write lock if another worker wrote meanwhile ("database is locked", no waiting).
    settings_hash = queue_plans.ensure_settings(session, settings)
    committed = {
        tuple(row)
        for row in session.execute(
            select(TaskResult.submission_id, StreamTask.order).join(
                StreamTask, StreamTask.id == TaskResult.stream_task_id
            )
        )
    }
    planned = {
        tuple(row)
        for row in session.execute(
            select(ProbeJob.submission_id, ProbeJob.task_order)
            .distinct()
            .where(ProbeJob.settings_hash == settings_hash, ProbeJob.kind == "checkpoint")
        )
    }
    return sum(
        enqueue_submission(session, submission_id=sub, settings=settings, task_order=order)
        for sub, order in sorted(committed - planned)
    )


__all__ = [
    "QueuedJobs",
    "checkpoint_key",
    "committed_orders",
    "enqueue_committed",
    "enqueue_submission",
    "plan_jobs",
    "probed_trials",
    "queue_submission",
    "sampled_checkpoints",
    "summary_key",
    "trial_key",
]
