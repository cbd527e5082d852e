"""Submissions carry a visibility: ``submissions.visibility``, 'public' or 'private'.

Revision ID: 0007
Revises: 0006

A private submission is shown (leaderboard row, front point, pages, downloads) only to its
owner and admins. The column is NOT NULL with the server default 'public', so every row
made before this revision stays public, as it was; a CHECK keeps the vocabulary closed.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VISIBILITY_CHECK = "visibility IN ('public', 'private')"


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("visibility", sa.String(length=16), nullable=False, server_default="public"))
        batch.create_check_constraint(op.f("ck_submissions_visibility"), VISIBILITY_CHECK)


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_constraint(op.f("ck_submissions_visibility"), type_="check")
        batch.drop_column("visibility")
