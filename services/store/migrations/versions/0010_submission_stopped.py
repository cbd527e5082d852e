"""Submissions stopped by their own FLOP or wall-time cap end ``stopped``, not ``failed``.

Revision ID: 0010
Revises: 0009

A run with ``budget.flop_cap`` or ``budget.wall_cap_s`` is stopped once its committed tasks
reach the cap: it did what its owner asked, so it gets a terminal status of its own instead
of ``failed`` with an error beginning ``stopped: ``. The CHECK on ``submissions.status``
gains the value, and the rows stopped before this revision are converted: ``failed`` ones
whose error is ``stopped: <reason>`` (``nevis run``) or ``task N failed after K attempt(s):
stopped: <reason>`` (the coordinator's worker wrapped it) become ``stopped`` with the bare
reason as their error, and a finish time where they had none. The downgrade maps
``stopped`` back to ``failed`` with the ``stopped: `` prefix the older code reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
NEW_STATUSES = ("queued", "running", "succeeded", "failed", "stopped", "cancelled")
PREFIX = "stopped: "
STOPPED_ERROR = re.compile(r"(?:task \d+ failed after \d+ attempts?: )?stopped: (?P<reason>.+)", re.DOTALL)
"""The errors a cap stop left before this revision, with the reason they carry."""

_submissions = sa.table(
    "submissions",
    sa.column("id", sa.Integer()),
    sa.column("status", sa.String()),
    sa.column("error", sa.Text()),
    sa.column("updated_at", sa.DateTime(timezone=True)),
    sa.column("finished_at", sa.DateTime(timezone=True)),
)


def _in(values: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _check(values: tuple[str, ...]) -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_constraint(op.f("ck_submissions_status"), type_="check")
        batch.create_check_constraint(op.f("ck_submissions_status"), _in(values))


def upgrade() -> None:
    _check(NEW_STATUSES)
    connection = op.get_bind()
    s = _submissions.c
    rows = connection.execute(sa.select(s.id, s.error).where(s.status == "failed", s.error.like(f"%{PREFIX}%"))).all()
    for row_id, error in rows:
        found = STOPPED_ERROR.fullmatch(error)
        if found is None:  # "stopped: " inside some other failure's message
            continue
        connection.execute(
            sa.update(_submissions)
            .where(s.id == row_id)
            .values(status="stopped", error=found["reason"], finished_at=sa.func.coalesce(s.finished_at, s.updated_at))
        )


def downgrade() -> None:
    s = _submissions.c
    op.get_bind().execute(
        sa.update(_submissions)
        .where(s.status == "stopped")
        .values(status="failed", error=sa.literal(PREFIX) + sa.func.coalesce(s.error, ""))
    )
    _check(OLD_STATUSES)
