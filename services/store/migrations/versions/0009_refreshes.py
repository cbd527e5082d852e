"""Benchmark refreshes: ``refreshes``, ``refresh_runs`` and ``submissions.pinned``.

Revision ID: 0009
Revises: 0008

A refresh re-runs the baselines and the pinned submissions of a stream on its new version
(services/coordinator/refresh). ``refreshes`` has one row per stream version (unique), the
trigger, status, times and the leaderboard snapshot taken when its runs have ended;
``refresh_runs`` names the submissions it queued. ``submissions.pinned`` is NOT NULL with the
server default false, so every earlier submission is unpinned, as it was. The allowed values
of each CHECK are written out (a migration is a snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOW = sa.text("CURRENT_TIMESTAMP")
JSON_DOC = sa.JSON().with_variant(JSONB(), "postgresql")


def _ck(table: str, name: str, sql: str) -> sa.CheckConstraint:
    return sa.CheckConstraint(sql, name=op.f(f"ck_{table}_{name}"))


def _fk(table: str, column: str, target: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("pinned", sa.Boolean(), nullable=False, server_default=sa.text("false")))
    t = "refreshes"
    op.create_table(
        t,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("stream_version_id", sa.Integer(), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="running"),
        sa.Column("requested_by", sa.String(100), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("snapshot", JSON_DOC, nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_refreshes")),
        _fk(t, "stream_version_id", "stream_versions", "RESTRICT"),
        sa.UniqueConstraint("stream_version_id", name=op.f("uq_refreshes_stream_version_id")),
        _ck(t, "trigger", "trigger IN ('schedule', 'admin', 'cli')"),
        _ck(t, "status", "status IN ('running', 'finished')"),
        _ck(t, "finished_at_set", "(status = 'finished') = (finished_at IS NOT NULL)"),
    )
    t = "refresh_runs"
    op.create_table(
        t,
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("refresh_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("source_submission_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_refresh_runs")),
        _fk(t, "submission_id", "submissions", "CASCADE"),
        _fk(t, "refresh_id", "refreshes", "CASCADE"),
        _fk(t, "source_submission_id", "submissions", "SET NULL"),
        _ck(t, "kind", "kind IN ('baseline', 'pinned')"),
    )
    op.create_index(op.f("ix_refresh_runs_refresh_id"), t, ["refresh_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_refresh_runs_refresh_id"), table_name="refresh_runs")
    op.drop_table("refresh_runs")
    op.drop_table("refreshes")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("pinned")
