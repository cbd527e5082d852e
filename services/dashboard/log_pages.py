"""The dashboard's view of a submission's logs: for its owner and admins, never anyone else.

Pages are otherwise shared between readers who see the same rows (the cached pages of
:mod:`services.dashboard.pages`), but logs hold whatever a learner printed, so they are read
per request and only for a request whose API token (``Authorization: Bearer``) is the
submission owner's or an admin's, by the rule ``GET /v1/submissions/{id}/logs`` applies
(``crud.get_submission``); to anyone else the logs page is the 404 of an unknown id, and
the submission page shows no logs section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.templating import Jinja2Templates

from services.coordinator.api.deps import bearer
from services.coordinator.api.fields import DbCount, DbId
from services.coordinator.crud import submissions as crud
from services.coordinator.crud import users as crud_users
from services.core.errors import NevisError
from services.store.runs.logs import LogEntry, list_logs, read_log

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
PAGE_TAIL_BYTES = 256 * 1024
PRIVATE = {"Cache-Control": "private, no-cache", "Vary": "Authorization"}  # as every reader-own page


def owners_logs(
    request: Request, secret: str, submission_id: int, *, task: int | None = None, trial: int | None = None
) -> list[LogEntry] | None:
    """The submission's logs if ``secret`` is its owner's or an admin's token; else None."""
    with request.app.state.sessions() as session:
        try:
            user = crud_users.authenticate(session, secret=secret)
            crud.get_submission(session, user=user, submission_id=submission_id)
        except NevisError:
            return None
        return list_logs(
            session,
            request.app.state.store,
            submission_id=submission_id,
            task=task,
            trial=trial,
            retired=request.app.state.settings.retired_stream_versions,
        )


async def log_owner(
    request: Request, submission_id: DbId, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> list[LogEntry] | None:
    """For the submission page: its logs when the reader owns it (or is an admin), else None."""
    if credentials is None:
        return None
    return await run_in_threadpool(owners_logs, request, credentials.credentials, submission_id)


@router.get("/submissions/{submission_id}/logs", response_class=HTMLResponse)
async def logs_page(
    request: Request,
    submission_id: DbId,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    task: Annotated[DbCount | None, Query()] = None,
    trial: Annotated[DbCount | None, Query()] = None,
) -> HTMLResponse:
    """A submission's logs (one task's, one trial's) in full: the learner's output and tracebacks."""
    entries = (
        None
        if credentials is None
        else await run_in_threadpool(
            owners_logs, request, credentials.credentials, submission_id, task=task, trial=trial
        )
    )
    if entries is None:
        message = f"No submission with id {submission_id} whose logs you may read (its owner and admins only)."
        return HTMLResponse(_render("error.html", title="Not found", message=message), status_code=404, headers=PRIVATE)
    store = request.app.state.store
    logs = [(entry, *read_log(store, entry, tail_bytes=PAGE_TAIL_BYTES)) for entry in entries]
    html = _render(
        "logs.html",
        title=f"Logs of submission #{submission_id}",
        submission_id=submission_id,
        logs=logs,
        task=task,
        trial=trial,
    )
    return HTMLResponse(html, headers=PRIVATE)


def _render(template: str, **context: object) -> str:
    return templates.get_template(template).render(**context)


__all__ = ["PRIVATE", "log_owner", "logs_page", "owners_logs", "router"]
