"""The meta-test consistency check's outcome per task result.

Revision ID: 0022
Revises: 0021

``task_results.consistency_jump``: the net share of a secret sample of test images the learner
got right as originals and wrong as copies shifted by one pixel
(``workers/trainer/consistency.py``); NULL when not checked (meta-train, too few images, and
every result before this revision). ``task_results.inconsistent``: the jump is beyond what an
honest learner shows; the leaderboard, the API and ``nevis results`` mark such a submission.
``submission_scores.inconsistent_tasks``: how many of a submission's results are marked, kept
as results commit like the other aggregates (0 for every row before this revision, rightly).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("task_results") as batch:
        batch.add_column(sa.Column("consistency_jump", sa.Double(), nullable=True))
        batch.add_column(sa.Column("inconsistent", sa.Boolean(), nullable=False, server_default=sa.text("false")))
    with op.batch_alter_table("submission_scores") as batch:
        batch.add_column(sa.Column("inconsistent_tasks", sa.Integer(), nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    with op.batch_alter_table("submission_scores") as batch:
        batch.drop_column("inconsistent_tasks")
    with op.batch_alter_table("task_results") as batch:
        batch.drop_column("inconsistent")
        batch.drop_column("consistency_jump")
