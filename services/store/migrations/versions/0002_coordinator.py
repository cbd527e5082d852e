"""Coordinator tables (users, API tokens, ownership, idempotency keys, scheduling state).

Revision ID: 0002
Revises: 0001

New tables only: existing tables are not altered, so the runner's schema stays as 0001 left
it. The allowed values of each CHECK are written out (a migration is a snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOW = sa.text("CURRENT_TIMESTAMP")
BACKENDS = "backend IN ('local', 'ray', 'kuberay')"
ACTIVE = sa.text("status IN ('launching', 'launched', 'running')")


def _ts(name: str, *, now: bool = False, required: bool = False) -> sa.Column:
    return sa.Column(
        name, sa.DateTime(timezone=True), nullable=not (now or required), server_default=NOW if now else None
    )


def _ck(table: str, name: str, sql: str) -> sa.CheckConstraint:
    return sa.CheckConstraint(sql, name=op.f(f"ck_{table}_{name}"))


def _fk(table: str, column: str, target: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def _ix(table: str, *columns: str) -> None:
    op.create_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table, list(columns))


def upgrade() -> None:
    t = "users"
    op.create_table(
        t,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("max_concurrent", sa.Integer(), nullable=True),
        sa.Column("max_per_day", sa.Integer(), nullable=True),
        _ts("created_at", now=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
        _ck(t, "role", "role IN ('admin', 'submitter')"),
        _ck(t, "max_concurrent_non_negative", "max_concurrent IS NULL OR max_concurrent >= 0"),
        _ck(t, "max_per_day_non_negative", "max_per_day IS NULL OR max_per_day >= 0"),
    )
    t = "api_tokens"
    op.create_table(
        t,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(100), nullable=False),
        sa.Column("token_prefix", sa.String(16), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        _ts("created_at", now=True),
        _ts("expires_at"),
        _ts("revoked_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        _fk(t, "user_id", "users", "CASCADE"),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_api_tokens_token_sha256")),
        _ck(t, "token_sha256_hex", "length(token_sha256) = 64"),
    )
    _ix(t, "user_id")
    t = "learner_owners"
    op.create_table(
        t,
        sa.Column("learner_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("bundle_size_bytes", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("learner_id", name=op.f("pk_learner_owners")),
        _fk(t, "learner_id", "learners", "CASCADE"),
        _fk(t, "user_id", "users", "RESTRICT"),
        _ck(t, "bundle_size_bytes_non_negative", "bundle_size_bytes IS NULL OR bundle_size_bytes >= 0"),
    )
    _ix(t, "user_id")
    t = "scheduled_submissions"
    op.create_table(
        t,
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("active_lease_id", sa.Integer(), nullable=True),
        _ts("next_launch_at"),
        _ts("last_launch_at"),
        _ts("cancel_requested_at"),
        _ts("created_at", now=True),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_scheduled_submissions")),
        _fk(t, "submission_id", "submissions", "CASCADE"),
        _fk(t, "user_id", "users", "RESTRICT"),
    )
    _ix(t, "next_launch_at")
    _ix(t, "user_id")
    t = "task_leases"
    op.create_table(
        t,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("task_order", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("job_id", sa.String(200), nullable=True),
        _ts("heartbeat_at", required=True),
        _ts("deadline_at", required=True),
        _ts("started_at"),
        _ts("finished_at"),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("created_at", now=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_leases")),
        _fk(t, "submission_id", "submissions", "CASCADE"),
        sa.UniqueConstraint(
            "submission_id", "task_order", "attempt", name=op.f("uq_task_leases_submission_id_task_order_attempt")
        ),
        _ck(
            t, "status", "status IN ('launching', 'launched', 'running', 'succeeded', 'failed', 'expired', 'cancelled')"
        ),
        _ck(t, "task_order_positive", "task_order >= 1"),
        _ck(t, "attempt_positive", "attempt >= 1"),
        _ck(t, "backend", BACKENDS),
    )
    _ix(t, "status", "deadline_at")
    op.create_index(
        "uq_task_leases_one_active", t, ["submission_id"], unique=True, sqlite_where=ACTIVE, postgresql_where=ACTIVE
    )
    t = "idempotency_keys"
    op.create_table(
        t,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(100), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("request_sha256", sa.String(64), nullable=False),
        sa.Column("resource_id", sa.Integer(), nullable=False),
        _ts("created_at", now=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        _fk(t, "user_id", "users", "CASCADE"),
        sa.UniqueConstraint("user_id", "scope", "key", name=op.f("uq_idempotency_keys_user_id_scope_key")),
        _ck(t, "request_sha256_hex", "length(request_sha256) = 64"),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_index("uq_task_leases_one_active", table_name="task_leases")
    op.drop_index(op.f("ix_task_leases_status_deadline_at"), table_name="task_leases")
    op.drop_table("task_leases")
    op.drop_index(op.f("ix_scheduled_submissions_user_id"), table_name="scheduled_submissions")
    op.drop_index(op.f("ix_scheduled_submissions_next_launch_at"), table_name="scheduled_submissions")
    op.drop_table("scheduled_submissions")
    op.drop_index(op.f("ix_learner_owners_user_id"), table_name="learner_owners")
    op.drop_table("learner_owners")
    op.drop_index(op.f("ix_api_tokens_user_id"), table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_table("users")
