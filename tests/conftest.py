"""Fixtures shared by the whole suite: settings pointed at a temporary folder, and databases.

Databases:
- ``postgres_admin_url`` (session): the server in ``NEVIS_TEST_POSTGRES_URL`` (default
  ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``). If nothing listens there, a
  private server from this machine's binaries runs for the session (off with
  ``NEVIS_TEST_PRIVATE_POSTGRES=0``); if that fails too, or the server there refuses us, every
  test that needs it FAILS with a message saying so; it is never skipped.
- ``postgres_database_url`` (session): a fresh, uniquely named database migrated to head,
  dropped at the end of the session.
- ``database_url`` (per test, parametrised ``sqlite`` / ``postgres``): a database at the
  head revision with no rows, private to the test (on PostgreSQL: the session database,
  emptied after each test). Select one dialect with ``-m "not postgres"``.
- ``empty_database_url`` (per test, both dialects): a database with no schema at all.
- ``db_engine`` (per test): an engine on ``database_url``, disposed afterwards.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from graphlib import TopologicalSorter
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from services.core.config import get_settings, mask_url
from services.store.db.engine import make_engine
from services.store.db.migrate import head_revision, upgrade
from tests.support.private_postgres import PrivatePostgresError, answers, start_private_postgres
from tests.support.session_report import PRIVATE_POSTGRES, pytest_runtest_makereport, pytest_terminal_summary  # noqa: F401 (hooks pytest finds here)

POSTGRES_URL_VAR = "NEVIS_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PRIVATE_POSTGRES_VAR = "NEVIS_TEST_PRIVATE_POSTGRES"
DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

# Variables that would leak the developer's own set-up into a test.
_SETTINGS_VARS = (
    "NEVIS_DATABASE_URL",
    "NEVIS_STORE_URL",
    "NEVIS_S3_ENDPOINT_URL",
    "NEVIS_RAY_ADDRESS",
    "NEVIS_IMAGE_SIZE",
    "NEVIS_STORED_SCALE",
    "NEVIS_DATA_MIRROR",
    "NEVIS_SOURCE_CATALOGUE",
)


@pytest.fixture
def settings_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point ``NEVIS_DATA_DIR`` at a fresh folder and rebuild the settings around it.

    Other ``NEVIS_*`` settings are unset (``NEVIS_OFFLINE_DATA_DIR`` is kept); a test may
    set more with ``monkeypatch.setenv`` followed by ``get_settings.cache_clear()``.
    Yields the data folder.
    """
    data_dir = tmp_path / "nevis-data"
    monkeypatch.setenv("NEVIS_DATA_DIR", str(data_dir))
    for name in _SETTINGS_VARS:
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield data_dir
    get_settings.cache_clear()


def _admin_engine(url: str) -> Engine:
    """An autocommit engine for CREATE / DROP DATABASE, which refuse to run in a transaction."""
    return create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5}, poolclass=NullPool)


@pytest.fixture(scope="session")
def postgres_admin_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The PostgreSQL server for tests: the configured one, or a private one if none answers there.

    Nothing listening at the configured address (a fresh machine): a private server is started
    for the session (tests/support/private_postgres.py) unless ``NEVIS_TEST_PRIVATE_POSTGRES=0``.
    A server that answers but refuses us fails every dependent test; none is ever skipped.
    """
    url = os.environ.get(POSTGRES_URL_VAR, DEFAULT_POSTGRES_URL)
    address = make_url(url)
    if address.host and not answers(address.host, address.port or 5432) and _private_allowed():
        yield from _private_postgres(request.config, url)
        return
    engine = _admin_engine(url)
    problem = None
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError as exc:
        problem = " ".join(str(exc.orig).split())
    finally:
        engine.dispose()
    if problem is not None:
        pytest.fail(
            f"PostgreSQL at {mask_url(url)} is unreachable ({problem}). Start it, or set "
            f"{POSTGRES_URL_VAR} to a server where this user may create databases; run only "
            'the SQLite tests with -m "not postgres".',
            pytrace=False,
        )
    yield url


def _private_allowed() -> bool:
    return os.environ.get(PRIVATE_POSTGRES_VAR, "1").strip().lower() not in ("0", "false", "no")


def _private_postgres(config: pytest.Config, configured_url: str) -> Iterator[str]:
    """Start a private server for the session, and stop and remove it at the end."""
    try:
        server = start_private_postgres()
    except PrivatePostgresError as exc:
        pytest.fail(
            f"No PostgreSQL answers at {mask_url(configured_url)}, and a private one could not be started: {exc}",
            pytrace=False,
        )
    try:
        yield server.url
    finally:
        server.stop()
        config.stash[PRIVATE_POSTGRES] = (
            f"No PostgreSQL answered at {mask_url(configured_url)}: the tests used a private server "
            f"({server.bin_dir}) on 127.0.0.1:{server.port} in {server.folder}, now stopped and removed."
        )


def _create_database(admin_url: str, name: str) -> str:
    engine = _admin_engine(admin_url)
    try:
        with engine.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name}"))
    finally:
        engine.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def _drop_database(admin_url: str, name: str) -> None:
    engine = _admin_engine(admin_url)
    try:
        with engine.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    finally:
        engine.dispose()


def _unique_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def sqlite_template_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at head, copied for each test (copying beats migrating each time)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "head.sqlite"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def postgres_database_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh, uniquely named database at head for this session, dropped at the end.

    ``database_url`` hands it to one test at a time and empties it afterwards.
    """
    name = _unique_name("nevis_test")
    url = _create_database(postgres_admin_url, name)
    try:
        upgrade(url)
        yield url
    finally:
        _drop_database(postgres_admin_url, name)


