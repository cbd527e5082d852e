"""Leases: the database side of launching, running and ending one task of a submission.

Every function is keyword-only and leaves the commit to its caller. Concurrency rules:

- :func:`claim_next` locks one ``scheduled_submissions`` row with ``FOR UPDATE SKIP LOCKED``
  (PostgreSQL), so replicas never wait on, nor claim, the same submission; the lock is held
  until the lease row exists and ``active_lease_id`` points at it, and the partial unique
  index on active leases refuses a second one even if the locks were bypassed. SQLite has
  no row locks: there writes are serialised by the database file, a lost race ends in an
  IntegrityError that the caller treats as "someone else claimed it" (run one replica).
- State changes of a lease are compare-and-set updates (``WHERE status IN ...``), so a
  worker finishing, a reaper expiring and a user cancelling cannot overwrite each other.
- A lease the backend could not launch ends ``launch_failed`` (:func:`settle_launch_failure`):
  it is no attempt of the task, so the next launch takes its attempt number again; the
  consecutive ``launch_failed`` leases of a submission are its launch budget
  (``NEVIS_MAX_LAUNCH_FAILURES``), spent with back-off, apart from ``NEVIS_MAX_ATTEMPTS``.
- Slots are counted from the database (:mod:`services.coordinator.scheduler.slots`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session, aliased

from services.coordinator.scheduler.policy import RetryAction, RetryPolicy
from services.store.db.models import Submission, TaskRun
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, NOT_AN_ATTEMPT, ScheduledSubmission, TaskLease
from services.store.db.types import utcnow
from services.store.runs import records

OPEN_STATUSES = ("queued", "running")
SETTLED_STATUSES = ("succeeded", "stopped", "cancelled")
"""Ended submissions whose status no lease outcome changes: a late failure or expiry must not
turn them failed (``stopped``: its own cap ended it with the commit of the task reaching it)."""


def ready_to_launch(now: datetime) -> tuple:
    """The SQL conditions of a submission whose task at the cursor may be launched now: open,
    no lease in flight, not cancelled, no back-off pending."""
    ss = ScheduledSubmission
    return (
        Submission.status.in_(OPEN_STATUSES),
        ss.active_lease_id.is_(None),
        ss.cancel_requested_at.is_(None),
        or_(ss.next_launch_at.is_(None), ss.next_launch_at <= now),
    )


def claim_next(
    session: Session, *, owner: str, backend: str, start_timeout_s: float, now: datetime | None = None
) -> TaskLease | None:
    """Claim the task at the cursor of the fairest ready submission; None if none is ready.

    Fairness is round-robin between users: a user with fewer tasks in flight goes first,
    then the user whose last launch is oldest, then the oldest submission.
    """
    now = now or utcnow()
    ss = ScheduledSubmission
    mine, active = aliased(ScheduledSubmission), aliased(TaskLease)
    # Each user's figures, computed once per claim (not once per ready submission: with
    # 1,000 ready, correlated subqueries made a claim cost ~100 ms on PostgreSQL).
    in_flight = (
        select(mine.user_id.label("user_id"), func.count().label("n"))
        .select_from(active)
        .join(mine, mine.submission_id == active.submission_id)
        .where(active.status.in_(ACTIVE_LEASE_STATUSES))
        .group_by(mine.user_id)
        .subquery("user_in_flight")
    )
    last = (
        select(mine.user_id.label("user_id"), func.max(mine.last_launch_at).label("at"))
        .group_by(mine.user_id)
        .subquery("user_last_launch")
    )
    picked = session.scalar(
        select(ss)
        .join(Submission, Submission.id == ss.submission_id)
        .outerjoin(in_flight, in_flight.c.user_id == ss.user_id)
        .join(last, last.c.user_id == ss.user_id)
        .where(*ready_to_launch(now))
        .order_by(func.coalesce(in_flight.c.n, 0), last.c.at.asc().nulls_first(), ss.submission_id)
        .limit(1)
        .with_for_update(of=ss, skip_locked=True)
    )
    if picked is None:
        return None
    submission = session.get(Submission, picked.submission_id)
    if submission.status not in OPEN_STATUSES:
        # It ended (its last task committed, or it failed) after this statement's snapshot:
        # the lock re-checks the newest version of the locked row only, not the joined one.
        return None
    lease = TaskLease(
        submission_id=submission.id,
        task_order=submission.cursor,
        attempt=next_attempt(session, submission=submission),
        status="launching",
        backend=backend,
        owner=owner,
        heartbeat_at=now,
        deadline_at=now + timedelta(seconds=start_timeout_s),
    )
    session.add(lease)
    session.flush()
    picked.active_lease_id, picked.last_launch_at, picked.next_launch_at = lease.id, now, None
    if submission.status == "queued":
        submission.status = "running"
    records.add_event(
        session,
        submission_id=submission.id,
        kind="lease.claimed",
        payload={
            "lease_id": lease.id,
            "order": lease.task_order,
            "attempt": lease.attempt,
            "backend": backend,
            "owner": owner,
        },
    )
    session.flush()
    return lease


def next_attempt(session: Session, *, submission: Submission) -> int:
    """The attempt number of the next lease of the task at ``submission``'s cursor (launches
    the backend refused are no attempt)."""
    earlier = (
        session.scalar(
            select(func.count())
            .select_from(TaskLease)
            .where(
                TaskLease.submission_id == submission.id,
                TaskLease.task_order == submission.cursor,
                TaskLease.status != NOT_AN_ATTEMPT,
            )
        )
        or 0
    )
    return earlier + 1


def mark_launched(session: Session, *, lease_id: int, job_id: str) -> bool:
    """Record the backend's job id; a lease the worker already started keeps its status.

    The row is locked (compare-and-set): a worker may start its lease before the launch is
    recorded, and an unlocked read of ``launching`` would write ``launched`` over its
    ``running``, so its next heartbeat would find the lease gone and end the task.
    """
    lease = take_lease(session, lease_id=lease_id, expected=ACTIVE_LEASE_STATUSES)
    if lease is None:
        return False
    lease.job_id = job_id
    if lease.status == "launching":
        lease.status = "launched"
    submission = session.get(Submission, lease.submission_id)
    if submission.error and submission.error.startswith(launch_error_prefix(lease)):
        submission.error = None  # the outage is over; the back-off note no longer holds
    records.add_event(
        session,
        submission_id=lease.submission_id,
        kind="lease.launched",
        payload={"lease_id": lease_id, "job_id": job_id},
    )
    return True


@dataclass(frozen=True)
class StartOutcome:
    """What the worker found when it asked to start its lease."""

    run: bool  # run the task now
    reason: str = ""


def start_lease(session: Session, *, lease_id: int, submission_id: int, task_deadline_s: float) -> StartOutcome:
    """The worker's first step: move the lease to ``running`` if it is still its to run."""
    lease = session.scalar(select(TaskLease).where(TaskLease.id == lease_id).with_for_update())
    if lease is None or lease.submission_id != submission_id:
        return StartOutcome(False, f"lease {lease_id} of submission {submission_id} does not exist")
    if lease.status not in ("launching", "launched"):
        return StartOutcome(False, f"lease {lease_id} is {lease.status}; not starting it again")
    schedule = session.get(ScheduledSubmission, submission_id)
    submission = session.get(Submission, submission_id)
    now = utcnow()
    if schedule.cancel_requested_at is not None or submission.status not in OPEN_STATUSES:
        end_lease(session, lease=lease, status="cancelled", error=f"submission is {submission.status}", now=now)
        return StartOutcome(False, f"submission {submission_id} is {submission.status}")
    if submission.cursor != lease.task_order:
        end_lease(
            session,
            lease=lease,
            status="succeeded",
            error=f"task {lease.task_order} was committed before this launch",
            now=now,
        )
        return StartOutcome(False, "the task was committed already")
    lease.status, lease.started_at, lease.heartbeat_at = "running", now, now
    lease.deadline_at = now + timedelta(seconds=task_deadline_s)
    records.add_event(
        session,
        submission_id=submission_id,
        kind="lease.started",
        payload={"lease_id": lease_id, "order": lease.task_order},
    )
    return StartOutcome(True)


