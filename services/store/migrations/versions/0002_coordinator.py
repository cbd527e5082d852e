"""Coordinator tables (users, API tokens, idempotency keys, scheduling state).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Nothing yet: filled in by the coordinator work."""


def downgrade() -> None:
    """Nothing yet."""
