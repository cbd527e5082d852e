"""The leaderboard snapshot a refresh keeps of its version, taken once its runs have ended.

Why a snapshot: the live leaderboard of a version keeps changing (late submissions, runs on
the next version change which version is "newest"), while a refresh should leave a record of
what the version's board looked like when its references were in. The snapshot is the ranked
rows of the leaderboard as an anonymous reader sees them (public submissions only, so it can
be shown to anyone), at most :data:`SNAPSHOT_ROWS`, stored in ``refreshes.snapshot`` and never
rewritten.

Settling is safe with several replicas: running refreshes are locked ``FOR UPDATE SKIP
LOCKED`` (PostgreSQL), so each is settled by one of them; SQLite serialises writers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.store.db.models import StreamVersion, Submission
from services.store.db.models_refresh import Refresh, RefreshRun
from services.store.db.types import utcnow
from services.store.runs.leaderboard import leaderboard
from services.store.runs.visibility import ANONYMOUS

SNAPSHOT_ROWS = 1000
"""The most rows of one phase a snapshot keeps (``total`` says how many there were)."""
OPEN_STATUSES: tuple[str, ...] = ("queued", "running")


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def take_snapshot(session: Session, *, version: StreamVersion) -> dict[str, Any]:
    """The version's leaderboard now: ``{stream, version, phase, taken_at, total, rows}``, the
    rows ranked as the leaderboard ranks them (its ranked phase), times as ISO 8601 strings."""
    page = leaderboard(session, stream=version.name, version=version.version, limit=SNAPSHOT_ROWS, viewer=ANONYMOUS)
    return {
        "stream": version.name,
        "version": version.version,
        "phase": page.phase,
        "taken_at": utcnow().isoformat(),
        "total": page.total,
        "rows": [{k: _plain(v) for k, v in row.to_dict().items()} for row in page.rows],
    }


def open_runs(session: Session, *, refresh: Refresh) -> int:
    """How many of ``refresh``'s submissions are still queued or running."""
    return (
        session.scalar(
            select(func.count())
            .select_from(RefreshRun)
            .join(Submission, Submission.id == RefreshRun.submission_id)
            .where(RefreshRun.refresh_id == refresh.id, Submission.status.in_(OPEN_STATUSES))
        )
        or 0
    )


def settle_refresh(session: Session, *, refresh: Refresh) -> bool:
    """Finish ``refresh`` with its snapshot if none of its runs is open; whether it did."""
    if refresh.status != "running" or open_runs(session, refresh=refresh):
        return False
    version = session.get(StreamVersion, refresh.stream_version_id)
    refresh.snapshot = take_snapshot(session, version=version)
    refresh.status, refresh.finished_at = "finished", utcnow()
    session.flush()
    return True


def settle_refreshes(session: Session) -> list[int]:
    """Settle every running refresh whose runs have all ended; the ids it finished."""
    running = session.scalars(
        select(Refresh).where(Refresh.status == "running").order_by(Refresh.id).with_for_update(skip_locked=True)
    ).all()
    return [r.id for r in running if settle_refresh(session, refresh=r)]


__all__ = ["OPEN_STATUSES", "SNAPSHOT_ROWS", "open_runs", "settle_refresh", "settle_refreshes", "take_snapshot"]
