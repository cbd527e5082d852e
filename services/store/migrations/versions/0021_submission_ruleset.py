"""The ruleset each submission competes under (issue 50).

Revision ID: 0021
Revises: 0020

``submissions.ruleset``: the name of a :mod:`services.core.rulesets` entry (``open``,
``budget-<X>``, ``self-tuning``). Rows stored before rulesets existed ran under today's rules,
so they are ``open``; the leaderboard lists each ruleset apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("ruleset", sa.String(48), nullable=False, server_default="open"))
        batch.create_index(batch.f("ix_submissions_ruleset"), ["ruleset"])


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_index(batch.f("ix_submissions_ruleset"))
        batch.drop_column("ruleset")
