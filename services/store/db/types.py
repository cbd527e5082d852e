"""Column types that behave the same on SQLite and PostgreSQL.

- :class:`UTCDateTime` stores instants in UTC and always returns timezone-aware UTC
  datetimes, although SQLite itself keeps no zone; naive datetimes are refused, because
  a naive value cannot be placed on the timeline.
- :data:`JSONDoc` is JSON everywhere and ``JSONB`` on PostgreSQL, so documents there can
  be compared and indexed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    """The current instant as an aware UTC datetime (the default of every timestamp)."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp with time zone, normalised to UTC on the way in and out."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"A timestamp column must be given a datetime. Got {type(value).__name__} instead.")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"A timestamp column must be given an aware datetime. Got naive {value!r} "
                "instead; use datetime.now(timezone.utc)."
            )
        value = value.astimezone(UTC)
        # SQLite keeps text without a zone; store the UTC wall time.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# JSON documents (manifests, configs, budgets, payloads); JSONB on PostgreSQL.
JSONDoc = JSON().with_variant(JSONB(), "postgresql")


__all__ = ["JSONDoc", "UTCDateTime", "utcnow"]
