"""Writes (and the few reads they need) of runs, tasks, trials and events: the one place
both the stream runner and the coordinator change them. Keyword-only functions, one job
each; the caller owns the transaction.

The invariant that matters: a task's result, its run's totals, the learner state it
produced, the submission's cursor and its leaderboard scores (:mod:`services.store.runs.scores`)
change in ONE transaction (:func:`commit_task`), so a crash leaves either all of them or none,
a resumed run never counts a task twice, and the leaderboard never reads a result its scores
leave out. :func:`commit_task` is the only writer of ``task_results``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.core import rulesets
from services.core.budget import RunBudget
from services.core.rulesets import DEFAULT_RULESET
from services.store.db import jsonfloats
from services.store.db.models import (
    ACTIVE_TASK_RUN_STATUSES,
    Checkpoint,
    Event,
    Learner,
    StreamTask,
    StreamVersion,
    Submission,
    TaskResult,
    TaskRun,
    Trial,
)
from services.store.db.models_probe import TrialCurve
from services.store.db.types import utcnow
from services.store.runs.gpu_energy import task_gpu_energy
from services.store.runs.outcomes import TaskOutcome, TrialOutcome
from services.store.runs.scores import rescore


def ensure_learner(session: Session, *, spec: str, resources: Mapping[str, Any]) -> Learner:
    """The learner row for an installed entry point or built-in name."""
    found = session.scalar(select(Learner).where(Learner.name == spec))
    if found is not None:
        return found
    learner = Learner(name=spec, entrypoint=spec, resources=dict(resources))
    session.add(learner)
    session.flush()
    return learner


def create_submission(
    session: Session,
    *,
    learner: Learner,
    stream_version: StreamVersion,
    phase: str,
    budget: RunBudget,
    image_size: int,
    first_order: int,
    status: str = "running",
    visibility: str = "public",
    ruleset: str = DEFAULT_RULESET,
) -> Submission:
    """The one way a submission row is made (``nevis run`` and the API alike); a
    ``visibility`` of ``private`` shows it to its owner and admins only. The ``ruleset``'s
    rules are applied to ``budget`` here (:meth:`Ruleset.apply`), so both ways run by the same
    rules; what they changed is in the ``submission.created`` event.

    Raises:
        UnknownNameError: ``ruleset`` is not one; BudgetError: ``budget`` breaks its rules.
    """
    budget, ruled = rulesets.ruleset(ruleset).apply(budget)
    submission = Submission(
        learner_id=learner.id,
        stream_version_id=stream_version.id,
        phase=phase,
        status=status,
        budget=budget.to_dict(),
        image_size=image_size,
        cursor=first_order,
        visibility=visibility,
        ruleset=ruleset,
    )
    session.add(submission)
    session.flush()
    add_event(
        session,
        submission_id=submission.id,
        kind="submission.created",
        payload={
            "phase": phase,
            "budget": budget.to_dict(),
            "image_size": image_size,
            "ruleset": ruleset,
            **({"ruleset_note": ruled} if ruled else {}),
        },
    )
    return submission


def add_event(session: Session, *, submission_id: int | None, kind: str, payload: Mapping[str, Any]) -> None:
    session.add(Event(submission_id=submission_id, kind=kind, payload=dict(payload)))


def stream_task(session: Session, *, stream_version_id: int, order: int) -> StreamTask:
    return session.scalars(
        select(StreamTask).where(StreamTask.stream_version_id == stream_version_id, StreamTask.order == order)
    ).one()


def start_task_run(
    session: Session, *, submission: Submission, task: StreamTask, deadline_s: float | None = None
) -> TaskRun:
    """A new attempt at ``task``; earlier unfinished attempts become failed, their FLOPs retried.

    An attempt left ``running`` by a killed process is closed here as ``failed``
    ("interrupted"); the FLOPs its trials spent are carried as ``retried_flops`` of the new
    attempt, apart from the task's own FLOPs, so nothing is counted twice.
    """
    stale = session.scalars(
        select(TaskRun).where(TaskRun.submission_id == submission.id, TaskRun.status.in_(ACTIVE_TASK_RUN_STATUSES))
    ).all()
    for run in stale:
        run.status, run.finished_at = "failed", utcnow()
        run.error = run.error or "interrupted: the process running this attempt stopped"
        add_event(
            session,
            submission_id=submission.id,
            kind="task.interrupted",
            payload={"task_run_id": run.id, "order": run.stream_task.order},
        )
    session.flush()
    previous = session.scalars(
        select(TaskRun).where(TaskRun.submission_id == submission.id, TaskRun.stream_task_id == task.id)
    ).all()
    retried = sum(trial_flops_of(session, task_run_id=r.id) for r in previous)
    now = utcnow()
    run = TaskRun(
        submission_id=submission.id,
        stream_task_id=task.id,
        attempt=len(previous) + 1,
        status="running",
        started_at=now,
        heartbeat_at=now,
        retried_flops=float(retried),
    )
    session.add(run)
    session.flush()
    add_event(
        session,
        submission_id=submission.id,
        kind="task.started",
        payload={"task_run_id": run.id, "order": task.order, "attempt": run.attempt},
    )
    return run


def trial_flops_of(session: Session, *, task_run_id: int) -> float:
    return float(
        session.scalar(select(func.coalesce(func.sum(Trial.flops), 0.0)).where(Trial.task_run_id == task_run_id))
    )


def record_trial(session: Session, *, task_run_id: int, outcome: TrialOutcome) -> Trial:
    """Store one finished trial (ok or failed), its training curve and its checkpoints; a
    trial with FLOPs from modules the learner did not track also gets a
    ``trial.untracked_flops`` event with that part (the total is in ``flops`` either way)."""
    trial = Trial(
        task_run_id=task_run_id,
        trial_index=outcome.trial_index,
        seed=outcome.seed,
        config=dict(outcome.config),
        status={"ok": "succeeded", "stopped": "stopped"}.get(outcome.status, "failed"),
        flops=float(outcome.flops),
        flops_source=outcome.flops_source,
        dev_error=outcome.dev_error,
        wall_time_s=outcome.wall_time_s,
        peak_memory_bytes=outcome.peak_memory_bytes,
        error_text=outcome.error,
        traceback=outcome.traceback,
        finished_at=utcnow(),
        cpu_seconds=outcome.cpu_seconds,
        flops_floor=float(outcome.flops_floor) if outcome.cpu_seconds is not None else None,
        flops_paper=float(outcome.flops_paper),
        cpu_estimated=outcome.cpu_estimated,
        gpu_seconds=outcome.gpu_seconds,
        gpu_peak_memory_bytes=outcome.gpu_peak_memory_bytes,
        gpu_note=outcome.gpu_note,
        energy_kwh=outcome.energy_kwh,
        energy_source=outcome.energy_source,
    )
    session.add(trial)
    session.flush()
    if outcome.curve:  # the pretext curve the probes read
        session.merge(
            TrialCurve(
                trial_id=trial.id,
                steps=[step for step, _ in outcome.curve],
                losses=jsonfloats.encode(loss for _, loss in outcome.curve),
            )
        )
    for ckpt in outcome.checkpoints:
        session.add(
            Checkpoint(trial_id=trial.id, step=ckpt.step, object_key=ckpt.key, size_bytes=ckpt.size, sha256=ckpt.sha256)
        )
    if outcome.flops_untracked:  # provenance; the trials table has no column for the split
        run = session.get(TaskRun, task_run_id)
        add_event(
            session,
            submission_id=run.submission_id if run else None,
            kind="trial.untracked_flops",
            payload={
                "task_run_id": task_run_id,
                "trial_id": trial.id,
                "trial_index": outcome.trial_index,
                "flops": outcome.flops,
                "flops_untracked": outcome.flops_untracked,
            },
        )
    session.flush()
    return trial


def commit_task(
    session: Session,
    *,
    submission: Submission,
    run: TaskRun,
    best_trial: Trial,
    outcome: TaskOutcome,
    next_order: int | None,
) -> TaskResult:
    """Commit the task: result, run totals, learner state and cursor, all or nothing.

    A run whose committed totals now reach its FLOP or wall-time cap is stopped in the same
    transaction (:func:`stop_if_capped`), so nothing (no scheduler, no ``nevis run`` loop)
    ever starts another task of it; after its last task a run succeeds, cap or not.
    The probe pool notices the committed task by itself (its watch queues the task's probe
    jobs): accounting never calls the layers above it.
    """
    result = TaskResult(
        submission_id=submission.id,
        stream_task_id=run.stream_task_id,
        task_run_id=run.id,
        best_trial_id=best_trial.id,
        error=outcome.error,
        split=outcome.split,
        metric=outcome.metric,
        flops=outcome.flops,
        cpu_seconds=outcome.cpu_seconds,
        flops_floored=outcome.flops_floored,
        flops_near_floor=outcome.flops_near_floor,
        cpu_estimated=outcome.cpu_estimated,
        flops_paper=outcome.flops_paper,
        flops_prediction=outcome.flops_prediction,
        consistency_jump=outcome.consistency_jump,
        inconsistent=outcome.inconsistent,
        **task_gpu_energy(session, run.id),
    )
    session.add(result)
    run.status, run.finished_at = "succeeded", utcnow()
    run.flops, run.wall_time_s = outcome.flops, outcome.wall_time_s
    run.peak_memory_bytes, run.learner_state_key = outcome.peak_memory_bytes, outcome.state_key
    if next_order is None:
        submission.status, submission.finished_at = "succeeded", utcnow()
    else:
        submission.cursor = next_order
    session.flush()
    rescore(session, submission_ids=[submission.id])  # the leaderboard's row, from the results now
    add_event(
        session,
        submission_id=submission.id,
        kind="task.committed",
        payload={"task_run_id": run.id, "error": outcome.error, "flops": outcome.flops},
    )
    if next_order is not None:
        stop_if_capped(session, submission=submission)
    return result


def fail_task(session: Session, *, submission: Submission, run: TaskRun, message: str, task_flops: float) -> None:
    """Close an attempt whose trials all failed, and stop the submission with the reason."""
    run.status, run.finished_at, run.error, run.flops = "failed", utcnow(), message, 0.0
    submission.status, submission.error, submission.finished_at = "failed", message, utcnow()
    add_event(
        session,
        submission_id=submission.id,
        kind="task.failed",
        payload={"task_run_id": run.id, "message": message, "spent_flops": task_flops},
    )


def interrupt_task(session: Session, *, submission: Submission, run: TaskRun) -> None:
    """The user stopped the run (Ctrl-C): close the attempt and say how to resume."""
    run.status, run.error = "failed", "interrupted by the user (Ctrl-C)"
    submission.status = "failed"
    submission.error = f"interrupted; resume with `nevis run --resume {submission.id}`"


def stop_submission(session: Session, *, submission: Submission, reason: str) -> None:
    """End a submission for good as ``stopped`` (a budget cap was reached: what its owner
    asked for, not a failure); ``reason`` names the cap and is kept as its ``error``."""
    submission.status, submission.error, submission.finished_at = "stopped", reason, utcnow()
    add_event(session, submission_id=submission.id, kind="submission.stopped", payload={"reason": reason})


def cap_reached(session: Session, *, submission: Submission) -> str | None:
    """Which of the submission's caps its committed tasks have reached, or None."""
    budget = RunBudget.from_dict(submission.budget)
    if not budget.capped:
        return None
    flops, wall = committed_totals(session, submission_id=submission.id)
    return budget.cap_reached(flops=flops, wall_s=wall)


