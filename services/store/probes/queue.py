"""The durable probe-job queue in the database, the workers' side: claim, heartbeat, finish.
Queueing jobs, the settings they run under and the counts a report reads are the planning
side, :mod:`services.store.probes.queue_plans`.

Guarantees:
- **One taker.** :func:`claim` is a single ``UPDATE ... WHERE id = (SELECT ... LIMIT 1)
  RETURNING`` statement. On PostgreSQL the inner select takes the row with ``FOR UPDATE
  SKIP LOCKED``, so concurrent workers pass over each other's rows instead of waiting, and
  the outer ``WHERE`` repeats the claimable test, so a row that changed in between is not
  taken. SQLite (the embedded fallback) has no row locks: it runs one writer at a time, so
  the same single statement is atomic there; workers then contend on the database lock
  (the engine's busy timeout makes them wait), which suits a handful of local workers.
- **Leases.** A claimed job is ``running`` with ``lease_owner`` and ``lease_expires_at``;
  its worker renews the lease (:func:`heartbeat`). A job whose lease expired is claimable
  again: a killed worker loses nothing, and the job runs again, once per expiry. Every
  claim counts an attempt; after ``max_attempts`` an expired job is marked failed
  (:func:`reap_expired`), so a job that kills its worker cannot loop forever.
- **Fenced completion.** :func:`complete` and :func:`fail` change the row only while the
  caller still holds the lease (same owner, same attempt). Results are written in the same
  transaction as :func:`complete`, so a worker that lost its lease writes nothing; result
  tables also have unique keys, so a job that runs twice writes each result once.
- **Selection.** A worker may take only one submission's jobs, or only the jobs of given
  ids (what one ``nevis probe run`` queued): other jobs in the shared queue are left to
  their own takers (:func:`claim`, :func:`has_work`).
- **Order.** A trial job waits until no checkpoint job of its trial is open, and a summary
  job until no other job of its submission is open. Among ready jobs, trial jobs go first
  (they are cheap and turn finished checkpoints into curves), then checkpoints, oldest first.

Times are the workers' clocks (aware UTC); workers are assumed to agree to within a small
fraction of the lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, case, exists, not_, or_, select, update
from sqlalchemy.orm import Session, aliased

from services.core.errors import NevisError
from services.store.db.models_probe import OPEN_PROBE_JOB_STATUSES, ProbeJob
from services.store.db.types import utcnow

JOBS = ProbeJob.__table__
DEFAULT_LEASE_S = 120.0


class LeaseLostError(NevisError):
    """The worker no longer holds the job's lease; its results must not be written."""


@dataclass(frozen=True)
class ClaimedJob:
    """A job this worker holds a lease on; ``attempt`` fences its writes."""

    id: int
    job_key: str
    kind: str
    submission_id: int
    task_order: int
    trial_id: int | None
    checkpoint_id: int | None
    settings_hash: str
    attempt: int
    max_attempts: int
    owner: str


def _open_dependency(kind: str) -> Any:
    """SQL: this job still waits for other jobs (trial: its checkpoints; summary: the rest)."""
    dep = aliased(JOBS)
    if kind == "trial":
        link = and_(dep.c.trial_id == JOBS.c.trial_id, dep.c.kind == "checkpoint")
    else:
        link = and_(dep.c.submission_id == JOBS.c.submission_id, dep.c.kind != "summary")
    return exists().where(link, dep.c.settings_hash == JOBS.c.settings_hash, dep.c.status.in_(OPEN_PROBE_JOB_STATUSES))


def _claimable(now: datetime) -> Any:
    takeable = or_(JOBS.c.status == "queued", and_(JOBS.c.status == "running", JOBS.c.lease_expires_at < now))
    ready = or_(
        JOBS.c.kind == "checkpoint",
        and_(JOBS.c.kind == "trial", not_(_open_dependency("trial"))),
        and_(JOBS.c.kind == "summary", not_(_open_dependency("summary"))),
    )
    return and_(takeable, JOBS.c.attempts < JOBS.c.max_attempts, ready)


def selected_jobs(submission_id: int | None, job_ids: Sequence[int] | None) -> list[Any]:
    """SQL: the jobs a caller restricts itself to (one submission's, or these ids)."""
    conditions: list[Any] = []
    if submission_id is not None:
        conditions.append(JOBS.c.submission_id == submission_id)
    if job_ids is not None:
        # Ids are ints, written into the SQL: a long plan is no bound parameter per job
        # (PostgreSQL takes at most 65,535 of them).
        conditions.append(
            JOBS.c.id.in_(bindparam("selected_ids", [int(i) for i in job_ids], expanding=True, literal_execute=True))
        )
    return conditions


# Ready trial jobs first (cheap, and they turn finished checkpoints into curves), then
# checkpoints, then summaries; oldest first within a kind.
_PRIORITY = case({"trial": 0, "checkpoint": 1}, value=JOBS.c.kind, else_=2)


def reap_expired(session: Session, *, now: datetime | None = None) -> int:
    """Fail running jobs whose lease expired with no attempt left; returns how many."""
    now = now or utcnow()
    result = session.execute(
        update(JOBS)
        .where(JOBS.c.status == "running", JOBS.c.lease_expires_at < now, JOBS.c.attempts >= JOBS.c.max_attempts)
        .values(
            status="failed",
            finished_at=now,
            lease_owner=None,
            error="the lease expired on every attempt: the worker died or hung each time "
            "(see the probe worker logs; raise the lease with --lease-s if jobs "
            "are merely slow)",
        )
    )
    return result.rowcount or 0


