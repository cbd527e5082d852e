"""Where a submission's learner code is public.

Revision ID: 0018
Revises: 0017

``submissions.code_url``: an https URL its submitter gave (``nevis submit --code-url``, the
API's ``code_url``), checked at the API's edge; NULL when none was given, as for every
submission made before this revision. The leaderboard marks the runs of learners whose code
is not public: a NULL here, unless the learner is a built-in baseline (its code is this
repository).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("code_url", sa.String(500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("code_url")
