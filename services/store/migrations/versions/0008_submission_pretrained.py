"""Submissions may name a pretrained checkpoint: ``submissions.pretrained_key``.

Revision ID: 0008
Revises: 0007

The object-store key of the checkpoint a PT or PT+FT run starts from (uploaded by
``nevis run --pretrained FILE`` under ``pretrained/<sha256>.bin``). Nullable: every earlier
run, and every run of another learner, has none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("pretrained_key", sa.String(length=1024), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("pretrained_key")
