"""The dashboard's pages: leaderboard, submission, probes, compare, and their downloads, as one
router (:data:`router`): the ranking pages are :mod:`services.dashboard.board_pages`, one
submission's :mod:`services.dashboard.submission_pages`, the shared parts
:mod:`services.dashboard.page_kit`; the comparison and the static files are here.

Server-rendered (Jinja2), read-only, public unless ``NEVIS_DASHBOARD_PUBLIC=false``. Every
table is downloadable as CSV here and as JSON from the ``/v1`` API (the leaderboard,
``/v1/submissions/{id}``), or here where the API has no twin. Pages read only what they show:
the leaderboard is one paginated query.

Private submissions (:mod:`services.store.runs.visibility`): every page and download reads as
the :data:`~services.coordinator.api.routes.leaderboard.Reader` its request presents. The
dashboard has no login of its own, so a browser is anonymous and sees public submissions only;
a client that sends its API token (``Authorization: Bearer``) sees its own private ones too,
marked "private", and a private submission's pages are a 404 to everyone else, worded as for an
id that does not exist. Cached pages are keyed by that reader (see the leaderboard API), and an
anonymous reader's page is kept as sent for the same request again, as the API's answers are
(:class:`~services.coordinator.api.shared_answers.SharedAnswers`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import plotly
from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
from sqlalchemy.orm import Session

from services.coordinator.api.deps import SessionDep, StoreDep
from services.coordinator.api.routes.leaderboard import Reader
from services.core.errors import UnknownNameError
from services.dashboard import board_pages, submission_pages
from services.dashboard.page_kit import HERE, csv_download, html_page
from services.dashboard.uncertainty_views import paired_view
from services.dashboard.views import CompareView, compare_view, to_csv
from services.store.runs.visibility import Viewer, check_readable

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
router = APIRouter(include_in_schema=False)
router.include_router(board_pages.router)
router.include_router(submission_pages.router)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(
    session: SessionDep,
    store: StoreDep,
    viewer: Reader,
    ids: Annotated[str, Query(max_length=200, pattern=r"^\d{1,10}(,\d{1,10}){0,7}$")],
) -> HTMLResponse:
    try:
        view = _compared(session, viewer, ids)
    except UnknownNameError as exc:
        return html_page("error.html", 404, title="Not found", message=str(exc))
    return html_page(
        "compare.html", title="Compare submissions", view=view, ids=ids, paired=paired_view(session, store, view)
    )


@router.get("/compare.csv")
def compare_csv(
    session: SessionDep,
    viewer: Reader,
    ids: Annotated[str, Query(max_length=200, pattern=r"^\d{1,10}(,\d{1,10}){0,7}$")],
) -> Response:
    try:
        view = _compared(session, viewer, ids)
    except UnknownNameError as exc:
        return PlainTextResponse(str(exc), status_code=404)
    columns = list(view.rows[0]) if view.rows else ["order"]
    return csv_download(to_csv(view.rows, columns), f"compare-{ids.replace(',', '-')}.csv")


@router.get("/static/plotly.min.js")
def plotly_js() -> FileResponse:
    """plotly.js from the installed plotly package: no CDN, works offline."""
    return FileResponse(PLOTLY_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


@router.get("/static/{name}")
def static(name: Annotated[str, PathParam(pattern=r"^[a-z]+\.(css|js)$")]) -> Response:
    path = HERE / "static" / name
    if path.parent != HERE / "static" or not path.is_file():
        return PlainTextResponse("Not found", status_code=404)
    media = "text/css" if name.endswith(".css") else "text/javascript"
    return FileResponse(path, media_type=media, headers={"Cache-Control": "public, max-age=3600"})


def _compared(session: Session, viewer: Viewer, ids: str) -> CompareView:
    """The compare view of ``ids`` (comma-separated); UnknownNameError if ``viewer`` may not
    read one of them."""
    wanted = [int(i) for i in dict.fromkeys(ids.split(","))]
    check_readable(session, viewer, wanted)
    return compare_view(session, wanted)


__all__ = ["PLOTLY_JS", "compare_csv", "compare_page", "plotly_js", "router", "static"]