def stop_if_capped(session: Session, *, submission: Submission) -> str | None:
    """Stop the submission if its committed tasks reached a cap; returns the reason, if so."""
    reason = cap_reached(session, submission=submission)
    if reason is not None:
        stop_submission(session, submission=submission, reason=reason)
    return reason


def last_state_key(session: Session, *, submission_id: int) -> str | None:
    """The learner state committed with the submission's latest task, if any."""
    return session.scalar(
        select(TaskRun.learner_state_key)
        .join(TaskResult, TaskResult.task_run_id == TaskRun.id)
        .where(TaskResult.submission_id == submission_id)
        .order_by(TaskResult.id.desc())
        .limit(1)
    )


def committed_totals(session: Session, *, submission_id: int) -> tuple[float, float]:
    """cFLOP and wall seconds of the submission's committed tasks (what the caps compare)."""
    flops, wall = session.execute(
        select(func.coalesce(func.sum(TaskResult.flops), 0.0), func.coalesce(func.sum(TaskRun.wall_time_s), 0.0))
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
        .where(TaskResult.submission_id == submission_id)
    ).one()
    return float(flops), float(wall)


__all__ = [
    "add_event",
    "cap_reached",
    "commit_task",
    "committed_totals",
    "create_submission",
    "ensure_learner",
    "fail_task",
    "interrupt_task",
    "last_state_key",
    "record_trial",
    "start_task_run",
    "stop_if_capped",
    "stop_submission",
    "stream_task",
    "trial_flops_of",
]
