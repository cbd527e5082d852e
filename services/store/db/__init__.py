"""The relational store: models, engines and sessions, and schema migrations.

Typical use::

    from services.store.db import ensure_current, sessions_on, transaction

    ensure_current(url)                  # refuse to run on an out-of-date schema
    sessions = sessions_on(url)          # session_factory(make_engine(url)), kept by the process
    with transaction(sessions) as session:
        session.add(...)
"""

from services.store.db.engine import (
    declare_writer,
    ensure_sqlite_parent,
    make_engine,
    session_factory,
    sessions_on,
    transaction,
)
from services.store.db.migrate import current_revision, downgrade, ensure_current, head_revision, upgrade
from services.store.db.models import Base

__all__ = [
    "Base",
    "current_revision",
    "declare_writer",
    "downgrade",
    "ensure_current",
    "ensure_sqlite_parent",
    "head_revision",
    "make_engine",
    "session_factory",
    "sessions_on",
    "transaction",
    "upgrade",
]
