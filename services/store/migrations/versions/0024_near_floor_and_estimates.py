"""The near-floor mark and the estimated-CPU mark, stored (issue 44).

Revision ID: 0024
Revises: 0023

``trials.flops_source`` may be ``'near_floor'``: the learner's own count was charged, but it lies
within ``NEVIS_NEAR_FLOOR_BAND`` (4) times the trial's CPU-time floor, as a count topped up to
just over the floor does. ``task_results.flops_near_floor`` says one of a task's trials was;
``submission_scores.near_floor_tasks`` counts such results (the leaderboard marks the row).
``trials.cpu_estimated`` and ``task_results.cpu_estimated``: the CPU seconds are wall time ×
declared CPUs, because no usage reading could be had (``workers/trainer/host_usage.py``).
Every row before this revision keeps false and 0: nothing was marked then.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCES_BEFORE = ("measured", "reported", "floor")
SOURCES_AFTER = ("measured", "reported", "floor", "near_floor")


def _sources(values: Sequence[str]) -> str:
    return "flops_source IN ({})".format(", ".join(f"'{v}'" for v in values))


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("cpu_estimated", sa.Boolean(), nullable=False, server_default=sa.text("false")))
        batch.drop_constraint(op.f("ck_trials_flops_source"), type_="check")
        batch.create_check_constraint(op.f("ck_trials_flops_source"), _sources(SOURCES_AFTER))
    with op.batch_alter_table("task_results") as batch:
        batch.add_column(sa.Column("flops_near_floor", sa.Boolean(), nullable=False, server_default=sa.text("false")))
        batch.add_column(sa.Column("cpu_estimated", sa.Boolean(), nullable=False, server_default=sa.text("false")))
    with op.batch_alter_table("submission_scores") as batch:
        batch.add_column(sa.Column("near_floor_tasks", sa.Integer(), nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    op.execute("UPDATE trials SET flops_source = 'measured' WHERE flops_source = 'near_floor'")
    with op.batch_alter_table("submission_scores") as batch:
        batch.drop_column("near_floor_tasks")
    with op.batch_alter_table("task_results") as batch:
        batch.drop_column("cpu_estimated")
        batch.drop_column("flops_near_floor")
    with op.batch_alter_table("trials") as batch:
        batch.drop_constraint(op.f("ck_trials_flops_source"), type_="check")
        batch.create_check_constraint(op.f("ck_trials_flops_source"), _sources(SOURCES_BEFORE))
        batch.drop_column("cpu_estimated")