def claim(
    session: Session,
    *,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    submission_id: int | None = None,
    job_ids: Sequence[int] | None = None,
    now: datetime | None = None,
) -> ClaimedJob | None:
    """Take the next ready job (oldest first) with a lease of ``lease_s`` seconds.

    Run it in its own short transaction and commit at once. Returns None when nothing is
    ready. ``submission_id`` restricts the claim to one submission's jobs, ``job_ids`` to
    these jobs (those one ``nevis probe run`` queued).
    """
    now = now or utcnow()
    reap_expired(session, now=now)
    condition = and_(_claimable(now), *selected_jobs(submission_id, job_ids))
    target = (
        select(JOBS.c.id)
        .where(condition)
        .order_by(_PRIORITY, JOBS.c.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    statement = (
        update(JOBS)
        .where(JOBS.c.id == target, _claimable(now))
        .values(
            status="running",
            attempts=JOBS.c.attempts + 1,
            lease_owner=owner,
            lease_expires_at=now + timedelta(seconds=lease_s),
            heartbeat_at=now,
            started_at=now,
        )
        .returning(
            JOBS.c.id,
            JOBS.c.job_key,
            JOBS.c.kind,
            JOBS.c.submission_id,
            JOBS.c.task_order,
            JOBS.c.trial_id,
            JOBS.c.checkpoint_id,
            JOBS.c.settings_hash,
            JOBS.c.attempts,
            JOBS.c.max_attempts,
        )
    )
    row = session.execute(statement).first()
    if row is None:
        return None
    return ClaimedJob(
        id=row.id,
        job_key=row.job_key,
        kind=row.kind,
        submission_id=row.submission_id,
        task_order=row.task_order,
        trial_id=row.trial_id,
        checkpoint_id=row.checkpoint_id,
        settings_hash=row.settings_hash,
        attempt=row.attempts,
        max_attempts=row.max_attempts,
        owner=owner,
    )


def has_work(
    session: Session,
    *,
    submission_id: int | None = None,
    job_ids: Sequence[int] | None = None,
    now: datetime | None = None,
) -> bool:
    """Whether a selected job is claimable now or running: what a worker that stops when idle
    still waits for.

    A queued job that waits only for jobs outside the selection (a summary waiting for
    another task's jobs, queued by the pool's watch) is not: those are someone else's to run,
    and waiting for them could be waiting forever.
    """
    now = now or utcnow()
    workable = or_(_claimable(now), JOBS.c.status == "running")
    query = select(JOBS.c.id).where(workable, *selected_jobs(submission_id, job_ids)).limit(1)
    return session.execute(query).first() is not None


def _held(job: ClaimedJob) -> Any:
    return and_(
        JOBS.c.id == job.id, JOBS.c.status == "running", JOBS.c.lease_owner == job.owner, JOBS.c.attempts == job.attempt
    )


def heartbeat(
    session: Session, job: ClaimedJob, *, lease_s: float = DEFAULT_LEASE_S, now: datetime | None = None
) -> bool:
    """Renew the lease; False when the job is no longer this worker's."""
    now = now or utcnow()
    result = session.execute(
        update(JOBS).where(_held(job)).values(lease_expires_at=now + timedelta(seconds=lease_s), heartbeat_at=now)
    )
    return (result.rowcount or 0) == 1


def complete(session: Session, job: ClaimedJob, *, wall_time_s: float | None = None) -> None:
    """Mark the job done, in the transaction that wrote its results.

    Raises:
        LeaseLostError: The lease was taken over; the caller must roll back.
    """
    result = session.execute(
        update(JOBS)
        .where(_held(job))
        .values(
            status="done",
            finished_at=utcnow(),
            lease_owner=None,
            lease_expires_at=None,
            wall_time_s=wall_time_s,
            error=None,
        )
    )
    if (result.rowcount or 0) != 1:
        raise LeaseLostError(
            f"Probe job {job.id} ({job.job_key}) attempt {job.attempt} lost its lease before "
            "it finished; another worker owns it now and its results win."
        )


def record_analysis_flops(session: Session, job: ClaimedJob, flops: float) -> None:
    """Store what the job cost in FLOPs (the analysis's own, never a submission's cFLOP).

    Call it in the transaction that writes the results and completes the job
    (:func:`complete`): it is fenced the same way, so a worker that lost its lease records
    nothing.
    """
    session.execute(update(JOBS).where(_held(job)).values(analysis_flops=float(flops)))


def fail(session: Session, job: ClaimedJob, *, reason: str, retry: bool) -> str | None:
    """Record a failure: queued again while attempts remain and ``retry``, else failed.

    Returns:
        The new status ("queued" or "failed"), or None if the lease was lost.
    """
    status = "queued" if retry and job.attempt < job.max_attempts else "failed"
    result = session.execute(
        update(JOBS)
        .where(_held(job))
        .values(
            status=status,
            error=reason[:4000],
            lease_owner=None,
            lease_expires_at=None,
            finished_at=utcnow() if status == "failed" else None,
        )
    )
    return status if (result.rowcount or 0) == 1 else None


__all__ = [
    "DEFAULT_LEASE_S",
    "JOBS",
    "ClaimedJob",
    "LeaseLostError",
    "claim",
    "complete",
    "fail",
    "has_work",
    "heartbeat",
    "reap_expired",
    "record_analysis_flops",
    "selected_jobs",
]
