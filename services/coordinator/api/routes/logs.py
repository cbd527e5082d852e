"""A submission's logs: its learner hosts' output and failures, to its owner and admins only.

Logs hold whatever a learner printed, so they are never public, even for a public submission:
another user gets the 404 an unknown id gets (``crud.get_submission``'s rule), so the answer
does not tell which submissions exist.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from services.coordinator.api.deps import CurrentUser, SessionDep, SettingsDep, StoreDep
from services.coordinator.api.fields import DbCount, DbId
from services.coordinator.api.routes import problems
from services.coordinator.crud import submissions as crud
from services.store.runs.logs import list_logs, read_log

router = APIRouter(prefix="/v1/submissions", tags=["submissions"], responses=problems(401, 422, 503))
TAIL_DEFAULT = 64 * 1024
TAIL_MAX = 16 * 1024 * 1024


class LogOut(BaseModel):
    """One log: a trial's, or an attempt's prediction job's (``trial`` null)."""

    task: int = Field(description="The task's stream order.")
    attempt: int
    trial: int | None = Field(description="The trial's index; null for the attempt's prediction job or prepare_task.")
    kind: Literal["trial", "prediction", "preparation"]
    status: str | None = Field(description="The trial's status (ok, failed, stopped, ...).")
    error: str | None = Field(description="The trial's error, as recorded.")
    size: int | None = Field(
        description="Bytes of log stored; null when none was (the text is then the recorded error and traceback)."
    )
    truncated: bool = Field(description="Whether `text` is only the log's last `tail_bytes`.")
    text: str


class LogPage(BaseModel):
    submission_id: int
    items: list[LogOut]


@router.get(
    "/{submission_id}/logs",
    responses=problems(404),
    summary="The learner hosts' output and tracebacks, per trial and prediction job (owner and admins)",
)
def read_logs(
    submission_id: Annotated[DbId, Path(description="The submission's id.")],
    user: CurrentUser,
    session: SessionDep,
    store: StoreDep,
    settings: SettingsDep,
    task: Annotated[DbCount | None, Query(description="Only this task (by stream order).")] = None,
    trial: Annotated[DbCount | None, Query(description="Only this trial index.")] = None,
    tail_bytes: Annotated[
        int, Query(ge=1, le=TAIL_MAX, description="The most bytes of each log returned: its last ones.")
    ] = TAIL_DEFAULT,
) -> LogPage:
    """Each log is the last bytes its learner host wrote (NEVIS_LOG_RING_BYTES per trial),
    with a failed call's error and traceback at its end."""
    crud.get_submission(session, user=user, submission_id=submission_id)  # owner or admin, else 404
    items = []
    for entry in list_logs(
        session, store, submission_id=submission_id, task=task, trial=trial, retired=settings.retired_stream_versions
    ):
        text, cut = read_log(store, entry, tail_bytes=tail_bytes)
        items.append(
            LogOut(
                task=entry.task,
                attempt=entry.attempt,
                trial=entry.trial,
                kind=entry.kind,
                status=entry.status,
                error=entry.error,
                size=entry.size,
                truncated=cut,
                text=text,
            )
        )
    return LogPage(submission_id=submission_id, items=items)


__all__ = ["LogOut", "LogPage", "read_logs", "router"]
