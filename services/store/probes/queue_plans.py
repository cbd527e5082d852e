"""The planning side of the durable probe-job queue (:mod:`services.store.probes.queue` is the
workers' side: claim, heartbeat, finish): the settings a plan runs under, stored once by hash;
queueing jobs (idempotently: a key already queued or done is left alone) and queueing finished
ones again; and what a planner or a report reads back (ids, failures, counts by status).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.store.db.models_probe import ProbeSettingsRow
from services.store.probes.queue import JOBS, selected_jobs
from services.store.probes.settings import ProbeSettings
from services.store.probes.sql import insert_ignore

DEFAULT_MAX_ATTEMPTS = 3
_KEYS_PER_QUERY = 500


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


def status_counts(
    session: Session, *, submission_id: int, settings_hash: str | None = None, job_ids: Sequence[int] | None = None
) -> Mapping[str, int]:
    """How many jobs of a submission (under one settings hash, or among ``job_ids``) are in
    each status."""
    query = select(JOBS.c.status, func.count()).where(*selected_jobs(submission_id, job_ids))
    if settings_hash is not None:
        query = query.where(JOBS.c.settings_hash == settings_hash)
    return dict(session.execute(query.group_by(JOBS.c.status)).all())


__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "JobSpec",
    "enqueue",
    "ensure_settings",
    "failed_jobs",
    "job_ids",
    "load_settings",
    "reopen",
    "status_counts",
]