@pytest.fixture(params=DIALECTS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at the head revision with no rows, private to the test, on both dialects.

    SQLite: a copy of a file migrated once per session. PostgreSQL: the session database,
    emptied after the test (rows deleted, sequences restarted, schema brought back to head),
    which is much faster than creating a database per test.
    """
    if request.param == "sqlite":
        path = tmp_path / "db" / "nevis.sqlite"
        path.parent.mkdir()
        shutil.copyfile(request.getfixturevalue("sqlite_template_path"), path)
        yield f"sqlite:///{path}"
        return
    url = request.getfixturevalue("postgres_database_url")
    try:
        yield url
    finally:
        _empty_postgres(url)


def _empty_postgres(url: str) -> None:
    """Delete every row (children first, user triggers off) and restart the sequences.

    Connections the test left open are ended first, so that none holds a lock. A test that
    moved the schema off head gets a rebuilt schema.
    """
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as connection:
            connection.execute(text(_TERMINATE_OTHERS))
            connection.commit()
        with engine.begin() as connection:
            connection.execute(text("SET LOCAL lock_timeout = '10s'"))
            versions: list[str] = []
            if connection.execute(text("SELECT to_regclass('alembic_version')")).scalar():
                versions = list(connection.execute(_VERSIONS).scalars())
            if versions != [head_revision()]:
                connection.execute(text("DROP SCHEMA public CASCADE"))
                connection.execute(text("CREATE SCHEMA public"))
                rebuild = True
            else:
                rebuild = False
                _delete_all_rows(connection)
        if rebuild:
            upgrade(url)
    finally:
        engine.dispose()


def _delete_all_rows(connection: Connection) -> None:
    quote = connection.dialect.identifier_preparer.quote
    tables = set(connection.execute(text(_TABLES)).scalars())
    children: dict[str, set[str]] = {table: set() for table in tables}
    for child, parent in connection.execute(text(_FOREIGN_KEYS)):
        if child != parent and parent in children:
            children[parent].add(child)
    guarded = [quote(t) for t in connection.execute(text(_TRIGGER_TABLES)).scalars()]
    for table in guarded:
        connection.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER USER"))
    for table in TopologicalSorter(children).static_order():  # children before parents
        connection.execute(text(f"DELETE FROM {quote(table)}"))
    for table in guarded:
        connection.execute(text(f"ALTER TABLE {table} ENABLE TRIGGER USER"))
    connection.execute(text(_RESTART_SEQUENCES))


_VERSIONS = text("SELECT version_num FROM alembic_version")
_TERMINATE_OTHERS = """
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
_TABLES = """
    SELECT tablename FROM pg_tables
    WHERE schemaname = current_schema() AND tablename <> 'alembic_version'
"""
_FOREIGN_KEYS = """
    SELECT child.relname, parent.relname FROM pg_constraint c
    JOIN pg_class child ON child.oid = c.conrelid
    JOIN pg_class parent ON parent.oid = c.confrelid
    JOIN pg_namespace n ON n.oid = child.relnamespace
    WHERE c.contype = 'f' AND n.nspname = current_schema()
"""
_TRIGGER_TABLES = """
    SELECT DISTINCT c.relname FROM pg_trigger t
    JOIN pg_class c ON c.oid = t.tgrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE NOT t.tgisinternal AND n.nspname = current_schema()
"""
_RESTART_SEQUENCES = """
    SELECT setval((quote_ident(schemaname) || '.' || quote_ident(sequencename))::regclass,
                  1, false)
    FROM pg_sequences WHERE schemaname = current_schema()
"""


@pytest.fixture(params=DIALECTS)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A private database with no schema, on SQLite and on PostgreSQL (for migration tests)."""
    if request.param == "sqlite":
        (tmp_path / "empty").mkdir()
        yield f"sqlite:///{tmp_path / 'empty' / 'nevis.sqlite'}"
        return
    admin_url = request.getfixturevalue("postgres_admin_url")
    name = _unique_name("nevis_e")
    try:
        yield _create_database(admin_url, name)
    finally:
        _drop_database(admin_url, name)


@pytest.fixture
def db_engine(database_url: str) -> Iterator[Engine]:
    """An engine (project settings) on the test's migrated database."""
    engine = make_engine(database_url)
    yield engine
    engine.dispose()
