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

Here: claiming and launching, and the steps every ending shares. The worker's side (start,
heartbeat, success) is :mod:`~services.coordinator.scheduler.lease_running`; failures, refused
launches and cancellations are :mod:`~services.coordinator.scheduler.lease_endings`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, aliased

from services.store.db.models import Submission
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


def launch_error_prefix(lease: TaskLease) -> str:
    """How a submission's error about the refused launches of ``lease``'s task begins."""
    return f"the {lease.backend} backend could not launch task {lease.task_order} "


def take_lease(session: Session, *, lease_id: int, expected: tuple[str, ...]) -> TaskLease | None:
    """Lock a lease if it is still in one of ``expected`` (compare-and-set), else None."""
    return session.scalar(
        select(TaskLease).where(TaskLease.id == lease_id, TaskLease.status.in_(expected)).with_for_update()
    )


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


def keep_cancelled(session: Session, *, submission_id: int) -> None:
    """Whatever the runner wrote, a cancelled submission stays cancelled."""
    schedule = session.get(ScheduledSubmission, submission_id)
    submission = session.get(Submission, submission_id)
    if schedule is not None and schedule.cancel_requested_at is not None and submission.status != "cancelled":
        submission.status = "cancelled"
        submission.finished_at = submission.finished_at or utcnow()


__all__ = [
    "OPEN_STATUSES",
    "SETTLED_STATUSES",
    "claim_next",
    "end_lease",
    "keep_cancelled",
    "launch_error_prefix",
    "mark_launched",
    "next_attempt",
    "ready_to_launch",
    "take_lease",
]
