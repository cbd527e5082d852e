"""Probe tables: trial curves, probe settings, the probe-job queue and probe results.

Revision ID: 0003
Revises: 0002

New tables only. The allowed values of each CHECK are written out (a migration is a
snapshot of the schema, not of the Python tuples).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
NOW = sa.text("CURRENT_TIMESTAMP")
HASH = sa.String(16)
KINDS = "probe_kind IN ('linear', 'mlp2', 'mlp3')"


def _ts(name: str, *, now: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=not now, server_default=NOW if now else None)


def _ck(table: str, name: str, sql: str) -> sa.CheckConstraint:
    return sa.CheckConstraint(sql, name=op.f(f"ck_{table}_{name}"))


def _non_negative(table: str, *columns: str) -> list[sa.CheckConstraint]:
    return [_ck(table, f"{c}_non_negative", f"{c} >= 0") for c in columns]


def _fk(table: str, column: str, target: str, ondelete: str, key: str = "id") -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.{key}"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def _settings(table: str) -> list[sa.SchemaItem]:
    return [
        sa.Column("settings_hash", HASH, nullable=False),
        _fk(table, "settings_hash", "probe_settings", "RESTRICT", key="settings_hash"),
    ]


def _pk(table: str) -> list[sa.SchemaItem]:
    return [sa.Column("id", sa.Integer(), nullable=False), sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}"))]


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=op.f(f"uq_{table}_{'_'.join(columns)}"))


def _ix(table: str, *columns: str) -> None:
    op.create_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table, list(columns))


def _drop_ix(table: str, *columns: str) -> None:
    op.drop_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table_name=table)


def upgrade() -> None:
    t = "trial_curves"
    op.create_table(
        t,
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("steps", JSON_DOC, nullable=False),
        sa.Column("losses", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        sa.PrimaryKeyConstraint("trial_id", name=op.f("pk_trial_curves")),
        _fk(t, "trial_id", "trials", "CASCADE"),
    )
    t = "probe_settings"
    op.create_table(
        t,
        sa.Column("settings_hash", HASH, nullable=False),
        sa.Column("settings", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        sa.PrimaryKeyConstraint("settings_hash", name=op.f("pk_probe_settings")),
    )
    t = "probe_jobs"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("job_key", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("task_order", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=True),
        sa.Column("checkpoint_id", sa.Integer(), nullable=True),
        *_settings(t),
        sa.Column("status", sa.String(16), server_default="queued", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default=sa.text("3"), nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        _ts("lease_expires_at"),
        _ts("heartbeat_at"),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("wall_time_s", sa.Double(), nullable=True),
        _ts("created_at", now=True),
        _ts("started_at"),
        _ts("finished_at"),
        _fk(t, "submission_id", "submissions", "CASCADE"),
        _fk(t, "trial_id", "trials", "CASCADE"),
        _fk(t, "checkpoint_id", "checkpoints", "CASCADE"),
        _uq(t, "job_key"),
        _ck(t, "kind", "kind IN ('checkpoint', 'trial', 'summary')"),
        _ck(t, "status", "status IN ('queued', 'running', 'done', 'failed')"),
        _ck(t, "checkpoint_job_target", "kind <> 'checkpoint' OR checkpoint_id IS NOT NULL"),
        _ck(t, "trial_set", "kind = 'summary' OR trial_id IS NOT NULL"),
        _ck(t, "max_attempts_positive", "max_attempts >= 1"),
        *_non_negative(t, "attempts", "task_order"),
    )
    _ix(t, "status", "lease_expires_at")
    _ix(t, "submission_id", "status")
    _ix(t, "trial_id", "status")
    t = "probe_checkpoint_results"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("checkpoint_id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        *_settings(t),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("lidar", sa.Double(), nullable=True),
        sa.Column("rankme", sa.Double(), nullable=True),
        sa.Column("pretext_error", sa.Double(), nullable=True),
        sa.Column("feature_dim", sa.Integer(), nullable=False),
        sa.Column("lidar_n", sa.Integer(), nullable=False),
        sa.Column("lidar_q", sa.Integer(), nullable=False),
        sa.Column("rankme_n", sa.Integer(), nullable=False),
        sa.Column("details", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        _fk(t, "checkpoint_id", "checkpoints", "CASCADE"),
        _fk(t, "trial_id", "trials", "CASCADE"),
        _uq(t, "checkpoint_id", "settings_hash"),
        _ck(t, "pretext_error_range", "pretext_error IS NULL OR (pretext_error >= 0 AND pretext_error <= 1)"),
        *_non_negative(t, "step", "feature_dim", "lidar_n", "lidar_q", "rankme_n"),
    )
    _ix(t, "trial_id")
    t = "probe_fits"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("checkpoint_id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        *_settings(t),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("target_order", sa.Integer(), nullable=False),
        sa.Column("probe_kind", sa.String(16), nullable=False),
        sa.Column("loss", sa.Double(), nullable=False),
        sa.Column("error", sa.Double(), nullable=False),
        sa.Column("fold_losses", JSON_DOC, nullable=False),
        sa.Column("fold_errors", JSON_DOC, nullable=False),
        sa.Column("folds", sa.Integer(), nullable=False),
        sa.Column("num_examples", sa.Integer(), nullable=False),
        sa.Column("num_classes", sa.Integer(), nullable=False),
        _ts("created_at", now=True),
        _fk(t, "checkpoint_id", "checkpoints", "CASCADE"),
        _fk(t, "trial_id", "trials", "CASCADE"),
        _uq(t, "checkpoint_id", "settings_hash", "target_order", "probe_kind"),
        _ck(t, "probe_kind", KINDS),
        _ck(t, "error_range", "error >= 0 AND error <= 1"),
        _ck(t, "target_order_positive", "target_order >= 1"),
        *_non_negative(t, "step", "num_examples", "num_classes", "folds"),
    )
    _ix(t, "trial_id")
    t = "probe_mismatch"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        *_settings(t),
        sa.Column("target_order", sa.Integer(), nullable=False),
        sa.Column("probe_kind", sa.String(16), nullable=False),
        sa.Column("conv_step", sa.Integer(), nullable=False),
        sa.Column("converged", sa.Boolean(), nullable=False),
        sa.Column("num_checkpoints", sa.Integer(), nullable=False),
        *[
            sa.Column(name, sa.Double(), nullable=False)
            for name in ("mm3", "msm3", "csm3", "msm3max", "mofm", "cofm", "mofm_max")
        ],
        sa.Column("spreads", JSON_DOC, nullable=False),
        sa.Column("curves", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        _fk(t, "trial_id", "trials", "CASCADE"),
        _uq(t, "trial_id", "settings_hash", "target_order", "probe_kind"),
        _ck(t, "probe_kind", KINDS),
        _ck(t, "target_order_positive", "target_order >= 1"),
        *_non_negative(t, "conv_step", "num_checkpoints"),
    )
    t = "probe_correlations"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        *_settings(t),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("task_order", sa.Integer(), nullable=False),
        sa.Column("proxy", sa.String(16), nullable=False),
        sa.Column("spearman", sa.Double(), nullable=True),
        sa.Column("kendall_tau_b", sa.Double(), nullable=True),
        sa.Column("num_points", sa.Integer(), nullable=False),
        _ts("created_at", now=True),
        _fk(t, "submission_id", "submissions", "CASCADE"),
        _uq(t, "submission_id", "settings_hash", "scope", "task_order", "proxy"),
        _ck(t, "scope", "scope IN ('task', 'pooled', 'task_mean')"),
        _ck(t, "proxy", "proxy IN ('lidar', 'rankme')"),
        _ck(t, "task_order_matches_scope", "(scope = 'task') = (task_order >= 1)"),
        *_non_negative(t, "task_order", "num_points"),
    )


def downgrade() -> None:
    op.drop_table("probe_correlations")
    op.drop_table("probe_mismatch")
    _drop_ix("probe_fits", "trial_id")
    op.drop_table("probe_fits")
    _drop_ix("probe_checkpoint_results", "trial_id")
    op.drop_table("probe_checkpoint_results")
    _drop_ix("probe_jobs", "trial_id", "status")
    _drop_ix("probe_jobs", "submission_id", "status")
    _drop_ix("probe_jobs", "status", "lease_expires_at")
    op.drop_table("probe_jobs")
    op.drop_table("probe_settings")
    op.drop_table("trial_curves")
