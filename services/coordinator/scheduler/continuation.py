"""A worker takes its submission's next task itself, when nobody else is waiting for the slot.

A fresh worker process costs every task seconds before its first trial (the process and its
imports, Ray, the run's actors and their sandboxed learner hosts, the learner's description:
7.6–8.1 s a task on a running cluster by ``bench/bench_task_process.py --modes coordinator``,
against 0.3–0.5 s for a task a worker goes on with), while ``nevis run`` pays them once per run. So a worker whose
task committed may go on with the next task of the same submission, its actors and hosts warm,
under a lease of its own: each task still has one lease, attempts, heartbeats, a deadline, and
is retried, reaped or cancelled on its own (a failed task ends the worker; its retry is a new
launch).

The next lease is written in the transaction that ends the committed one, so no scheduler ever
sees the submission without a lease in between, and only when:

- the run goes on: its task committed (the cursor moved), it is open, not cancelled, not
  stopped by a cap and has no back-off pending;
- the worker has run fewer than ``NEVIS_WORKER_MAX_TASKS`` tasks (1: a process per task);
- the ending lease's launch was recorded (its job id is the worker's own, which the new lease
  keeps, so the reaper and cancellation reach the same process);
- no other submission is ready and waiting: under a backlog the slot goes back to the
  scheduler, whose round-robin between users decides as it always did.

The new lease is what a claim would have written, started at once: the same owner (so the
replica's slots are counted as before: one lease ends, one begins), backend and job, the
attempt numbered as a claim numbers it, ``running`` with its deadline
``NEVIS_TASK_DEADLINE_S`` from now.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from services.coordinator.scheduler.leases import next_attempt, ready_to_launch
from services.store.db.models import Submission
from services.store.db.models_coordinator import ScheduledSubmission, TaskLease
from services.store.db.types import utcnow
from services.store.runs import records


def others_waiting(session: Session, *, submission_id: int, now: datetime) -> bool:
    """Whether a submission other than ``submission_id`` is ready for a launch now."""
    ss = ScheduledSubmission
    return bool(
        session.scalar(
            select(
                exists().where(
                    ss.submission_id == Submission.id, ss.submission_id != submission_id, *ready_to_launch(now)
                )
            )
        )
    )


def continue_after(
    session: Session, *, ended: TaskLease, task_deadline_s: float, now: datetime | None = None
) -> TaskLease | None:
    """The next lease of ``ended``'s submission for the same worker, started; None when the
    worker should end instead (see the module's conditions; the task count is its caller's)."""
    now = now or utcnow()
    if ended.status != "succeeded" or not ended.job_id:
        return None
    schedule = session.scalar(
        select(ScheduledSubmission).where(ScheduledSubmission.submission_id == ended.submission_id).with_for_update()
    )
    submission = session.get(Submission, ended.submission_id)
    if (
        schedule is None
        or schedule.cancel_requested_at is not None
        or schedule.active_lease_id is not None
        or schedule.next_launch_at is not None
        or submission.status != "running"
        or submission.cursor <= ended.task_order
    ):
        return None
    if others_waiting(session, submission_id=submission.id, now=now):
        return None
    lease = TaskLease(
        submission_id=submission.id,
        task_order=submission.cursor,
        attempt=next_attempt(session, submission=submission),
        status="running",
        backend=ended.backend,
        owner=ended.owner,
        job_id=ended.job_id,
        heartbeat_at=now,
        started_at=now,
        deadline_at=now + timedelta(seconds=task_deadline_s),
    )
    session.add(lease)
    session.flush()
    schedule.active_lease_id, schedule.last_launch_at = lease.id, now
    records.add_event(
        session,
        submission_id=submission.id,
        kind="lease.claimed",
        payload={
            "lease_id": lease.id,
            "order": lease.task_order,
            "attempt": lease.attempt,
            "backend": lease.backend,
            "owner": lease.owner,
            "continues": ended.id,
        },
    )
    records.add_event(
        session,
        submission_id=submission.id,
        kind="lease.started",
        payload={"lease_id": lease.id, "order": lease.task_order},
    )
    session.flush()
    return lease


__all__ = ["continue_after", "others_waiting"]
