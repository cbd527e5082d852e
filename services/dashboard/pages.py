"""The dashboard's pages: leaderboard, submission, probes, compare, and their downloads.

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
(:class:`~services.coordinator.api.answers.SharedAnswers`).

The leaderboard ranks meta-test submissions only (issue 9, meta-test hygiene), as the API's:
there is no phase to choose; meta-train runs are tuning runs, each on its own page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

import plotly
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import BeforeValidator
from sqlalchemy.orm import Session

from services.coordinator.api.answers import answer_cache, shared_slot
from services.coordinator.api.deps import SessionDep, SettingsDep, StoreDep
from services.coordinator.api.fields import DbId
from services.coordinator.api.routes.leaderboard import (
    CodeQuery,
    Reader,
    Ruleset,
    code_filter,
    known_ruleset,
    resolve_stream,
)
from services.core.errors import NevisError, UnknownNameError
from services.core.metric_specs import PROXIES
from services.dashboard import figures
from services.dashboard.log_pages import PRIVATE, log_owner
from services.dashboard.transfer_views import transfer_view
from services.dashboard.uncertainty_views import interval_of, paired_view
from services.dashboard.views import TASK_COLUMNS, CompareView, compare_view, submission_tasks, submission_view, to_csv
from services.store.probes.report import load_probe_report
from services.store.runs.board_front import front_points, rulesets_of
from services.store.runs.board_query import RANKED_PHASE, CodeFilter
from services.store.runs.board_uncertainty import board_uncertainty
from services.store.runs.leaderboard import SORT_KEYS, leaderboard
from services.store.runs.logs import LogEntry
from services.store.runs.profiles import kept_profiles, performance_profiles
from services.store.runs.transfer import transfer_report
from services.store.runs.visibility import ANONYMOUS, Viewer, check_readable

HERE = Path(__file__).parent
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PAGE_SIZE = 25
BOARD_COLUMNS = (
    "rank",
    "submission_id",
    "learner",
    "owner",
    "baseline",
    "status",
    "mean_error",
    "cflop",
    "cflop_paper",
    "cflop_pretraining",
    "flops_floored",
    "cpu_seconds",
    "tasks_done",
    "headline_done",
    "headline_tasks",
    "runs_of_learner",
    "learner_e_std",
    "profile_score",
    "cflop_profile_score",
    "code_public",
    "code_url",
    "created_at",
    "finished_at",
    "visibility",
    "ruleset",
)


def cpu_seconds_text(seconds: float | None) -> str:
    """CPU seconds as the pages show them: two significant digits below a second, so a short
    but measured time never reads as 0."""
    if seconds is None:
        return "–"
    return f"{seconds:,.1f}" if seconds >= 1 else f"{seconds:.2g}"


templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["sci"] = lambda v: "–" if v is None else f"{v:.3e}"
templates.env.filters["err"] = lambda v: "–" if v is None else f"{v:.4f}"
templates.env.filters["secs"] = cpu_seconds_text
templates.env.filters["when"] = lambda v: "–" if v is None else v.strftime("%Y-%m-%d %H:%M")
router = APIRouter(include_in_schema=False)

Sort = Annotated[Literal["rank", "E", "cflop", "cflop_paper", "profile", "date", "learner", "tasks"], Query()]
Text = Annotated[str | None, Query(max_length=100)]
Since = Annotated[date | None, Query(description="Only submissions created on or after this day (UTC).")]


def _midnight(day: date | None) -> datetime | None:
    return None if day is None else datetime.combine(day, time.min, tzinfo=UTC)


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_render(template, **context), status_code=status)


def _render(template: str, **context: Any) -> str:
    return templates.get_template(template).render(**context)


async def _cached_page(
    request: Request, key: Any, viewer: Viewer, render: Callable[[Session], tuple[int, str]]
) -> HTMLResponse:
    """A page rendered once per database fingerprint and reader (see the leaderboard API's
    cache); a reader's own view (with private rows) is ``Cache-Control: private``."""
    found = await answer_cache(request.app).answer(
        request.app.state.sessions, (key, viewer), render, shared_slot(request, viewer)
    )
    status, html = found
    control = "no-cache" if viewer == ANONYMOUS else "private, no-cache"
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": control, "Vary": "Authorization"})


