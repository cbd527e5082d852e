"""Coordinator tables: users, API tokens, idempotency keys, scheduling state (filled by the coordinator work).

Imported at the end of :mod:`services.store.db.models`, so every table shares one
metadata and one Alembic history.
"""

from __future__ import annotations

from services.store.db.base import Base  # noqa: F401 - models here subclass it
