"""Write transactions that behave on SQLite as they do on PostgreSQL.

SQLite (the embedded default) lets one connection write at a time. A transaction that reads
first and writes later cannot wait for another writer: it fails at once with "database is
locked" if someone committed since its read. The coordinator has several writers (API,
scheduler, worker heartbeats), so its write transactions take the write lock first, with a
no-op UPDATE, and then wait (busy timeout) instead of failing. On PostgreSQL row locks do
this job and the no-op is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from services.store.db import transaction

_TAKE_WRITE_LOCK = text("UPDATE task_leases SET id = id WHERE 0 = 1")


def take_write_lock(session: Session) -> None:
    """On SQLite, make ``session``'s transaction the writer now (waits for the lock)."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(_TAKE_WRITE_LOCK)


@contextmanager
def write_transaction(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """:func:`services.store.db.transaction`, holding SQLite's write lock from the start."""
    with transaction(sessions) as session:
        take_write_lock(session)
        yield session
