"""The refresh schedule's verified rows: with ``NEVIS_REFRESH_VERIFY_SEEDS`` > 0, a due refresh
pass also queues replays of finished public meta-test submissions never verified
(:mod:`services.coordinator.verify`), owned by the refresh user, as an operator's
``POST /v1/submissions/{id}/verify`` would."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.refresh.plan import refresh_owner
from services.coordinator.verify import queue_replays, unverified
from services.store.db import transaction
from services.store.runs.verification import NotVerifiableError

log = logging.getLogger("nevis.refresh")


def verify_on_schedule(sessions: sessionmaker[Session], settings: CoordinatorSettings) -> list[int]:
    """The refresh schedule's verification (``NEVIS_REFRESH_VERIFY_SEEDS`` > 0): replays of up to
    ``NEVIS_REFRESH_VERIFY_LIMIT`` never-verified finished public meta-test submissions, owned by
    the refresh user; the originals' ids. One that cannot be replayed is logged and skipped."""
    if settings.refresh_verify_seeds < 1:
        return []
    with sessions() as session:
        wanted = unverified(session, limit=settings.refresh_verify_limit)
    done = []
    for submission_id in wanted:
        try:
            with transaction(sessions) as session:
                owner = refresh_owner(session, settings)
                queue_replays(
                    session,
                    settings=settings,
                    submission_id=submission_id,
                    seeds=settings.refresh_verify_seeds,
                    owner=owner,
                )
            done.append(submission_id)
        except NotVerifiableError as exc:
            log.warning("run %d not verified: %s", submission_id, exc)
    if done:
        log.info("replays queued to verify runs %s", done)
    return done


__all__ = ["verify_on_schedule"]
