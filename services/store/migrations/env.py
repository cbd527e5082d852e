"""Alembic environment, configured from code (there is no alembic.ini).

:mod:`services.store.db.migrate` builds the Alembic config and passes either an open
connection (``config.attributes["connection"]``, already in a transaction) or a URL
(``config.attributes["url"]``). SQLite migrations render ALTERs as batch operations,
because SQLite can only change most table definitions by rebuilding the table.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import JSON
from sqlalchemy.engine import Connection

from services.store.db.engine import make_engine
from services.store.db.models import Base
from services.store.db.types import UTCDateTime

config = context.config
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


def run_online() -> None:
    """Run on the given connection, or on a fresh one to ``url`` in one transaction."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(config.attributes["url"], foreign_keys=False)
    try:
        with engine.begin() as fresh:
            _configure(fresh)
            context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