def _board(  # noqa: ANN202
    session,  # noqa: ANN001
    stream,  # noqa: ANN001
    version,  # noqa: ANN001
    sort,  # noqa: ANN001
    descending,  # noqa: ANN001
    page,  # noqa: ANN001
    learner,  # noqa: ANN001
    since,  # noqa: ANN001
    viewer: Viewer,
    ruleset: str = "open",
    code: CodeFilter = "any",
):
    known, name, ver = resolve_stream(session, stream, version, viewer)
    if name is None or ver is None or (name, ver) not in known:
        return known, name, ver, None, [], None
    kept = kept_profiles(session, stream=name, version=ver, viewer=viewer)
    board = leaderboard(
        session,
        stream=name,
        version=ver,
        sort=sort,
        descending=descending,
        limit=PAGE_SIZE,
        offset=(page - 1) * PAGE_SIZE,
        learner_prefix=learner,
        since=since,
        viewer=viewer,
        profiles=kept.scores,
        ruleset=ruleset,
        code=code,
    )
    points = front_points(
        session,
        stream=name,
        version=ver,
        learner_prefix=learner,
        since=since,
        viewer=viewer,
        ruleset=ruleset,
        code=code,
    )
    return known, name, ver, board, points, kept


@router.get("/", response_class=HTMLResponse)
async def leaderboard_page(
    request: Request,
    viewer: Reader,
    stream: Text = None,
    version: Text = None,
    sort: Sort = "rank",
    descending: bool = False,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    learner: Text = None,
    since: Since = None,
    ruleset: Ruleset = "open",
    code: CodeQuery = None,
) -> HTMLResponse:
    shown = code_filter(code, request.app.state.settings)

    def render(session: Session) -> tuple[int, str]:
        known, name, ver, board, points, kept = _board(
            session, stream, version, sort, descending, page, learner, _midnight(since), viewer, ruleset, shown
        )
        query = {
            k: v
            for k, v in {
                "stream": name,
                "version": ver,
                "learner": learner,
                "ruleset": ruleset,
                "since": since.isoformat() if since else None,
                "code": code,
            }.items()
            if v
        }

        def link(**change: Any) -> str:
            merged = {**query, "sort": sort, "descending": str(descending).lower(), "page": page, **change}
            return "?" + urlencode({k: v for k, v in merged.items() if v not in (None, "")})

        pages = max(1, math.ceil(board.total / PAGE_SIZE)) if board else 1
        spread = board_uncertainty(session, request.app.state.store, board, viewer) if board else {}
        api = link(limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE, page=None)
        return 200, _render(
            "leaderboard.html",
            title="Leaderboard",
            known=known,
            stream=name,
            version=ver,
            phase=RANKED_PHASE,
            versions=[v for s, v in known if s == name],  # 2 or more: the version selector shows
            ruleset=ruleset,
            code=shown,
            rulesets=rulesets_of(session, stream=name, version=ver, viewer=viewer) if board else [],
            board=board,
            spread=spread,
            sort=sort,
            descending=descending,
            page=page,
            pages=pages,
            learner=learner or "",
            since=since,
            link=link,
            sort_keys=SORT_KEYS,
            csv_link="/leaderboard.csv" + link(),
            json_link="/v1/leaderboard" + api,
            on_front=sum(p.on_front for p in points),
            pareto=figures.pareto(points, title=f"{name}/{ver}: error against compute") if points else None,
            profile_figure=figures.profiles(
                kept.taus,
                [(f"#{sid} {who}", curve) for sid, who, curve in kept.best],
                title=f"Error performance profiles: the {len(kept.best)} best by score",
                axis="tau (error / best error)",
            )
            if kept and kept.best
            else None,
        )

    key = ("leaderboard-page", stream, version, sort, descending, page, learner, since, ruleset, shown)
    return await _cached_page(request, key, viewer, render)