def heartbeat(session: Session, *, lease_id: int, now: datetime | None = None) -> bool:
    """Refresh a running lease (and its task run); False once the lease is no longer ours."""
    now = now or utcnow()
    result = session.execute(
        update(TaskLease).where(TaskLease.id == lease_id, TaskLease.status == "running").values(heartbeat_at=now)
    )
    if result.rowcount != 1:
        return False
    submission_id = session.scalar(select(TaskLease.submission_id).where(TaskLease.id == lease_id))
    session.execute(
        update(TaskRun)
        .where(TaskRun.submission_id == submission_id, TaskRun.status == "running")
        .values(heartbeat_at=now)
    )
    return True


def end_lease(
    session: Session, *, lease: TaskLease, status: str, error: str | None, now: datetime | None = None
) -> None:
    """Close a lease and free its submission for the next launch."""
    now = now or utcnow()
    lease.status, lease.finished_at, lease.error = status, now, error
    schedule = session.get(ScheduledSubmission, lease.submission_id)
    if schedule is not None and schedule.active_lease_id == lease.id:
        schedule.active_lease_id = None
    records.add_event(
        session,
        submission_id=lease.submission_id,
        kind=f"lease.{status}",
        payload={
            "lease_id": lease.id,
            "order": lease.task_order,
            "attempt": lease.attempt,
            **({"error": error} if error else {}),
        },
    )
    session.flush()


