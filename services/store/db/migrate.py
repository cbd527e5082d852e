"""Schema migrations: upgrade, downgrade, and the start-up check that the schema is current.

Every function takes a SQLAlchemy URL and raises
:class:`~services.core.errors.DatabaseError` (URL password masked) when the database cannot
be reached or a revision is unknown. An upgrade or downgrade runs in one transaction, so a
failed migration leaves the schema as it was (SQLite and PostgreSQL both have transactional
DDL). On SQLite, foreign keys are off while migrating, so that rebuilding a table cannot
cascade into its children, and are checked before the transaction commits.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from services.core.config import mask_url
from services.core.errors import DatabaseError, unknown_name_message
from services.store.db.engine import make_engine, parse_url, sqlite_path

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
UPGRADE_HINT = "run `nevis db upgrade`"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for this project's migrations, built without an ini file."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if url is not None:
        config.attributes["url"] = url
    return config


def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def known_revisions() -> list[str]:
    """Every revision id shipped with the code, oldest first."""
    return [rev.revision for rev in reversed(list(_script().walk_revisions()))]


def head_revision() -> str:
    """The revision this code expects the database to be at."""
    head = _script().get_current_head()
    if head is None:
        raise DatabaseError(f"No migrations found in {MIGRATIONS_DIR}; the install is broken.")
    return head


def current_revision(url: str) -> str | None:
    """The database's revision, or ``None`` if it has never been migrated (or does not exist).

    A SQLite file that does not exist is reported as ``None`` and is not created.
    """
    path = sqlite_path(url)
    if path is not None and not path.expanduser().exists():
        return None
    with _connect(url) as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` forward to ``revision`` (default: the newest)."""
    _migrate(url, revision, command.upgrade)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at ``url`` back to ``revision`` (``"base"`` empties it)."""
    _migrate(url, revision, command.downgrade)


def ensure_current(url: str) -> None:
    """Refuse to start on a database whose schema is not the one this code expects.

    Raises:
        DatabaseError: The database is unreachable, empty, behind or ahead of the code.
    """
    current = current_revision(url)
    head = head_revision()
    if current == head:
        return
    where = f"The database at {mask_url(url)}"
    if current is None:
        raise DatabaseError(f"{where} has no schema (database at revision none), code expects {head}: {UPGRADE_HINT}.")
    if current not in known_revisions():
        raise DatabaseError(
            f"{where} is at revision {current}, which this code does not know (the database "
            f"is newer than the code); code expects {head}: install the matching version of "
            "nevis-service, or downgrade the database with the newer code."
        )
    raise DatabaseError(f"{where} is at revision {current}, code expects {head}: {UPGRADE_HINT}.")


def new_revision(message: str, *, autogenerate: bool = True) -> Path:
    """Write the next migration file (``NNNN_<slug>.py``) into the package's versions folder.

    With ``autogenerate`` the file holds the difference between the models and a scratch
    SQLite database migrated to the current head; review it before committing (Alembic
    does not see CHECK constraint or trigger changes).
    """
    if not message.strip():
        raise DatabaseError("A new revision needs a message, e.g. 'add probe jobs'.")
    rev_id = f"{len(known_revisions()) + 1:04d}"
    with tempfile.TemporaryDirectory(prefix="nevis-revision-") as scratch:
        url = f"sqlite:///{Path(scratch) / 'head.sqlite'}"
        if autogenerate:
            upgrade(url)
        try:
            script = command.revision(alembic_config(url), message=message, autogenerate=autogenerate, rev_id=rev_id)
        except CommandError as exc:
            raise DatabaseError(f"Cannot write a new revision: {exc}") from None
    if script is None or isinstance(script, list):
        raise DatabaseError("Alembic wrote no single revision file; check the migrations folder.")
    return Path(script.path)


def _migrate(url: str, revision: str, step: Callable[[Config, str], None]) -> None:
    """Run one Alembic command on a single transaction, translating its errors."""
    if not isinstance(revision, str) or not revision:
        raise DatabaseError(
            f"The revision must be a non-empty string. Got {revision!r} instead; known: "
            f"{', '.join(['base', *known_revisions(), 'head'])}."
        )
    with _connect(url, for_migration=True) as connection:
        config = alembic_config(url)
        config.attributes["connection"] = connection
        try:
            step(config, revision)
            if connection.dialect.name == "sqlite":
                _check_sqlite_foreign_keys(connection)
        except CommandError as exc:
            raise _revision_error(revision, exc) from None
        except SQLAlchemyError as exc:
            raise DatabaseError(
                f"Migrating the database at {mask_url(url)} to {revision} failed and was "
                f"rolled back: {_reason(exc, url)}"
            ) from exc


def _revision_error(revision: str, exc: CommandError) -> DatabaseError:
    known = ["base", *known_revisions(), "head"]
    if "Can't locate revision" in str(exc) or "No such revision" in str(exc):
        return DatabaseError(unknown_name_message("revision", revision, known))
    return DatabaseError(f"Cannot migrate to revision {revision!r}: {exc}")


def _check_sqlite_foreign_keys(connection: Connection) -> None:
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        tables = sorted({str(row[0]) for row in broken})
        raise DatabaseError(
            f"The migration left rows with dangling foreign keys in {', '.join(tables)}; it was rolled back."
        )


@contextmanager
def _connect(url: str, *, for_migration: bool = False) -> Iterator[Connection]:
    """One connection inside one transaction; commit on success, roll back on error."""
    parse_url(url)  # a clear error for a malformed URL
    engine = make_engine(url, foreign_keys=not for_migration)
    try:
        try:
            connection = engine.connect()
        except DBAPIError as exc:
            check = (
                "that its folder exists and is writable"
                if engine.dialect.name == "sqlite"
                else "that the database server is running"
            )
            raise DatabaseError(
                f"Cannot connect to the database at {mask_url(url)}. Check NEVIS_DATABASE_URL "
                f"and {check}. The driver said: {_reason(exc, url)}"
            ) from None
        with connection, connection.begin():
            yield connection
    finally:
        engine.dispose()


def _reason(exc: SQLAlchemyError, url: str) -> str:
    """The driver's message on one line, never showing the password."""
    original = getattr(exc, "orig", None) or exc
    text = " ".join(str(original).split())
    password = parse_url(url).password
    if password:
        text = text.replace(str(password), "***")
    return text


__all__ = [
    "MIGRATIONS_DIR",
    "UPGRADE_HINT",
    "alembic_config",
    "current_revision",
    "downgrade",
    "ensure_current",
    "head_revision",
    "known_revisions",
    "new_revision",
    "upgrade",
]
