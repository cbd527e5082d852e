"""Users carry their own disabled state: ``users.disabled_at``.

Revision ID: 0006
Revises: 0005

Before, a disabled user was marked by a revoked ``api_tokens`` row with the prefix
``disabled``; those markers become ``disabled_at`` (their revocation time) and are deleted.
A downgrade writes the markers back, so a disabled user stays disabled either way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MARK = "disabled"
_users = sa.table("users", sa.column("id", sa.Integer()), sa.column("disabled_at", sa.DateTime(timezone=True)))
_tokens = sa.table(
    "api_tokens",
    sa.column("id", sa.Integer()),
    sa.column("user_id", sa.Integer()),
    sa.column("label", sa.String()),
    sa.column("token_prefix", sa.String()),
    sa.column("token_sha256", sa.String()),
    sa.column("revoked_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True))
    connection = op.get_bind()
    markers = connection.execute(
        sa.select(_tokens.c.id, _tokens.c.user_id, _tokens.c.revoked_at).where(_tokens.c.token_prefix == MARK)
    ).all()
    for token_id, user_id, revoked_at in markers:
        connection.execute(sa.update(_users).where(_users.c.id == user_id).values(disabled_at=revoked_at))
        connection.execute(sa.delete(_tokens).where(_tokens.c.id == token_id))


def downgrade() -> None:
    connection = op.get_bind()
    for user_id, disabled_at in connection.execute(
        sa.select(_users.c.id, _users.c.disabled_at).where(_users.c.disabled_at.is_not(None))
    ).all():
        discarded = hashlib.sha256(os.urandom(32)).hexdigest()  # a secret nobody holds
        connection.execute(
            sa.insert(_tokens).values(
                user_id=user_id,
                label="account disabled",
                token_prefix=MARK,
                token_sha256=discarded,
                revoked_at=disabled_at,
            )
        )
    with op.batch_alter_table("users") as batch:
        batch.drop_column("disabled_at")
