"""Admin routes of benchmark refreshes: start one for a stream, list them, read one's snapshot.

A refresh re-runs the baselines and the pinned submissions on a stream's current version
(:mod:`services.coordinator.refresh`). Starting is idempotent: a stream whose current version
was refreshed before answers 200 with that refresh and queues nothing; a new one is a 201.
The schedule (``NEVIS_REFRESH_CRON``), ``nevis refresh run`` and the chart's CronJob start
them the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, status
from pydantic import BaseModel, Field, StringConstraints
from sqlalchemy.orm import Session

from services.coordinator.api.deps import AdminUser, Limit, Offset, SessionDep, SettingsDep
from services.coordinator.api.fields import NAME_PATTERN, STREAM_MAX, DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.schemas import Page, Request
from services.coordinator.common.client_errors import NotFoundError
from services.coordinator.refresh.start import list_refreshes, run_statuses, start_refresh
from services.store.db.models_refresh import Refresh

router = APIRouter(prefix="/v1/admin/refreshes", tags=["refreshes"], responses=problems(401, 403, 422, 503))
RefreshId = Annotated[DbId, Path(description="The refresh's id.")]
StreamName = Annotated[str, StringConstraints(max_length=STREAM_MAX)]


class RefreshCreate(Request):
    stream: StreamName = Field(
        examples=["mini"], description="A stream name (GET /v1/streams); its current version is refreshed."
    )


class RefreshRunOut(BaseModel):
    submission_id: int
    kind: str = Field(description="'baseline', or 'pinned' (a copy of source_submission_id).")
    source_submission_id: int | None
    status: str = Field(description="The submission's status.")


class RefreshOut(BaseModel):
    id: int
    stream: str
    version: str
    trigger: str = Field(description="What started it: schedule, admin or cli.")
    status: str = Field(description="running, or finished once every run ended (snapshot taken).")
    requested_by: str | None
    started_at: datetime
    finished_at: datetime | None
    note: str | None = Field(description="Runs the refresh left out, and why.")
    runs: list[RefreshRunOut]


class RefreshDetail(RefreshOut):
    snapshot: dict[str, Any] | None = Field(
        description="The version's leaderboard when the runs had ended: {stream, version, "
        "phase, taken_at, total, rows} (public rows, ranked); null while running."
    )


def refresh_out(session: Session, refresh: Refresh) -> RefreshOut:
    statuses = run_statuses(session, refresh=refresh)
    return RefreshOut(
        id=refresh.id,
        stream=refresh.stream_version.name,
        version=refresh.stream_version.version,
        trigger=refresh.trigger,
        status=refresh.status,
        requested_by=refresh.requested_by,
        started_at=refresh.started_at,
        finished_at=refresh.finished_at,
        note=refresh.note,
        runs=[
            RefreshRunOut(
                submission_id=r.submission_id,
                kind=r.kind,
                source_submission_id=r.source_submission_id,
                status=statuses.get(r.submission_id, "unknown"),
            )
            for r in refresh.runs
        ],
    )


EXISTING = {
    200: {
        "model": RefreshOut,
        "description": ("The stream's current version was refreshed before: that refresh, and nothing new queued."),
    }
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={**EXISTING, **problems(413)},
    summary="Refresh a stream's current version: re-run baselines and pinned submissions (admin)",
)
def create_refresh(
    body: RefreshCreate, admin: AdminUser, session: SessionDep, settings: SettingsDep, response: Response
) -> RefreshOut:
    outcome = start_refresh(session, settings=settings, stream=body.stream, trigger="admin", requested_by=admin.name)
    session.commit()
    if not outcome.created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/admin/refreshes/{outcome.refresh.id}"
    return refresh_out(session, outcome.refresh)


@router.get("", summary="Refreshes, newest first (admin)")
def read_refreshes(
    admin: AdminUser,
    session: SessionDep,
    limit: Limit = 20,
    offset: Offset = 0,
    stream: Annotated[StreamName | None, Query(pattern=NAME_PATTERN, description="Only this stream's.")] = None,
) -> Page[RefreshOut]:
    rows, total = list_refreshes(session, limit=limit, offset=offset, stream=stream)
    return Page[RefreshOut](items=[refresh_out(session, r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/{refresh_id}", responses=problems(404), summary="A refresh with its leaderboard snapshot (admin)")
def read_refresh(refresh_id: RefreshId, admin: AdminUser, session: SessionDep) -> RefreshDetail:
    refresh = session.get(Refresh, refresh_id)
    if refresh is None:
        raise NotFoundError(f"No refresh with id {refresh_id}.", field="refresh_id")
    return RefreshDetail(**refresh_out(session, refresh).model_dump(), snapshot=refresh.snapshot)


__all__ = [
    "RefreshCreate",
    "RefreshDetail",
    "RefreshOut",
    "RefreshRunOut",
    "create_refresh",
    "read_refresh",
    "read_refreshes",
    "refresh_out",
    "router",
]
