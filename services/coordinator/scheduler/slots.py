"""Leases in flight, listed and counted: what the scheduler's slots are counted from.

Counted from the database, never from a process's memory: :func:`count_replica` counts the
leases in flight of every instance of one replica (a stable ``NEVIS_REPLICA_NAME``, so a
restarted coordinator sees what its previous process launched), :func:`count_active` those
of all replicas, under :func:`lock_claims` where a cluster-wide cap applies.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, ScheduledSubmission, TaskLease


def active_leases(session: Session) -> list[TaskLease]:
    """Every lease in flight, oldest first."""
    return list(
        session.scalars(select(TaskLease).where(TaskLease.status.in_(ACTIVE_LEASE_STATUSES)).order_by(TaskLease.id))
    )


def cancelled_in_flight(session: Session) -> list[TaskLease]:
    """Active leases whose submission was cancelled."""
    return list(
        session.scalars(
            select(TaskLease)
            .join(ScheduledSubmission, ScheduledSubmission.submission_id == TaskLease.submission_id)
            .where(TaskLease.status.in_(ACTIVE_LEASE_STATUSES), ScheduledSubmission.cancel_requested_at.is_not(None))
        )
    )


def count_owned(session: Session, *, owner: str) -> int:
    """Leases in flight that this scheduler instance (exactly this owner name) launched."""
    return (
        session.scalar(
            select(func.count())
            .select_from(TaskLease)
            .where(TaskLease.owner == owner, TaskLease.status.in_(ACTIVE_LEASE_STATUSES))
        )
        or 0
    )


def replica_owned(replica: str) -> ColumnElement[bool]:
    """The SQL condition "the lease's owner is an instance of ``replica``".

    Owners are ``<replica>`` or ``<replica>:<pid>:<nonce>`` (see
    :func:`~services.coordinator.scheduler.loop.instance_id`).
    """
    return or_(TaskLease.owner == replica, TaskLease.owner.startswith(f"{replica}:", autoescape=True))


def count_replica(session: Session, *, replica: str) -> int:
    """Leases in flight launched by any instance, past or present, of ``replica``."""
    return (
        session.scalar(
            select(func.count())
            .select_from(TaskLease)
            .where(replica_owned(replica), TaskLease.status.in_(ACTIVE_LEASE_STATUSES))
        )
        or 0
    )


CLAIM_LOCK_KEY = 0x6E657673
"""The PostgreSQL advisory lock a claim under ``NEVIS_CLUSTER_SLOTS`` holds (:func:`lock_claims`)."""


def lock_claims(session: Session) -> None:
    """Serialise claims across replicas until this transaction ends.

    Counting the leases in flight and then claiming is no compare-and-set: two replicas
    counting at once would both see a free cluster slot and both claim it. On PostgreSQL
    this takes a transaction-scoped advisory lock (released at commit or rollback), so a
    count taken after it stays true until the claim is committed; SQLite serialises
    writers anyway.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(CLAIM_LOCK_KEY)))


def count_active(session: Session) -> int:
    """Leases in flight, of every replica."""
    return (
        session.scalar(select(func.count()).select_from(TaskLease).where(TaskLease.status.in_(ACTIVE_LEASE_STATUSES)))
        or 0
    )


def foreign_leases(session: Session, *, backend: str, replica: str) -> list[TaskLease]:
    """Leases in flight on ``backend`` that another replica launched."""
    return list(
        session.scalars(
            select(TaskLease)
            .where(TaskLease.backend == backend, TaskLease.status.in_(ACTIVE_LEASE_STATUSES), ~replica_owned(replica))
            .order_by(TaskLease.id)
        )
    )


__all__ = [
    "CLAIM_LOCK_KEY",
    "active_leases",
    "cancelled_in_flight",
    "count_active",
    "count_owned",
    "count_replica",
    "foreign_leases",
    "lock_claims",
    "replica_owned",
]
