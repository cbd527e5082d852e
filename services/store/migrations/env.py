"""Alembic environment, configured from code (there is no alembic.ini).

:mod:`services.store.db.migrate` builds the Alembic config and passes either an open
connection (``config.attributes["connection"]``, already in a transaction) or a URL
(``config.attributes["url"]``). SQLite migrations render ALTERs as batch operations,
because SQLite can only change most table definitions by rebuilding the table.
"""

from __future__ import annotations

import logging
from typing import Any

from alembic import context
from sqlalchemy import JSON
from sqlalchemy.engine import Connection

from services.store.db.engine import make_engine
from services.store.db.models import Base
from services.store.db.types import UTCDateTime

config = context.config
log = logging.getLogger(__name__)
target_metadata = Base.metadata


def _render_item(kind: str, obj: Any, autogen: Any) -> str | bool:
    """Write the project's column types as plain SQLAlchemy, so migrations stand alone."""
    if kind != "type":
        return False
    if isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    if isinstance(obj, JSON) and "postgresql" in getattr(obj, "_variant_mapping", {}):
        autogen.imports.add("from sqlalchemy.dialects import postgresql")
        return 'sa.JSON().with_variant(postgresql.JSONB(), "postgresql")'
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=_render_item,
    )


def run_offline() -> None:
    """Emit SQL for ``url`` without connecting (``alembic upgrade --sql``)."""
    context.configure(
        url=config.attributes["url"],
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_deferred_backfills(connection: Connection) -> None:
    """Run the back-fills that migrations deferred (they read through today's ORM models),
    in the migration's transaction, once the schema is at head: at an older revision those
    models name columns that do not exist yet. An upgrade that stops short of head leaves
    them for none (a later upgrade from there does not re-run them): upgrade to head."""
    pending = config.attributes.pop("deferred_backfills", [])
    if not pending:
        return
    if context.get_context().get_current_revision() != context.script.get_current_head():
        log.warning(
            "%d back-fill(s) of derived rows skipped: the schema is not at head; "
            "upgrade to head to keep the leaderboard's summaries.",
            len(pending),
        )
        return
    for backfill in pending:
        backfill(connection)


def run_online() -> None:
    """Run on the given connection, or on a fresh one to ``url`` in one transaction."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
            run_deferred_backfills(connection)
        return
    engine = make_engine(config.attributes["url"], foreign_keys=False)
    try:
        with engine.begin() as fresh:
            _configure(fresh)
            context.run_migrations()
            run_deferred_backfills(fresh)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
