"""Probe tables (durable probe-job queue, probe results).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Nothing yet: filled in by the probe-pool work."""


def downgrade() -> None:
    """Nothing yet."""
