"""Idempotent writes that read the same on SQLite and PostgreSQL.

Both dialects support ``INSERT ... ON CONFLICT``; these helpers pick the dialect's insert
construct so callers write one statement. Rows are dicts of column values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def _insert(session: Session, table: Table) -> Any:
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"Probe writes support SQLite and PostgreSQL, not {name!r}.")


def insert_ignore(session: Session, table: Table, rows: Sequence[Mapping[str, Any]], *, conflict: Sequence[str]) -> int:
    """Insert ``rows``, skipping any that collide on the unique key ``conflict``.

    Returns:
        How many rows were inserted.
    """
    key = list(table.primary_key.columns)[0]
    inserted = 0
    for row in rows:  # RETURNING counts reliably; rowcount of ON CONFLICT differs by driver
        statement = (
            _insert(session, table).values(**row).on_conflict_do_nothing(index_elements=list(conflict)).returning(key)
        )
        inserted += len(session.execute(statement).all())
    return inserted


def upsert(session: Session, table: Table, rows: Sequence[Mapping[str, Any]], *, conflict: Sequence[str]) -> None:
    """Insert ``rows``, or overwrite the non-key columns of rows already there."""
    for row in rows:
        statement = _insert(session, table).values(**row)
        update = {k: statement.excluded[k] for k in row if k not in conflict}
        session.execute(statement.on_conflict_do_update(index_elements=list(conflict), set_=update))


__all__ = ["insert_ignore", "upsert"]
