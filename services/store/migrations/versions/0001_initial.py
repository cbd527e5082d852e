"""Initial schema: streams, datasets, learners, submissions, runs, trials, results, events.

Revision ID: 0001
Revises:
Create Date: 2025-11-30

The allowed values of each CHECK are written out here, not imported, because a migration
is a snapshot: later changes to the Python tuples need their own migration. The events
table is made append-only with triggers (a PL/pgSQL function on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
NOW = sa.text("CURRENT_TIMESTAMP")
KEY = sa.String(1024)
PHASES = ("meta_train", "meta_test")
KINDS = ("single", "multi")


def _pk(table: str) -> list[sa.SchemaItem]:
    return [sa.Column("id", sa.Integer(), nullable=False), sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}"))]


def _ts(name: str, *, now: bool = False) -> sa.Column:
    """A timestamp with time zone; ``now`` ones are required and default to the insert time."""
    return sa.Column(name, sa.DateTime(timezone=True), nullable=not now, server_default=NOW if now else None)


def _ck(table: str, name: str, sql: str) -> sa.CheckConstraint:
    return sa.CheckConstraint(sql, name=op.f(f"ck_{table}_{name}"))


def _one_of(table: str, column: str, values: Sequence[str]) -> sa.CheckConstraint:
    allowed = ", ".join(f"'{v}'" for v in values)
    return _ck(table, column, f"{column} IN ({allowed})")


def _non_negative(table: str, *columns: str) -> list[sa.CheckConstraint]:
    return [_ck(table, f"{c}_non_negative", f"{c} >= 0") for c in columns]


def _sha256(table: str, column: str) -> sa.CheckConstraint:
    return _ck(table, f"{column}_hex", f"length({column}) = 64")


def _fk(table: str, column: str, target: str, ondelete: str | None = None) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=op.f(f"uq_{table}_{'_'.join(columns)}"))


def _ix(table: str, *columns: str) -> None:
    op.create_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table, list(columns))


def upgrade() -> None:
    t = "stream_versions"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("version", sa.String(50), nullable=False),
        sa.Column("manifest_sha256", sa.String(64), nullable=False),
        sa.Column("manifest", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        _uq(t, "name", "version"),
        _sha256(t, "manifest_sha256"),
    )
    t = "stream_tasks"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("stream_version_id", sa.Integer(), nullable=False),
        sa.Column("order", sa.Integer(), nullable=False),
        sa.Column("year", sa.Integer(), nullable=False),
        sa.Column("dataset", sa.String(200), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("num_classes", sa.Integer(), nullable=True),
        sa.Column("domain", sa.String(100), nullable=True),
        sa.Column("split_rule", JSON_DOC, nullable=False),
        _fk(t, "stream_version_id", "stream_versions", ondelete="CASCADE"),
        _uq(t, "stream_version_id", "order"),
        _ck(t, "order_positive", '"order" >= 1'),
        _one_of(t, "phase", PHASES),
        _one_of(t, "kind", KINDS),
        _ck(t, "num_classes_positive", "num_classes IS NULL OR num_classes >= 1"),
    )
    t = "datasets"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("image_size", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("num_classes", sa.Integer(), nullable=False),
        sa.Column("index_key", KEY, nullable=False),
        sa.Column("index_sha256", sa.String(64), nullable=False),
        sa.Column("split_counts", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        _uq(t, "key", "image_size"),
        _ck(t, "image_size_positive", "image_size >= 1"),
        _one_of(t, "kind", KINDS),
        _ck(t, "num_classes_positive", "num_classes >= 1"),
        _sha256(t, "index_sha256"),
    )
    t = "shards"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(16), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("object_key", KEY, nullable=False),
        sa.Column("num_examples", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        _fk(t, "dataset_id", "datasets", ondelete="CASCADE"),
        _uq(t, "dataset_id", "split", "part"),
        _one_of(t, "split", ("train", "dev", "dev_test", "test")),
        *_non_negative(t, "part", "num_examples", "size_bytes"),
        _sha256(t, "sha256"),
    )
    t = "learners"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("image_ref", sa.String(500), nullable=True),
        sa.Column("entrypoint", sa.String(500), nullable=False),
        sa.Column("bundle_key", KEY, nullable=True),
        sa.Column("bundle_sha256", sa.String(64), nullable=True),
        sa.Column("resources", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        _uq(t, "name"),
        _sha256(t, "bundle_sha256"),
        _ck(
            t,
            "bundle_checksummed",
            "(bundle_key IS NULL AND bundle_sha256 IS NULL) OR (bundle_key IS NOT NULL AND bundle_sha256 IS NOT NULL)",
        ),
    )
    t = "submissions"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("learner_id", sa.Integer(), nullable=False),
        sa.Column("stream_version_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), server_default="queued", nullable=False),
        sa.Column("budget", JSON_DOC, nullable=False),
        sa.Column("cursor", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("created_at", now=True),
        _ts("updated_at", now=True),
        _ts("finished_at"),
        _fk(t, "learner_id", "learners", ondelete="RESTRICT"),
        _fk(t, "stream_version_id", "stream_versions", ondelete="RESTRICT"),
        _one_of(t, "phase", PHASES),
        _one_of(t, "status", ("queued", "running", "succeeded", "failed", "cancelled")),
        _ck(t, "cursor_positive", "cursor >= 1"),
    )
    _ix(t, "learner_id")
    _ix(t, "stream_version_id")
    _ix(t, "status")
    t = "task_runs"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("stream_task_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("status", sa.String(16), server_default="pending", nullable=False),
        _ts("heartbeat_at"),
        _ts("deadline_at"),
        _ts("started_at"),
        _ts("finished_at"),
        sa.Column("flops", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("retried_flops", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("wall_time_s", sa.Double(), nullable=True),
        sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("learner_state_key", KEY, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("created_at", now=True),
        _fk(t, "submission_id", "submissions", ondelete="CASCADE"),
        _fk(t, "stream_task_id", "stream_tasks"),
        _uq(t, "submission_id", "stream_task_id", "attempt"),
        _uq(t, "id", "submission_id", "stream_task_id"),
        _ck(t, "attempt_positive", "attempt >= 1"),
        _one_of(t, "status", ("pending", "running", "succeeded", "failed", "timed_out", "cancelled")),
        *_non_negative(t, "flops", "retried_flops", "wall_time_s", "peak_memory_bytes"),
    )
    _ix(t, "stream_task_id")
    _ix(t, "status", "deadline_at")
    active = sa.text("status IN ('pending', 'running')")
    op.create_index(
        "uq_task_runs_one_active", t, ["submission_id"], unique=True, sqlite_where=active, postgresql_where=active
    )
    t = "trials"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("task_run_id", sa.Integer(), nullable=False),
        sa.Column("trial_index", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("config", JSON_DOC, nullable=False),
        sa.Column("status", sa.String(16), server_default="pending", nullable=False),
        sa.Column("flops", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("flops_source", sa.String(16), server_default="measured", nullable=False),
        sa.Column("dev_error", sa.Double(), nullable=True),
        sa.Column("wall_time_s", sa.Double(), nullable=True),
        sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("error_text", sa.Text(), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        _ts("created_at", now=True),
        _ts("started_at"),
        _ts("finished_at"),
        _fk(t, "task_run_id", "task_runs", ondelete="CASCADE"),
        _uq(t, "task_run_id", "trial_index"),
        _uq(t, "id", "task_run_id"),
        _one_of(t, "status", ("pending", "running", "succeeded", "failed", "stopped", "cancelled")),
        _one_of(t, "flops_source", ("measured", "reported")),
        _ck(t, "dev_error_range", "dev_error IS NULL OR (dev_error >= 0 AND dev_error <= 1)"),
        *_non_negative(t, "trial_index", "flops", "wall_time_s", "peak_memory_bytes"),
    )
    t = "checkpoints"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("object_key", KEY, nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        _ts("created_at", now=True),
        _fk(t, "trial_id", "trials", ondelete="CASCADE"),
        _uq(t, "trial_id", "step"),
        *_non_negative(t, "step", "size_bytes"),
        _sha256(t, "sha256"),
    )
    t = "task_results"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("stream_task_id", sa.Integer(), nullable=False),
        sa.Column("task_run_id", sa.Integer(), nullable=False),
        sa.Column("best_trial_id", sa.Integer(), nullable=False),
        sa.Column("error", sa.Double(), nullable=False),
        sa.Column("split", sa.String(16), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("flops", sa.Double(), nullable=False),
        _ts("committed_at", now=True),
        _fk(t, "submission_id", "submissions", ondelete="CASCADE"),
        _fk(t, "stream_task_id", "stream_tasks"),
        sa.ForeignKeyConstraint(
            ["task_run_id", "submission_id", "stream_task_id"],
            ["task_runs.id", "task_runs.submission_id", "task_runs.stream_task_id"],
            name=op.f("fk_task_results_task_run"),
        ),
        sa.ForeignKeyConstraint(
            ["best_trial_id", "task_run_id"],
            ["trials.id", "trials.task_run_id"],
            name=op.f("fk_task_results_best_trial"),
        ),
        _uq(t, "submission_id", "stream_task_id"),
        _uq(t, "task_run_id"),
        _ck(t, "error_range", "error >= 0 AND error <= 1"),
        _one_of(t, "split", ("test", "dev_test")),
        _one_of(t, "metric", ("accuracy", "map")),
        *_non_negative(t, "flops"),
    )
    _ix(t, "stream_task_id")
    _ix(t, "best_trial_id")
    t = "events"
    op.create_table(
        t,
        *_pk(t),
        sa.Column("submission_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("payload", JSON_DOC, nullable=False),
        _ts("created_at", now=True),
        _fk(t, "submission_id", "submissions"),
    )
    _ix(t, "submission_id", "id")
    _ix(t, "kind")
    _create_append_only_triggers()


def downgrade() -> None:
    _drop_append_only_triggers()
    for table in (
        "events",
        "task_results",
        "checkpoints",
        "trials",
        "task_runs",
        "submissions",
        "learners",
        "shards",
        "datasets",
        "stream_tasks",
        "stream_versions",
    ):
        op.drop_table(table)


def _create_append_only_triggers() -> None:
    """Make UPDATE, DELETE (and TRUNCATE on PostgreSQL) of events raise."""
    if op.get_context().dialect.name == "postgresql":
        op.execute(
            """
            CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION 'events is append-only: % is not allowed', TG_OP
                    USING ERRCODE = 'restrict_violation';
            END;
            $$
            """
        )
        op.execute(
            "CREATE TRIGGER events_append_only_rows BEFORE UPDATE OR DELETE ON events "
            "FOR EACH ROW EXECUTE FUNCTION events_append_only()"
        )
        op.execute(
            "CREATE TRIGGER events_append_only_truncate BEFORE TRUNCATE ON events "
            "FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()"
        )
        return
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER events_append_only_{action.lower()} BEFORE {action} ON events "
            f"BEGIN SELECT RAISE(ABORT, 'events is append-only: {action} is not allowed'); END"
        )


def _drop_append_only_triggers() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP TRIGGER events_append_only_truncate ON events")
        op.execute("DROP TRIGGER events_append_only_rows ON events")
        op.execute("DROP FUNCTION events_append_only()")
        return
    for action in ("update", "delete"):
        op.execute(f"DROP TRIGGER events_append_only_{action}")
