"""Secrets a deployment generates once and every harness process reads (revision ``0023``).

Why a table: a per-deployment secret must be the same on every node (each worker prepares
the data it reads), and the database is what every harness process shares and no learner
process reaches. Imported at the end of :mod:`services.store.db.models`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from services.store.db.base import Base, created_column


# One named secret (e.g. "split_salt"), written once, never shown by any API.
class DeploymentSecret(Base):
    __tablename__ = "deployment_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = created_column()


__all__ = ["DeploymentSecret"]
