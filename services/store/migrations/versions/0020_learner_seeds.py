"""Each learner's seeds on a stream version, kept as runs finish.

Revision ID: 0020
Revises: 0019

``learner_seeds``: per (stream version, learner), the E and creation time of every finished
public meta-test run of the learner there, by submission id, rewritten in the transaction that finishes one
(``services.store.runs.board_summaries.keep_seeds``), so a leaderboard render reads each page
learner's spread over seeds from one row instead of every run's summary. Back-filled here by the
same function.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "learner_seeds",
        sa.Column("stream_version_id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.Integer(), nullable=False),
        sa.Column("errors", _JSON, nullable=False),
        sa.Column("created", _JSON, nullable=False),
        sa.PrimaryKeyConstraint("stream_version_id", "learner_id", name=op.f("pk_learner_seeds")),
        sa.ForeignKeyConstraint(
            ["stream_version_id"],
            ["stream_versions.id"],
            name=op.f("fk_learner_seeds_stream_version_id_stream_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name=op.f("fk_learner_seeds_learner_id_learners"), ondelete="CASCADE"
        ),
    )
    # The back-fill reads through today's ORM code, so it runs once the schema is at head
    # (migrations/env.py), where that code matches the tables it reads.
    op.get_context().config.attributes.setdefault("deferred_backfills", []).append(_backfill)


def _backfill(connection: sa.Connection) -> None:
    """The rows the commits would have written, from the results stored before this revision."""
    from sqlalchemy.orm import Session

    from services.store.runs.board_summaries import finished_runs, keep_seeds

    session = Session(bind=connection)
    ids = [i for (i,) in connection.execute(sa.text("SELECT DISTINCT submission_id FROM task_results ORDER BY 1"))]
    runs: set[tuple[int, int]] = set()
    for start in range(0, len(ids), 500):
        runs |= finished_runs(session, submission_ids=ids[start : start + 500])
    for version_id, learner_id in sorted(runs):
        keep_seeds(session, stream_version_id=version_id, learner_id=learner_id)
    session.flush()


def downgrade() -> None:
    op.drop_table("learner_seeds")
