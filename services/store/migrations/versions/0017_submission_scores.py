"""The leaderboard's summary table, kept as results commit.

Revision ID: 0017
Revises: 0016

``submission_scores``: one row per submission with committed results, the aggregate its
leaderboard row shows (tasks done, cFLOP, cFLOP (paper), CPU seconds, floored tasks, headline
tasks done and E over them), rewritten from the submission's results in the transaction that
commits one (``services.store.runs.scores``), so a leaderboard read scans one row per
submission instead of every result. Back-filled here from the results already stored, with
the same aggregate; deleting a submission deletes its row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_T = "submission_scores"
BACKFILL = f"""
INSERT INTO {_T} (submission_id, tasks_done, cflop, cflop_paper, cpu_seconds, floored_tasks,
                  headline_done, mean_error)
SELECT r.submission_id, COUNT(r.id), SUM(r.flops),
       CASE WHEN COUNT(r.flops_paper) = COUNT(r.id) THEN SUM(r.flops_paper) END,
       SUM(r.cpu_seconds), SUM(CASE WHEN r.flops_floored THEN 1 ELSE 0 END),
       COUNT(CASE WHEN t.phase = s.phase THEN r.id END), AVG(CASE WHEN t.phase = s.phase THEN r.error END)
FROM task_results r
JOIN stream_tasks t ON t.id = r.stream_task_id
JOIN submissions s ON s.id = r.submission_id
GROUP BY r.submission_id
"""


def upgrade() -> None:
    op.create_table(
        _T,
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("tasks_done", sa.Integer(), nullable=False),
        sa.Column("cflop", sa.Double(), nullable=False),
        sa.Column("cflop_paper", sa.Double(), nullable=True),
        sa.Column("cpu_seconds", sa.Double(), nullable=True),
        sa.Column("floored_tasks", sa.Integer(), nullable=False),
        sa.Column("headline_done", sa.Integer(), nullable=False),
        sa.Column("mean_error", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("submission_id", name=op.f(f"pk_{_T}")),
        sa.ForeignKeyConstraint(
            ["submission_id"], ["submissions.id"], name=op.f(f"fk_{_T}_submission_id_submissions"), ondelete="CASCADE"
        ),
        *(
            sa.CheckConstraint(f"{c} >= 0", name=op.f(f"ck_{_T}_{c}_non_negative"))
            for c in ("tasks_done", "headline_done", "floored_tasks", "cflop", "cflop_paper", "cpu_seconds")
        ),
    )
    op.execute(sa.text(BACKFILL))


def downgrade() -> None:
    op.drop_table(_T)
