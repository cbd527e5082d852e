"""The dashboard's pages of one submission: its page (with its interval and transfer sections), its
tasks as CSV and JSON, its transfer report as JSON, and its probes page and JSON.

A private submission's pages are a 404 to everyone who may not read it, worded as for an id that
does not exist; its owner (and admins) also get its logs (:mod:`services.dashboard.log_pages`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.orm import Session

from services.coordinator.api.deps import SessionDep, StoreDep
from services.coordinator.api.fields import DbId
from services.coordinator.api.routes.leaderboard import Reader
from services.core.errors import NevisError, UnknownNameError
from services.core.metric_specs import PROXIES
from services.dashboard import figures
from services.dashboard.log_pages import PRIVATE, log_owner
from services.dashboard.page_kit import cached_page, csv_download, html_page, render_page
from services.dashboard.transfer_views import transfer_view
from services.dashboard.uncertainty_views import interval_of
from services.dashboard.views import TASK_COLUMNS, submission_tasks, submission_view, to_csv
from services.store.probes.report import load_probe_report
from services.store.runs.logs import LogEntry
from services.store.runs.transfer import transfer_report
from services.store.runs.verdicts import verification_of
from services.store.runs.visibility import ANONYMOUS, Viewer, check_readable

router = APIRouter(include_in_schema=False)


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
async def submission_page(
    request: Request, viewer: Reader, submission_id: DbId, logs: Annotated[list[LogEntry] | None, Depends(log_owner)]
) -> HTMLResponse:
    """The submission's page; its owner (and admins) also get its logs, on a page of their own
    that is never cached or shared (:mod:`services.dashboard.log_pages`)."""

    def render(session: Session) -> tuple[int, str]:
        try:
            check_readable(session, viewer, [submission_id])
            view = submission_view(session, submission_id)
        except UnknownNameError as exc:
            return 404, render_page("error.html", title="Not found", message=str(exc))
        return 200, render_page(
            "submission.html",
            title=f"Submission #{submission_id}",
            view=view,
            columns=TASK_COLUMNS,
            logs=logs,
            interval=interval_of(session, request.app.state.store, view.summary),
            transfer=transfer_view(session, request.app.state.store, submission_id, view.summary),
            verification=verification_of(session, submission_id=submission_id),
        )

    if logs is not None:
        with request.app.state.sessions() as session:
            status, html = await run_in_threadpool(render, session)
        return HTMLResponse(html, status_code=status, headers=PRIVATE)
    return await cached_page(request, ("submission-page", submission_id), viewer, render)


@router.get("/submissions/{submission_id}/tasks.csv")
def submission_csv(session: SessionDep, viewer: Reader, submission_id: DbId) -> Response:
    rows = _tasks_or_404(session, submission_id, viewer)
    if isinstance(rows, Response):
        return rows
    return csv_download(to_csv(rows, TASK_COLUMNS), f"submission-{submission_id}-tasks.csv")


@router.get("/submissions/{submission_id}/tasks.json")
def submission_json(session: SessionDep, viewer: Reader, submission_id: DbId) -> Response:
    rows = _tasks_or_404(session, submission_id, viewer)
    if isinstance(rows, Response):
        return rows
    return JSONResponse(
        {"submission_id": submission_id, "tasks": rows},
        headers={"Cache-Control": "no-cache" if viewer == ANONYMOUS else "private, no-cache"},
    )


@router.get("/submissions/{submission_id}/transfer.json")
def transfer_json(session: SessionDep, store: StoreDep, viewer: Reader, submission_id: DbId) -> Response:
    """The page's Transfer section as JSON: what ``nevis results --json`` prints as ``transfer``."""
    try:
        check_readable(session, viewer, [submission_id])
        report = transfer_report(session, store, submission_id=submission_id)
    except UnknownNameError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=404)
    return JSONResponse(
        {"submission_id": submission_id, **report.to_dict()},
        headers={"Cache-Control": "no-cache" if viewer == ANONYMOUS else "private, no-cache"},
    )


@router.get("/submissions/{submission_id}/probes", response_class=HTMLResponse)
def probes_page(session: SessionDep, viewer: Reader, submission_id: DbId) -> HTMLResponse:
    try:
        check_readable(session, viewer, [submission_id])
        report = load_probe_report(session, submission_id=submission_id)
    except NevisError as exc:
        return html_page("error.html", 404, title="Not found", message=str(exc))
    curves: dict[str, list[tuple[str, list[int], list[float | None]]]] = {"ofm": [], "sm3": []}
    for row in report.mismatch:
        if row.best_trial and isinstance(row.curves, dict) and row.curves.get("scored_steps"):
            name = f"task {row.task_order} → {row.target_order} {row.probe_kind}"
            for key in curves:
                curves[key].append((name, row.curves["scored_steps"], row.curves.get(key) or []))
    ranks: list[tuple[str, list[int], list[float | None]]] = []
    for metric in (*PROXIES, "linear_accuracy"):
        for order in sorted({c.task_order for c in report.checkpoints}):
            points = sorted(
                (c.step, getattr(c, metric)) for c in report.checkpoints if c.task_order == order and c.best_trial
            )
            if points:
                ranks.append((f"{metric} task {order}", [p[0] for p in points], [p[1] for p in points]))
    charts = {
        "ofm": figures.probe_curves(curves["ofm"], title="OFM curves (best trial)", y_title="OFM")
        if curves["ofm"]
        else None,
        "sm3": figures.probe_curves(curves["sm3"], title="SM3 curves (best trial)", y_title="SM3")
        if curves["sm3"]
        else None,
        "ranks": figures.probe_curves(
            ranks, title="LiDAR, RankMe and linear-probe accuracy per checkpoint", y_title="value"
        )
        if ranks
        else None,
    }
    return html_page(
        "probes.html",
        title=f"Probes of submission #{submission_id}",
        submission_id=submission_id,
        report=report,
        charts=charts,
    )


@router.get("/submissions/{submission_id}/probes.json")
def probes_json(session: SessionDep, viewer: Reader, submission_id: DbId) -> Response:
    try:
        check_readable(session, viewer, [submission_id])
        report = load_probe_report(session, submission_id=submission_id)
    except NevisError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=404)
    return Response(json.dumps(report.to_dict(), allow_nan=False), media_type="application/json")


def _tasks_or_404(session: Session, submission_id: int, viewer: Viewer) -> list[dict[str, Any]] | Response:
    try:
        check_readable(session, viewer, [submission_id])
        return submission_tasks(session, submission_id)
    except UnknownNameError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=404)


__all__ = [
    "probes_json",
    "probes_page",
    "router",
    "submission_csv",
    "submission_json",
    "submission_page",
    "transfer_json",
]
