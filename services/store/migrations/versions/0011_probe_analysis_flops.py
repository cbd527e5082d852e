"""Probe jobs keep the FLOPs they cost: ``probe_jobs.analysis_flops``.

Revision ID: 0011
Revises: 0010

What a done probe job spent: the learner's passes of a checkpoint job (loading the
predictor, ``features``, ``predict``), metered in the learner host as a prediction job is,
and the probe fits of a trial job. The harness's analysis, reported apart from and never
added to a submission's cFLOP. Nullable: jobs done before this revision were not metered,
and they keep NULL (a figure is never invented for them). Never negative.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("probe_jobs") as batch:
        batch.add_column(sa.Column("analysis_flops", sa.Double(), nullable=True))
        batch.create_check_constraint(op.f("ck_probe_jobs_analysis_flops_non_negative"), "analysis_flops >= 0")


def downgrade() -> None:
    with op.batch_alter_table("probe_jobs") as batch:
        batch.drop_constraint(op.f("ck_probe_jobs_analysis_flops_non_negative"), type_="check")
        batch.drop_column("analysis_flops")
