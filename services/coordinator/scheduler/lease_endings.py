"""How a lease ends other than by success: a failed or expired task (retry with back-off, or
fail the submission), a launch the backend refused (the launch budget), and a cancellation
(the concurrency rules are :mod:`services.coordinator.scheduler.leases`')."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.coordinator.scheduler.leases import (
    OPEN_STATUSES,
    SETTLED_STATUSES,
    end_lease,
    keep_cancelled,
    launch_error_prefix,
    take_lease,
)
from services.coordinator.scheduler.policy import RetryAction, RetryPolicy
from services.store.db.models import Submission, TaskRun
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, NOT_AN_ATTEMPT, ScheduledSubmission, TaskLease
from services.store.db.types import utcnow
from services.store.runs import records


def settle_failure(
    session: Session,
    *,
    lease: TaskLease,
    status: str,
    reason: str,
    policy: RetryPolicy,
    retryable: bool = True,
    run_status: str = "failed",
    now: datetime | None = None,
) -> RetryAction | None:
    """End a failed or expired lease and decide the submission's fate.

    Running task runs of the submission are closed with ``run_status`` (their FLOPs stay
    counted as retried work). Returns the action taken, or None when the submission had
    ended anyway (cancelled, or the task was committed after all).
    """
    now = now or utcnow()
    end_lease(session, lease=lease, status=status, error=reason, now=now)
    for run in session.scalars(
        select(TaskRun).where(TaskRun.submission_id == lease.submission_id, TaskRun.status.in_(("pending", "running")))
    ):
        run.status, run.finished_at, run.error = run_status, now, reason
    pending = _awaiting_decision(session, lease=lease)
    if pending is None:
        return None
    submission, schedule = pending
    decision = policy.decide(attempt=lease.attempt, retryable=retryable)
    order = lease.task_order
    if decision.action is RetryAction.RETRY:
        submission.status, submission.finished_at = "running", None
        submission.error = f"task {order} attempt {lease.attempt} failed ({reason}); retrying in {decision.delay_s:g} s"
        schedule.next_launch_at = now + timedelta(seconds=decision.delay_s)
        records.add_event(
            session,
            submission_id=submission.id,
            kind="submission.retry_scheduled",
            payload={"order": order, "attempt": lease.attempt, "delay_s": decision.delay_s, "reason": reason},
        )
    else:
        attempts = f"{lease.attempt} attempt{'s' if lease.attempt != 1 else ''}"
        submission.status, submission.finished_at = "failed", now
        submission.error = f"task {order} failed after {attempts}: {reason}"
        records.add_event(
            session,
            submission_id=submission.id,
            kind="submission.failed",
            payload={"order": order, "attempts": lease.attempt, "reason": reason},
        )
    session.flush()
    return decision.action


def consecutive_launch_failures(session: Session, *, submission_id: int) -> int:
    """``launch_failed`` leases of a submission since its last lease that really launched."""
    last_real = (
        select(func.coalesce(func.max(TaskLease.id), 0))
        .where(TaskLease.submission_id == submission_id, TaskLease.status != NOT_AN_ATTEMPT)
        .scalar_subquery()
    )
    return (
        session.scalar(
            select(func.count())
            .select_from(TaskLease)
            .where(
                TaskLease.submission_id == submission_id, TaskLease.status == NOT_AN_ATTEMPT, TaskLease.id > last_real
            )
        )
        or 0
    )


def settle_launch_failure(
    session: Session, *, lease: TaskLease, error: str, policy: RetryPolicy, now: datetime | None = None
) -> RetryAction | None:
    """End a lease whose launch the backend refused; back off, or fail the submission.

    The lease ends ``launch_failed`` and spends none of the task's attempts. ``policy`` is
    the launch budget (its ``max_attempts`` is ``NEVIS_MAX_LAUNCH_FAILURES``), counted over
    the consecutive launch failures of the submission. Returns the action taken, or None
    when the submission had ended anyway (cancelled, or the task was committed).
    """
    now = now or utcnow()
    end_lease(session, lease=lease, status=NOT_AN_ATTEMPT, error=error, now=now)
    pending = _awaiting_decision(session, lease=lease)
    if pending is None:
        return None
    submission, schedule = pending
    tries = consecutive_launch_failures(session, submission_id=submission.id)
    decision = policy.decide(attempt=tries)
    order = lease.task_order
    if decision.action is RetryAction.RETRY:
        submission.error = (
            f"{launch_error_prefix(lease)}"
            f"({tries} tr{'ies' if tries != 1 else 'y'} so far: {error}); "
            f"trying again in {decision.delay_s:g} s"
        )
        schedule.next_launch_at = now + timedelta(seconds=decision.delay_s)
        records.add_event(
            session,
            submission_id=submission.id,
            kind="submission.launch_retry_scheduled",
            payload={"order": order, "tries": tries, "delay_s": decision.delay_s, "error": error},
        )
    else:
        submission.status, submission.finished_at = "failed", now
        submission.error = f"{launch_error_prefix(lease)}after {tries} tr{'ies' if tries != 1 else 'y'}: {error}"
        records.add_event(
            session,
            submission_id=submission.id,
            kind="submission.failed",
            payload={"order": order, "launch_failures": tries, "reason": error},
        )
    session.flush()
    return decision.action


def cancel_lease(session: Session, *, lease_id: int) -> TaskLease | None:
    """Close the active lease of a cancelled submission (the job is stopped by the caller)."""
    lease = take_lease(session, lease_id=lease_id, expected=ACTIVE_LEASE_STATUSES)
    if lease is None:
        return None
    end_lease(session, lease=lease, status="cancelled", error="the submission was cancelled")
    now = utcnow()
    for run in session.scalars(
        select(TaskRun).where(TaskRun.submission_id == lease.submission_id, TaskRun.status.in_(("pending", "running")))
    ):
        run.status, run.finished_at, run.error = "cancelled", now, "the submission was cancelled"
    keep_cancelled(session, submission_id=lease.submission_id)
    return lease


def restore_cancelled(session: Session) -> list[int]:
    """Cancelled submissions that a late worker marked running again, put back to cancelled.

    A worker that had not yet noticed the cancellation may have started its task (the runner
    marks the submission running); once its lease is gone nothing would ever end it.
    """
    drifted = list(
        session.scalars(
            select(Submission.id)
            .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
            .where(
                ScheduledSubmission.cancel_requested_at.is_not(None),
                ScheduledSubmission.active_lease_id.is_(None),
                Submission.status.in_(OPEN_STATUSES),
            )
        )
    )
    for submission_id in drifted:
        keep_cancelled(session, submission_id=submission_id)
    return drifted


def _awaiting_decision(session: Session, *, lease: TaskLease) -> tuple[Submission, ScheduledSubmission] | None:
    """The submission and schedule of an ended lease whose task still needs a decision; None
    when the submission ended anyway (cancelled, succeeded, stopped) or the task was committed."""
    submission = session.get(Submission, lease.submission_id)
    schedule = session.get(ScheduledSubmission, lease.submission_id)
    if schedule.cancel_requested_at is not None or submission.status in SETTLED_STATUSES:
        keep_cancelled(session, submission_id=submission.id)
        return None
    if submission.cursor != lease.task_order:
        return None  # committed before it failed: nothing to retry
    return submission, schedule


__all__ = [
    "cancel_lease",
    "consecutive_launch_failures",
    "restore_cancelled",
    "settle_failure",
    "settle_launch_failure",
]
