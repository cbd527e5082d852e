"""Engines and sessions, configured the same way everywhere.

SQLite (the embedded default) gets foreign keys enforced, write-ahead logging so readers
never block the writer, a busy timeout so concurrent writers wait instead of failing, and
real transactions (SQLAlchemy emits BEGIN itself, so DDL and SAVEPOINTs are transactional).
A :func:`transaction` on SQLite takes the write lock when it begins (``BEGIN IMMEDIATE``):
SQLite cannot upgrade a reader whose snapshot another writer has since changed, so a unit of
work that read first and wrote later would fail at once with "database is locked" instead of
waiting its turn. Plain sessions (``with sessions() as s``) stay deferred readers.
PostgreSQL gets pre-ping, so a connection the server dropped is replaced, not reported, and
a connect timeout, so an unreachable server fails in seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import Session, sessionmaker

from services.core.config import mask_url
from services.core.errors import DatabaseError

SQLITE_BUSY_TIMEOUT_MS = 30_000  # how long a SQLite writer waits for the lock
CONNECT_TIMEOUT_S = 10  # PostgreSQL connect timeout unless the URL sets one
WRITE_INTENT = "nevis_write_intent"  # execution option: begin SQLite transactions IMMEDIATE


def parse_url(url: str) -> URL:
    """Parse a SQLAlchemy URL, raising :class:`DatabaseError` naming it (password masked)."""
    try:
        return make_url(url)
    except ArgumentError:
        raise DatabaseError(
            f"Cannot parse the database URL {mask_url(url)!r}; set NEVIS_DATABASE_URL to a "
            "SQLAlchemy URL such as sqlite:////path/nevis.sqlite or "
            "postgresql+psycopg://user:password@host:5432/nevis."
        ) from None


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, or ``None`` for other databases and in-memory ones."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def ensure_sqlite_parent(url: str) -> None:
    """Create the folder that will hold a SQLite database file, if it is missing."""
    path = sqlite_path(url)
    if path is not None:
        path.expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)


def make_engine(url: str, *, foreign_keys: bool = True, echo: bool = False) -> Engine:
    """Create an engine for ``url`` with this project's connection settings.

    Args:
        url: Any SQLAlchemy URL; SQLite and ``postgresql+psycopg`` are supported.
        foreign_keys: Enforce SQLite foreign keys. Turned off only while migrating, where
            rebuilding a table must not cascade into its children.
        echo: Log every statement (debugging).

    Raises:
        DatabaseError: The URL cannot be parsed or names a driver that is not installed.
    """
    parsed = parse_url(url)
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {"echo": echo}
    if backend == "postgresql":
        kwargs["pool_pre_ping"] = True
        if "connect_timeout" not in parsed.query:
            kwargs["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    try:
        engine = create_engine(parsed, **kwargs)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise DatabaseError(
            f"No driver for the database URL {mask_url(url)!r} ({exc}); use sqlite:/// or postgresql+psycopg://."
        ) from None
    if backend == "sqlite":
        _configure_sqlite(engine, foreign_keys=foreign_keys)
    return engine


def _configure_sqlite(engine: Engine, *, foreign_keys: bool) -> None:
    """Install the connect-time pragmas and SQLAlchemy-managed BEGIN on a SQLite engine."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy (see "sqlite_transactions" in its docs).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA foreign_keys = {'ON' if foreign_keys else 'OFF'}")
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        options = connection.get_execution_options()
        if options.get("isolation_level") != "AUTOCOMMIT":
            connection.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITE_INTENT) else "BEGIN")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory whose objects stay readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


def sessions_on(url: str) -> sessionmaker[Session]:
    """A session factory on a new engine for ``url``: what a process or a command opens once
    and keeps (its engine lives as long as the factory; dispose of ``factory.kw["bind"]`` to
    close it early)."""
    return session_factory(make_engine(url))


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit if the block succeeds, roll back if it raises.

    On SQLite it holds the write lock from its first statement, waiting (busy timeout) for
    another writer to finish rather than failing half-way; see the module docstring.

    Example:
        >>> with transaction(session_factory(engine)) as session:  # doctest: +SKIP
        ...     session.add(Event(kind="note", payload={}))
    """
    with factory() as session, session.begin():
        declare_writer(session)
        yield session


def declare_writer(session: Session) -> None:
    """Make ``session``'s coming transaction a SQLite writer from its first statement.

    Call it before the session has run anything; a no-op on PostgreSQL, where row locks
    order writers.
    """
    session.connection(execution_options={WRITE_INTENT: True})


__all__ = [
    "CONNECT_TIMEOUT_S",
    "SQLITE_BUSY_TIMEOUT_MS",
    "WRITE_INTENT",
    "declare_writer",
    "ensure_sqlite_parent",
    "make_engine",
    "parse_url",
    "session_factory",
    "sessions_on",
    "sqlite_path",
    "transaction",
]
