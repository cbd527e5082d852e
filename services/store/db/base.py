"""The declarative base and the building blocks every model uses.

The naming convention gives each index and constraint a stable, dialect-independent name,
which migrations need to alter them later (SQLite rebuilds tables by name).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, MetaData, text
from sqlalchemy.orm import DeclarativeBase, MappedColumn, mapped_column

from services.store.db.types import UTCDateTime, utcnow

KEY_LENGTH = 1024  # object-store keys
NOW = text("CURRENT_TIMESTAMP")  # the same server default on SQLite and PostgreSQL

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base of every table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def one_of(column: str, values: tuple[str, ...]) -> str:
    """SQL for a CHECK that ``column`` holds one of ``values``."""
    for value in values:
        if not value.replace("_", "").isalnum():
            raise ValueError(f"The 'values' of one_of must be identifiers. Got {value!r} instead.")
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"


def named_check(sql: str, name: str) -> CheckConstraint:
    """A CHECK named ``ck_<table>_<name>`` through the naming convention."""
    return CheckConstraint(sql, name=name)


def sha256_check(column: str) -> CheckConstraint:
    """``column`` holds a 64-character hex digest (or is NULL)."""
    return named_check(f"length({column}) = 64", f"{column}_hex")


def non_negative(*columns: str) -> tuple[CheckConstraint, ...]:
    """One ``>= 0`` CHECK per column (NULL passes)."""
    return tuple(named_check(f"{c} >= 0", f"{c}_non_negative") for c in columns)


def created_column() -> MappedColumn[datetime]:
    """A required creation time, set by Python and, for raw SQL inserts, by the server."""
    return mapped_column(UTCDateTime(), default=utcnow, server_default=NOW)


__all__ = [
    "KEY_LENGTH",
    "NAMING_CONVENTION",
    "NOW",
    "Base",
    "created_column",
    "named_check",
    "non_negative",
    "one_of",
    "sha256_check",
]
