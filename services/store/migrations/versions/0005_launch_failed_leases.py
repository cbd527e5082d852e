"""Leases the backend could not launch end ``launch_failed`` and are no attempt of the task.

Revision ID: 0005
Revises: 0004

A backend outage (its launch call raising) must not spend a task's attempts: such a lease
ends with the new status ``launch_failed``, keeps the attempt number the launch would
have had, and the next launch takes that number again. So the CHECK on
``task_leases.status`` gains the value, and the unique ``(submission_id, task_order,
attempt)`` constraint becomes a unique index over the leases that are attempts
(``status <> 'launch_failed'``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = ("launching", "launched", "running", "succeeded", "failed", "expired", "cancelled")
NEW_STATUSES = (*OLD_STATUSES, "launch_failed")
ATTEMPTS = sa.text("status <> 'launch_failed'")
COLUMNS = ["submission_id", "task_order", "attempt"]


def _in(values: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    with op.batch_alter_table("task_leases") as batch:
        batch.drop_constraint(op.f("ck_task_leases_status"), type_="check")
        batch.create_check_constraint(op.f("ck_task_leases_status"), _in(NEW_STATUSES))
        batch.drop_constraint(op.f("uq_task_leases_submission_id_task_order_attempt"), type_="unique")
    op.create_index(
        "uq_task_leases_attempt", "task_leases", COLUMNS, unique=True, sqlite_where=ATTEMPTS, postgresql_where=ATTEMPTS
    )


def downgrade() -> None:
    # Launch failures were never attempts; without the status there is no room for them.
    op.execute("DELETE FROM task_leases WHERE status = 'launch_failed'")
    op.drop_index("uq_task_leases_attempt", table_name="task_leases")
    with op.batch_alter_table("task_leases") as batch:
        batch.create_unique_constraint(op.f("uq_task_leases_submission_id_task_order_attempt"), COLUMNS)
        batch.drop_constraint(op.f("ck_task_leases_status"), type_="check")
        batch.create_check_constraint(op.f("ck_task_leases_status"), _in(OLD_STATUSES))
