"""Probes as their papers: correlations across trials, MM3 of the current task only.

Revision ID: 0015
Revises: 0014

``probe_correlations.scope`` gains ``trials`` (per task: the final checkpoint of every probed
trial, the LiDAR paper's ranking of models trained with different hyper-parameters; the
headline) and ``trials_mean`` (their mean); ``task`` (checkpoints along the trajectories) stays.
``probe_mismatch.mm3`` becomes nullable: M3 compares a target's error with the pretext task's
error, which is defined for the current task only, so earlier targets store NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_T = "probe_correlations"


def _scopes(scopes: str, per_task: str) -> None:
    with op.batch_alter_table(_T) as batch:
        batch.drop_constraint(op.f(f"ck_{_T}_scope"), type_="check")
        batch.drop_constraint(op.f(f"ck_{_T}_task_order_matches_scope"), type_="check")
        batch.create_check_constraint(op.f(f"ck_{_T}_scope"), f"scope IN ({scopes})")
        batch.create_check_constraint(
            op.f(f"ck_{_T}_task_order_matches_scope"), f"(scope IN ({per_task})) = (task_order >= 1)"
        )


def upgrade() -> None:
    _scopes("'task', 'pooled', 'task_mean', 'trials', 'trials_mean'", "'task', 'trials'")
    with op.batch_alter_table("probe_mismatch") as batch:
        batch.alter_column("mm3", existing_type=sa.Double(), nullable=True)


def downgrade() -> None:
    op.execute(sa.text(f"DELETE FROM {_T} WHERE scope IN ('trials', 'trials_mean')"))
    op.execute(sa.text("DELETE FROM probe_mismatch WHERE mm3 IS NULL"))
    with op.batch_alter_table("probe_mismatch") as batch:
        batch.alter_column("mm3", existing_type=sa.Double(), nullable=False)
    _scopes("'task', 'pooled', 'task_mean'", "'task'")
