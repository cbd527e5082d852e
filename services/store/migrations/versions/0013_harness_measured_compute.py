"""Compute the harness measures where the learner cannot reach it, beside cFLOP.

Revision ID: 0013
Revises: 0012

``trials.cpu_seconds``: the CPU time of the learner host's processes during the trial, read
from its control group or ``/proc`` by harness code; ``trials.flops_floor``: the least that
time is charged on the node that ran it (its measured FLOP rate × a fixed share). A trial whose
own count falls below the floor is charged the floor and marked ``flops_source = 'floor'``.
``task_results.cpu_seconds`` sums a task's trials and evaluation; ``task_results.flops_floored``
says one of them was floored (the leaderboard marks such rows). Nullable, never negative:
rows stored before this revision were not measured, and keep NULL (nothing is invented).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCES_BEFORE = ("measured", "reported")
SOURCES_AFTER = ("measured", "reported", "floor")


def _sources(values: Sequence[str]) -> str:
    return "flops_source IN ({})".format(", ".join(f"'{v}'" for v in values))


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("cpu_seconds", sa.Double(), nullable=True))
        batch.add_column(sa.Column("flops_floor", sa.Double(), nullable=True))
        batch.create_check_constraint(op.f("ck_trials_cpu_seconds_non_negative"), "cpu_seconds >= 0")
        batch.create_check_constraint(op.f("ck_trials_flops_floor_non_negative"), "flops_floor >= 0")
        batch.drop_constraint(op.f("ck_trials_flops_source"), type_="check")
        batch.create_check_constraint(op.f("ck_trials_flops_source"), _sources(SOURCES_AFTER))
    with op.batch_alter_table("task_results") as batch:
        batch.add_column(sa.Column("cpu_seconds", sa.Double(), nullable=True))
        batch.add_column(sa.Column("flops_floored", sa.Boolean(), nullable=False, server_default=sa.text("false")))
        batch.create_check_constraint(op.f("ck_task_results_cpu_seconds_non_negative"), "cpu_seconds >= 0")


def downgrade() -> None:
    op.execute("UPDATE trials SET flops_source = 'measured' WHERE flops_source = 'floor'")
    with op.batch_alter_table("task_results") as batch:
        batch.drop_constraint(op.f("ck_task_results_cpu_seconds_non_negative"), type_="check")
        batch.drop_column("flops_floored")
        batch.drop_column("cpu_seconds")
    with op.batch_alter_table("trials") as batch:
        batch.drop_constraint(op.f("ck_trials_flops_source"), type_="check")
        batch.create_check_constraint(op.f("ck_trials_flops_source"), _sources(SOURCES_BEFORE))
        batch.drop_constraint(op.f("ck_trials_flops_floor_non_negative"), type_="check")
        batch.drop_constraint(op.f("ck_trials_cpu_seconds_non_negative"), type_="check")
        batch.drop_column("flops_floor")
        batch.drop_column("cpu_seconds")
