"""The split salt a deployment uses: the configured one, or in production one made once.

Why: a production deployment left without ``NEVIS_SPLIT_SALT`` would otherwise serve the
public splits, whose test rows any submitter can compute (docs/isolation.md, "Public data").
So under ``NEVIS_ENVIRONMENT=production`` an empty setting means "this deployment's own":
the first harness process that prepares data draws 32 random bytes and stores them in
``deployment_secrets``, and every later one, on any node, reads the same. A configured salt
always wins; outside production an empty one stays empty (the public splits).
"""

from __future__ import annotations

import os
import secrets

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from services.store.db.models_secrets import DeploymentSecret

NAME = "split_salt"


def split_salt(sessions: sessionmaker[Session], configured: str, environment: str | None = None) -> str:
    """The salt to split with: ``configured``, else (production only) the deployment's own."""
    if configured:
        return configured
    environment = environment or os.environ.get("NEVIS_ENVIRONMENT", "development").strip()
    if environment != "production":
        return ""
    with sessions() as session:
        found = session.get(DeploymentSecret, NAME)
        if found is not None:
            return found.value
        session.add(DeploymentSecret(name=NAME, value=secrets.token_hex(32)))
        try:
            session.commit()
        except IntegrityError:  # another process made it first: use theirs
            session.rollback()
    with sessions() as session:
        return session.get(DeploymentSecret, NAME).value


__all__ = ["NAME", "split_salt"]
