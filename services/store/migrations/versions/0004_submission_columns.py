"""Submissions keep their stored image size as a column; lease backends are any registered name.

Revision ID: 0004
Revises: 0003

``submissions.image_size`` was a key inside the budget JSON, next to ``stream_ref`` (the
manifest's file, read again by every task). The stream version row already holds the
manifest a submission was created with, so ``stream_ref`` goes, and ``image_size`` becomes a
real column (backfilled from the budget, 64 where a row lacks it). ``task_leases.backend``
loses its CHECK: backends come from a registry, and adding one must not need a migration.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_KEYS = ("image_size", "stream_ref")
DEFAULT_SIZE = 64
SIZE_CHECK = "image_size >= 8 AND image_size <= 512"
BACKENDS = "backend IN ('local', 'ray', 'kuberay')"

_submissions = sa.table(
    "submissions",
    sa.column("id", sa.Integer()),
    sa.column("budget", sa.JSON()),
    sa.column("image_size", sa.Integer()),
    sa.column("stream_version_id", sa.Integer()),
)
_versions = sa.table("stream_versions", sa.column("id", sa.Integer()), sa.column("name", sa.String()))


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("image_size", sa.Integer(), nullable=True))
    connection = op.get_bind()
    for row_id, budget in connection.execute(sa.select(_submissions.c.id, _submissions.c.budget)).all():
        budget = dict(budget or {})
        size = int(budget.get("image_size") or DEFAULT_SIZE)
        kept = {k: v for k, v in budget.items() if k not in RUN_KEYS}
        connection.execute(
            sa.update(_submissions).where(_submissions.c.id == row_id).values(image_size=size, budget=kept)
        )
    with op.batch_alter_table("submissions") as batch:
        batch.alter_column("image_size", existing_type=sa.Integer(), nullable=False)
        batch.create_check_constraint(op.f("ck_submissions_image_size_range"), SIZE_CHECK)
    with op.batch_alter_table("task_leases") as batch:
        batch.drop_constraint(op.f("ck_task_leases_backend"), type_="check")


def downgrade() -> None:
    with op.batch_alter_table("task_leases") as batch:
        batch.create_check_constraint(op.f("ck_task_leases_backend"), BACKENDS)
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_submissions.c.id, _submissions.c.budget, _submissions.c.image_size, _versions.c.name).join(
            _versions, _versions.c.id == _submissions.c.stream_version_id
        )
    ).all()
    for row_id, budget, size, stream in rows:  # a stream given as a file comes back by name only
        connection.execute(
            sa.update(_submissions)
            .where(_submissions.c.id == row_id)
            .values(budget={**dict(budget or {}), "image_size": size, "stream_ref": stream})
        )
    with op.batch_alter_table("submissions") as batch:
        batch.drop_constraint(op.f("ck_submissions_image_size_range"), type_="check")
        batch.drop_column("image_size")
