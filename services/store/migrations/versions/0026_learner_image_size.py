"""The unpacked size of a registered learner image (issue 43).

Revision ID: 0026
Revises: 0025

``learner_owners.image_size_bytes``: the bytes a learner image unpacked to when its registration
checked it (within ``NEVIS_IMAGE_MAX_BYTES``, ``workers/sandbox/images``), as
``bundle_size_bytes`` is a bundle's upload. NULL where nothing read the image: learners
registered before this revision, images as labels (``NEVIS_IMAGE_LEARNERS=installed``), and
digests taken unread by a coordinator without podman (the kuberay backend's kubelet pulls them).
A BIGINT: the default cap is 8 GiB.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | Sequence[str] | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("learner_owners") as batch:
        batch.add_column(sa.Column("image_size_bytes", sa.BigInteger(), nullable=True))
        batch.create_check_constraint(
            op.f("ck_learner_owners_image_size_bytes_non_negative"), "image_size_bytes IS NULL OR image_size_bytes >= 0"
        )


def downgrade() -> None:
    with op.batch_alter_table("learner_owners") as batch:
        batch.drop_constraint(op.f("ck_learner_owners_image_size_bytes_non_negative"), type_="check")
        batch.drop_column("image_size_bytes")
