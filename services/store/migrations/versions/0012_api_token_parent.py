"""API tokens remember the token that minted them: ``api_tokens.parent_token_id``.

Revision ID: 0012
Revises: 0011

A token minted through the API (``POST /v1/tokens``, ``POST /v1/users/{name}/tokens``) points
at the token of the request that minted it, so that revoking a token can revoke every token
minted from it, down the chain. Nullable: CLI tokens have no parent, and tokens minted before
this revision keep NULL (their lineage was never recorded, so it is not guessed). Deleting a
token (its user deleted) leaves its children without a parent rather than deleting them.
Indexed: the revocation walks the tree by parent.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FOREIGN_KEY = "fk_api_tokens_parent_token_id_api_tokens"
INDEX = "ix_api_tokens_parent_token_id"


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("parent_token_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(op.f(FOREIGN_KEY), "api_tokens", ["parent_token_id"], ["id"], ondelete="SET NULL")
        batch.create_index(op.f(INDEX), ["parent_token_id"])


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_index(op.f(INDEX))
        batch.drop_constraint(op.f(FOREIGN_KEY), type_="foreignkey")
        batch.drop_column("parent_token_id")
