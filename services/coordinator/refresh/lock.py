"""The lock that keeps two coordinator replicas (or a replica and the CronJob) from both
starting the same refresh.

PostgreSQL: a transaction-scoped advisory lock, the same style as the scheduler's claim lock
(:func:`services.coordinator.scheduler.slots.lock_claims`), released at commit or rollback.
Whoever takes it second waits, then finds the first one's committed ``refreshes`` row and
starts nothing. SQLite: a no-op, because the writer transaction (``BEGIN IMMEDIATE``, see
:func:`services.store.db.transaction`) already serialises writers. The unique row per stream
version is the backstop either way.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

REFRESH_LOCK_KEY = 0x6E657672
"""The PostgreSQL advisory lock key of refreshes ("nevr"; the claim lock is "nevs")."""


def lock_refreshes(session: Session) -> None:
    """Serialise refresh starts across processes until this transaction ends."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(REFRESH_LOCK_KEY)))


__all__ = ["REFRESH_LOCK_KEY", "lock_refreshes"]