def take_lease(session: Session, *, lease_id: int, expected: tuple[str, ...]) -> TaskLease | None:
    """Lock a lease if it is still in one of ``expected`` (compare-and-set), else None."""
    return session.scalar(
        select(TaskLease).where(TaskLease.id == lease_id, TaskLease.status.in_(expected)).with_for_update()
    )


def finish_success(session: Session, *, lease_id: int) -> TaskLease | None:
    """The worker committed its task: close the lease; keep a cancellation final. Returns
    the lease it closed (None: it was no longer in flight)."""
    lease = take_lease(session, lease_id=lease_id, expected=ACTIVE_LEASE_STATUSES)
    if lease is None:
        return None
    end_lease(session, lease=lease, status="succeeded", error=None)
    _keep_cancelled(session, submission_id=lease.submission_id)
    return lease


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


def launch_error_prefix(lease: TaskLease) -> str:
    """How a submission's error about the refused launches of ``lease``'s task begins."""
    return f"the {lease.backend} backend could not launch task {lease.task_order} "


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
    _keep_cancelled(session, submission_id=lease.submission_id)
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
        _keep_cancelled(session, submission_id=submission_id)
    return drifted


def _awaiting_decision(session: Session, *, lease: TaskLease) -> tuple[Submission, ScheduledSubmission] | None:
    """The submission and schedule of an ended lease whose task still needs a decision; None
    when the submission ended anyway (cancelled, succeeded, stopped) or the task was committed."""
    submission = session.get(Submission, lease.submission_id)
    schedule = session.get(ScheduledSubmission, lease.submission_id)
    if schedule.cancel_requested_at is not None or submission.status in SETTLED_STATUSES:
        _keep_cancelled(session, submission_id=submission.id)
        return None
    if submission.cursor != lease.task_order:
        return None  # committed before it failed: nothing to retry
    return submission, schedule


def _keep_cancelled(session: Session, *, submission_id: int) -> None:
    """Whatever the runner wrote, a cancelled submission stays cancelled."""
    schedule = session.get(ScheduledSubmission, submission_id)
    submission = session.get(Submission, submission_id)
    if schedule is not None and schedule.cancel_requested_at is not None and submission.status != "cancelled":
        submission.status = "cancelled"
        submission.finished_at = submission.finished_at or utcnow()


__all__ = [
    "OPEN_STATUSES",
    "SETTLED_STATUSES",
    "StartOutcome",
    "cancel_lease",
    "claim_next",
    "consecutive_launch_failures",
    "end_lease",
    "finish_success",
    "heartbeat",
    "launch_error_prefix",
    "mark_launched",
    "next_attempt",
    "ready_to_launch",
    "restore_cancelled",
    "settle_failure",
    "settle_launch_failure",
    "start_lease",
    "take_lease",
]
