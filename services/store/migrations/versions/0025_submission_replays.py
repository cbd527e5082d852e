"""Verified rows: replays of a finished public submission and the mark they earn it.

Revision ID: 0025
Revises: 0024

``submission_replays``: each replay submission → the original it replays (same learner row,
new seed), with the seed and the learner digest both ran; ``submission_verdicts``: the
original's mark (pending, verified, not_reproduced, inconclusive), the interval it was judged
by and the replays' E (``services.store.runs.verification``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_NOW = sa.text("CURRENT_TIMESTAMP")


def upgrade() -> None:
    op.create_table(
        "submission_replays",
        sa.Column("replay_id", sa.Integer(), nullable=False),
        sa.Column("original_id", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("learner_digest", sa.String(500), nullable=False),
        sa.Column("requested_by", sa.String(100), nullable=True),
        sa.Column("request", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.PrimaryKeyConstraint("replay_id", name=op.f("pk_submission_replays")),
        sa.ForeignKeyConstraint(
            ["replay_id"],
            ["submissions.id"],
            name=op.f("fk_submission_replays_replay_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["original_id"],
            ["submissions.id"],
            name=op.f("fk_submission_replays_original_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("replay_id <> original_id", name=op.f("ck_submission_replays_not_itself")),
    )
    op.create_index(op.f("ix_submission_replays_original_id"), "submission_replays", ["original_id"])
    op.create_table(
        "submission_verdicts",
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("low", sa.Double(), nullable=True),
        sa.Column("high", sa.Double(), nullable=True),
        sa.Column("level", sa.Double(), nullable=True),
        sa.Column("replays", _JSON, nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("request", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_submission_verdicts")),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_submission_verdicts_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            "verdict IN ('pending', 'verified', 'not_reproduced', 'inconclusive')",
            name=op.f("ck_submission_verdicts_verdict"),
        ),
    )
    op.create_index(op.f("ix_submission_verdicts_verdict"), "submission_verdicts", ["verdict"])


def downgrade() -> None:
    op.drop_table("submission_verdicts")
    op.drop_table("submission_replays")
