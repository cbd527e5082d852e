"""Sessions on the coordinator's database for the admin commands (users, tokens, refreshes):
the schema checked at the current revision first, so a command never writes to an old one."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.common.config import get_coordinator_settings


def coordinator_sessions() -> sessionmaker[Session]:
    """A session factory on ``NEVIS_DATABASE_URL``, after checking its schema is current."""
    from services.store.db import ensure_current, sessions_on  # noqa: PLC0415 - imported when the command runs (fast start)

    url = get_coordinator_settings().database_url
    ensure_current(url)
    return sessions_on(url)


__all__ = ["coordinator_sessions"]
