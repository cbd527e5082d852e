"""The rest of a leaderboard row, kept per submission as results commit.

Revision ID: 0019
Revises: 0018

``submission_intervals``: a submission's committed headline attempts (which name its E
interval) and that interval once the run's end computed it; ``submission_profiles``: the
performance-profile scores of every finished public meta-test submission of a stream version,
and the error curves of the best few. Both are rewritten in the transaction that commits a
result (``services.store.runs.board_summaries``), so a leaderboard render reads them instead
of computing each row's interval key and every row's profile score. Back-filled here by the
same functions (an interval computed before stays in the object store, where a render still
finds it); deleting a submission deletes its rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "submission_intervals",
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("attempts", _JSON, nullable=False),
        sa.Column("interval", _JSON, nullable=True),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_submission_intervals")),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_submission_intervals_submission_id_submissions"),
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "submission_profiles",
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("error_score", sa.Double(), nullable=False),
        sa.Column("cflop_score", sa.Double(), nullable=True),
        sa.Column("error_curve", _JSON, nullable=True),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_submission_profiles")),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_submission_profiles_submission_id_submissions"),
            ondelete="CASCADE",
        ),
    )
    # The back-fill reads through today's ORM code, so it runs once the schema is at head
    # (migrations/env.py), where that code matches the tables it reads.
    op.get_context().config.attributes.setdefault("deferred_backfills", []).append(_backfill)


def _backfill(connection: sa.Connection) -> None:
    """The rows the commits would have written, from the results stored before this revision."""
    from sqlalchemy.orm import Session

    from services.store.runs.board_summaries import finished_runs, keep_attempts, keep_profiles

    session = Session(bind=connection)
    ids = [i for (i,) in connection.execute(sa.text("SELECT DISTINCT submission_id FROM task_results ORDER BY 1"))]
    versions: set[int] = set()
    for start in range(0, len(ids), 500):
        keep_attempts(session, submission_ids=ids[start : start + 500])
        versions |= {v for v, _ in finished_runs(session, submission_ids=ids[start : start + 500])}
    for version_id in sorted(versions):
        keep_profiles(session, stream_version_id=version_id)
    session.flush()


def downgrade() -> None:
    op.drop_table("submission_profiles")
    op.drop_table("submission_intervals")