@router.get("/leaderboard.csv")
def leaderboard_csv(
    session: SessionDep,
    viewer: Reader,
    settings: SettingsDep,
    stream: Text = None,
    version: Text = None,
    sort: Sort = "rank",
    descending: bool = False,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    learner: Text = None,
    since: Since = None,
    ruleset: Ruleset = "open",
    code: CodeQuery = None,
) -> PlainTextResponse:
    _, name, ver, board, _, _ = _board(
        session,
        stream,
        version,
        sort,
        descending,
        page,
        learner,
        _midnight(since),
        viewer,
        ruleset,
        code_filter(code, settings),
    )
    rows = [r.to_dict() for r in board.rows] if board else []
    return _download(to_csv(rows, BOARD_COLUMNS), f"leaderboard-{name}-{ver}-{RANKED_PHASE}-p{page}.csv")


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
            return 404, _render("error.html", title="Not found", message=str(exc))
        return 200, _render(
            "submission.html",
            title=f"Submission #{submission_id}",
            view=view,
            columns=TASK_COLUMNS,
            logs=logs,
            interval=interval_of(session, request.app.state.store, view.summary),
            transfer=transfer_view(session, request.app.state.store, submission_id, view.summary),
        )

    if logs is not None:
        with request.app.state.sessions() as session:
            status, html = await run_in_threadpool(render, session)
        return HTMLResponse(html, status_code=status, headers=PRIVATE)
    return await _cached_page(request, ("submission-page", submission_id), viewer, render)


@router.get("/submissions/{submission_id}/tasks.csv")
def submission_csv(session: SessionDep, viewer: Reader, submission_id: DbId) -> Response:
    rows = _tasks_or_404(session, submission_id, viewer)
    if isinstance(rows, Response):
        return rows
    return _download(to_csv(rows, TASK_COLUMNS), f"submission-{submission_id}-tasks.csv")


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
        return _page("error.html", 404, title="Not found", message=str(exc))
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
    return _page(
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


PROFILE_CURVES = 12  # curves drawn: the best submissions by score (the table lists them all)


@router.get("/profiles", response_class=HTMLResponse)
async def profiles_page(
    request: Request,
    viewer: Reader,
    stream: Text = None,
    version: Text = None,
    ruleset: Annotated[str | None, BeforeValidator(known_ruleset), Query(max_length=48)] = None,
) -> HTMLResponse:
    """The performance profiles of a stream version's finished submissions (of one ruleset's, if given)."""

    def render(session: Session) -> tuple[int, str]:
        known, name, ver = resolve_stream(session, stream, version, viewer)
        if name is None or ver is None or (name, ver) not in known:
            return 200, _render(
                "profiles.html", title="Performance profiles", stream=name, version=ver, found=None, figures={}
            )
        found = performance_profiles(session, stream=name, version=ver, viewer=viewer, ruleset=ruleset)
        top = found.rows[:PROFILE_CURVES]
        drawn = {
            "error": figures.profiles(
                found.taus,
                [(f"#{r.submission_id} {r.learner}", r.error_curve) for r in top],
                title="Error within tau x the best",
                axis="tau (error / best error)",
            )
        }
        if found.reference is not None:
            by_cflop = sorted(found.rows, key=lambda r: -(r.cflop_score or 0.0))[:PROFILE_CURVES]
            drawn["cflop"] = figures.profiles(
                found.taus,
                [(f"#{r.submission_id} {r.learner}", r.cflop_curve or []) for r in by_cflop],
                title="cFLOP to reach Indep's error, within tau x the least",
                axis="tau (cFLOP / least cFLOP)",
            )
        return 200, _render(
            "profiles.html",
            title="Performance profiles",
            stream=name,
            version=ver,
            found=found,
            figures=drawn,
            ruleset=ruleset,
        )

    return await _cached_page(request, ("profiles-page", stream, version, ruleset), viewer, render)


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
        return _page("error.html", 404, title="Not found", message=str(exc))
    return _page(
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
    return _download(to_csv(view.rows, columns), f"compare-{ids.replace(',', '-')}.csv")


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


def _tasks_or_404(session, submission_id: int, viewer: Viewer) -> list[dict[str, Any]] | Response:  # noqa: ANN001
    try:
        check_readable(session, viewer, [submission_id])
        return submission_tasks(session, submission_id)
    except UnknownNameError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=404)


def _download(text: str, filename: str) -> PlainTextResponse:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename)
    return PlainTextResponse(
        text, media_type="text/csv", headers={"Content-Disposition": f'attachment; filename="{safe}"'}
    )


__all__ = ["PAGE_SIZE", "PLOTLY_JS", "cpu_seconds_text", "router"]
