"""The durable probe-job queue in the database: enqueue, claim, heartbeat, finish.

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, case, exists, func, not_, or_, select, update
from sqlalchemy.orm import Session, aliased

from services.core.errors import NevisError
from services.store.db.models_probe import OPEN_PROBE_JOB_STATUSES, ProbeJob, ProbeSettingsRow
from services.store.db.types import utcnow
from services.store.probes.settings import ProbeSettings
from services.store.probes.sql import insert_ignore

JOBS = ProbeJob.__table__
DEFAULT_LEASE_S = 120.0
DEFAULT_MAX_ATTEMPTS = 3
_KEYS_PER_QUERY = 500


class LeaseLostError(NevisError):
    """The worker no longer holds the job's lease; its results must not be written."""


@dataclass(frozen=True)
class JobSpec:
    """A job to queue (see :mod:`workers.probe.runtime.planner`)."""

    job_key: str
    kind: str
    submission_id: int
    task_order: int
    settings_hash: str
    trial_id: int | None = None
    checkpoint_id: int | None = None


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


def ensure_settings(session: Session, settings: ProbeSettings) -> str:
    """Store ``settings`` under its hash (once) and return the hash."""
    insert_ignore(
        session,
        ProbeSettingsRow.__table__,
        [{"settings_hash": settings.settings_hash, "settings": settings.to_dict()}],
        conflict=["settings_hash"],
    )
    return settings.settings_hash


def load_settings(session: Session, settings_hash: str) -> ProbeSettings:
    """The settings stored under ``settings_hash``."""
    row = session.get(ProbeSettingsRow, settings_hash)
    if row is None:
        raise NevisError(f"No probe settings with hash {settings_hash!r} in this database.")
    return ProbeSettings.from_dict(row.settings)


def enqueue(session: Session, jobs: Sequence[JobSpec], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> int:
    """Queue ``jobs``; a job whose key is already queued (or done) is left alone.

    Returns:
        How many jobs were new.
    """
    rows = [
        {
            "job_key": j.job_key,
            "kind": j.kind,
            "submission_id": j.submission_id,
            "task_order": j.task_order,
            "trial_id": j.trial_id,
            "checkpoint_id": j.checkpoint_id,
            "settings_hash": j.settings_hash,
            "max_attempts": max_attempts,
        }
        for j in jobs
    ]
    return insert_ignore(session, JOBS, rows, conflict=["job_key"])


def reopen(session: Session, *, job_keys: Sequence[str]) -> int:
    """Put finished jobs back in the queue with fresh attempts (e.g. a stale summary)."""
    if not job_keys:
        return 0
    result = session.execute(
        update(JOBS)
        .where(JOBS.c.job_key.in_(list(job_keys)), JOBS.c.status.in_(("done", "failed")))
        .values(
            status="queued",
            attempts=0,
            lease_owner=None,
            lease_expires_at=None,
            error=None,
            finished_at=None,
            analysis_flops=None,
        )
    )
    return result.rowcount or 0


def job_ids(session: Session, job_keys: Sequence[str]) -> tuple[int, ...]:
    """The ids of the jobs queued under ``job_keys`` (keys with no job are left out), sorted."""
    keys = sorted(set(job_keys))
    found: list[int] = []
    for start in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[start : start + _KEYS_PER_QUERY]
        found.extend(session.scalars(select(JOBS.c.id).where(JOBS.c.job_key.in_(chunk))))
    return tuple(sorted(found))


def failed_jobs(session: Session, *, submission_id: int, settings_hash: str) -> list[tuple[str, str, int | None]]:
    """``(job_key, kind, trial_id)`` of a submission's failed jobs under one settings hash."""
    return [
        tuple(row)
        for row in session.execute(
            select(JOBS.c.job_key, JOBS.c.kind, JOBS.c.trial_id)
            .where(
                JOBS.c.submission_id == submission_id, JOBS.c.settings_hash == settings_hash, JOBS.c.status == "failed"
            )
            .order_by(JOBS.c.id)
        )
    ]


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


def _selected(submission_id: int | None, job_ids: Sequence[int] | None) -> list[Any]:
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
    condition = and_(_claimable(now), *_selected(submission_id, job_ids))
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
    query = select(JOBS.c.id).where(workable, *_selected(submission_id, job_ids)).limit(1)
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


def status_counts(
    session: Session, *, submission_id: int, settings_hash: str | None = None, job_ids: Sequence[int] | None = None
) -> Mapping[str, int]:
    """How many jobs of a submission (under one settings hash, or among ``job_ids``) are in
    each status."""
    query = select(JOBS.c.status, func.count()).where(*_selected(submission_id, job_ids))
    if settings_hash is not None:
        query = query.where(JOBS.c.settings_hash == settings_hash)
    return dict(session.execute(query.group_by(JOBS.c.status)).all())


__all__ = [
    "DEFAULT_LEASE_S",
    "DEFAULT_MAX_ATTEMPTS",
    "JOBS",
    "ClaimedJob",
    "JobSpec",
    "LeaseLostError",
    "claim",
    "complete",
    "enqueue",
    "ensure_settings",
    "fail",
    "failed_jobs",
    "has_work",
    "heartbeat",
    "job_ids",
    "load_settings",
    "reap_expired",
    "record_analysis_flops",
    "reopen",
    "status_counts",
]
