"""The pretraining run's cFLOP beside a PT run's own.

Revision ID: 0016
Revises: 0015

``submissions.cflop_pretraining``: for a run that starts from a self-pretrained checkpoint
(``nevis pretrain``, learners ``pt_self`` / ``pt_ft_self``), the cFLOP of the run that made it,
read from the checkpoint's provenance (or that run's stored cFLOP where it is in the same
database) when the run is created. Shown beside the run's cFLOP, never added to it. NULL for
every other run, and for runs created before this revision. Never negative.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("cflop_pretraining", sa.Double(), nullable=True))
        batch.create_check_constraint(op.f("ck_submissions_cflop_pretraining_non_negative"), "cflop_pretraining >= 0")


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_constraint(op.f("ck_submissions_cflop_pretraining_non_negative"), type_="check")
        batch.drop_column("cflop_pretraining")
