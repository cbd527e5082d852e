"""cFLOP as NEVIS'22 counts it, beside the headline: FLOPs by purpose.

Revision ID: 0014
Revises: 0013

``trials.flops_paper``: the part of a trial's FLOPs spent on training updates (every backward
and the forward passes made with gradients on), the count the NEVIS'22 paper and its reference
code use; validation, dev scoring and transfer selection are the rest of ``trials.flops``.
``task_results.flops_paper`` sums a task's trials; ``task_results.flops_prediction`` is the
evaluation's prediction, in ``task_results.flops`` but not in the paper's count. Nullable,
never negative: rows stored before this revision were not split, and keep NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("flops_paper", sa.Double(), nullable=True))
        batch.create_check_constraint(op.f("ck_trials_flops_paper_non_negative"), "flops_paper >= 0")
    with op.batch_alter_table("task_results") as batch:
        batch.add_column(sa.Column("flops_paper", sa.Double(), nullable=True))
        batch.add_column(sa.Column("flops_prediction", sa.Double(), nullable=True))
        batch.create_check_constraint(op.f("ck_task_results_flops_paper_non_negative"), "flops_paper >= 0")
        batch.create_check_constraint(op.f("ck_task_results_flops_prediction_non_negative"), "flops_prediction >= 0")


def downgrade() -> None:
    with op.batch_alter_table("task_results") as batch:
        batch.drop_constraint(op.f("ck_task_results_flops_prediction_non_negative"), type_="check")
        batch.drop_constraint(op.f("ck_task_results_flops_paper_non_negative"), type_="check")
        batch.drop_column("flops_prediction")
        batch.drop_column("flops_paper")
    with op.batch_alter_table("trials") as batch:
        batch.drop_constraint(op.f("ck_trials_flops_paper_non_negative"), type_="check")
        batch.drop_column("flops_paper")
