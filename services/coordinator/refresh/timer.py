"""The scheduler's refresh hook: settle finished refreshes every pass, start due ones on the cron.

Each scheduler pass calls :meth:`RefreshTimer.tick`. It settles running refreshes whose runs
have ended (their snapshots), and, when ``NEVIS_REFRESH_CRON`` is set and a fire time has
passed since this process last looked, refreshes the pending streams
(:func:`~services.coordinator.refresh.start.run_refreshes`, trigger ``schedule``). The first
pass of a process counts as due, so a fire missed while no coordinator ran is caught up at
start. Each pass also settles verification verdicts whose replays ended, and a due pass queues the
schedule's replays (``NEVIS_REFRESH_VERIFY_SEEDS``, :mod:`services.coordinator.verify`). Every replica looks at each fire; the refresh lock and the unique row per version let
exactly one of them start a given refresh, and the others find it done.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.refresh.snapshot import settle_refreshes
from services.coordinator.refresh.start import RefreshReport, run_refreshes
from services.coordinator.refresh.verify_schedule import verify_on_schedule
from services.coordinator.verify import settle_verdicts
from services.store.db import transaction
from services.store.db.models_refresh import Refresh
from services.store.db.types import utcnow
from services.store.objects import open_store


class RefreshTimer:
    """When this process last looked for due refreshes, and the pass that looks."""

    def __init__(self, settings: CoordinatorSettings, sessions: sessionmaker[Session]) -> None:
        self.settings = settings
        self.sessions = sessions
        self.schedule = settings.refresh_schedule
        self.last_run: datetime | None = None
        # verdicts read the interval their original's row keeps; the store computes a missing one
        self.store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)

    def due(self, now: datetime) -> bool:
        """Whether a refresh pass is due at ``now`` (never, without NEVIS_REFRESH_CRON)."""
        return self.schedule is not None and self.schedule.due(now, self.last_run)

    def settle(self) -> list[int]:
        """Snapshot and finish running refreshes whose runs have ended; their ids."""
        with self.sessions() as session:
            running = session.scalar(select(Refresh.id).where(Refresh.status == "running").limit(1))
        if running is None:
            return []  # the common case: no writer transaction at all
        with transaction(self.sessions) as session:
            return settle_refreshes(session)

    def tick(self, now: datetime | None = None) -> RefreshReport | None:
        """One pass: settle (refreshes, and verdicts whose replays ended), then refresh if due
        (and queue the schedule's replays, NEVIS_REFRESH_VERIFY_SEEDS); the refresh's report, or None."""
        now = now or utcnow()
        self.settle()
        settle_verdicts(self.sessions, self.store)
        if not self.due(now):
            return None
        self.last_run = now
        report = run_refreshes(self.sessions, settings=self.settings, trigger="schedule")
        verify_on_schedule(self.sessions, self.settings)
        return report


__all__ = ["RefreshTimer"]
