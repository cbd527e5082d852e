"""The worker's side of a lease: start it (if it is still the worker's to run), keep it alive
with heartbeats, and close it once the task is committed (the concurrency rules are
:mod:`services.coordinator.scheduler.leases`')."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from services.coordinator.scheduler.leases import OPEN_STATUSES, end_lease, keep_cancelled, take_lease
from services.store.db.models import Submission, TaskRun
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, ScheduledSubmission, TaskLease
from services.store.db.types import utcnow
from services.store.runs import records


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


def finish_success(session: Session, *, lease_id: int) -> TaskLease | None:
    """The worker committed its task: close the lease; keep a cancellation final. Returns
    the lease it closed (None: it was no longer in flight)."""
    lease = take_lease(session, lease_id=lease_id, expected=ACTIVE_LEASE_STATUSES)
    if lease is None:
        return None
    end_lease(session, lease=lease, status="succeeded", error=None)
    keep_cancelled(session, submission_id=lease.submission_id)
    return lease


__all__ = ["StartOutcome", "finish_success", "heartbeat", "start_lease"]
