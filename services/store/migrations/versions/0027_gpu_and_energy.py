"""GPU time, peak GPU memory and energy per trial and per task, beside cFLOP (issue 46).

Revision ID: 0027
Revises: 0026

``gpu_seconds`` (the learner hosts' processes' busy share of the GPUs × time, from NVML),
``gpu_peak_memory_bytes`` and ``gpu_note`` (why the GPU figures are NULL: no GPU given, no NVML
on the node, or what they do not cover) on ``trials`` and ``task_results``; ``energy_kwh`` and
``energy_source`` (how it was had: ``rapl`` where the node exposes Intel RAPL counters,
``estimate`` = CPU-seconds × a stated wattage otherwise, either ``+nvml`` with the GPUs'
energy counters). A task's figures sum its trials (peak: the largest). Nullable: rows stored
before this revision were not measured and keep NULL; a NULL GPU figure is never 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | Sequence[str] | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("trials", "task_results")
MEASURED = ("gpu_seconds", "gpu_peak_memory_bytes", "energy_kwh")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("gpu_seconds", sa.Double(), nullable=True))
            batch.add_column(sa.Column("gpu_peak_memory_bytes", sa.BigInteger(), nullable=True))
            batch.add_column(sa.Column("gpu_note", sa.Text(), nullable=True))
            batch.add_column(sa.Column("energy_kwh", sa.Double(), nullable=True))
            batch.add_column(sa.Column("energy_source", sa.String(16), nullable=True))
            for column in MEASURED:
                batch.create_check_constraint(op.f(f"ck_{table}_{column}_non_negative"), f"{column} >= 0")

    # what a leaderboard row shows, kept with its other scores (NULL until a result commits)
    with op.batch_alter_table("submission_scores") as batch:
        batch.add_column(sa.Column("gpu_seconds", sa.Double(), nullable=True))
        batch.add_column(sa.Column("gpu_note", sa.Text(), nullable=True))
        batch.add_column(sa.Column("energy_kwh", sa.Double(), nullable=True))
        batch.add_column(sa.Column("energy_source", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submission_scores") as batch:
        for column in ("energy_source", "energy_kwh", "gpu_note", "gpu_seconds"):
            batch.drop_column(column)
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for column in MEASURED:
                batch.drop_constraint(op.f(f"ck_{table}_{column}_non_negative"), type_="check")
            for column in ("energy_source", "energy_kwh", "gpu_note", "gpu_peak_memory_bytes", "gpu_seconds"):
                batch.drop_column(column)
