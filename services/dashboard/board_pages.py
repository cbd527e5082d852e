"""The dashboard's ranking pages: the leaderboard (with its front and profile figures) and its CSV,
and the performance profiles of a stream version.

The leaderboard ranks meta-test submissions only (issue 9, meta-test hygiene), as the API's:
there is no phase to choose; meta-train runs are tuning runs, each on its own page. The page reads
only what it shows: the leaderboard is one paginated query.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse
from pydantic import BeforeValidator
from sqlalchemy.orm import Session

from services.coordinator.api.deps import SessionDep, SettingsDep
from services.coordinator.api.routes.leaderboard import (
    CodeQuery,
    Reader,
    Ruleset,
    code_filter,
    known_ruleset,
    resolve_stream,
)
from services.core.profiles import ERROR_FLOOR, TARGET_NAME, TARGET_TOLERANCE
from services.dashboard import figures
from services.dashboard.page_kit import Since, Text, cached_page, csv_download, midnight, render_page
from services.dashboard.views import to_csv
from services.store.runs.board_front import FrontPoint, front_points, rulesets_of
from services.store.runs.board_query import RANKED_PHASE, CodeFilter
from services.store.runs.board_uncertainty import board_uncertainty
from services.store.runs.leaderboard import SORT_KEYS, LeaderboardPage, SortKey, leaderboard
from services.store.runs.profiles import KeptProfiles, floor_table, kept_profiles, performance_profiles
from services.store.runs.visibility import Viewer

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
    "gpu_seconds",
    "gpu_note",
    "energy_kwh",
    "energy_source",
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
    "verified_mark",
)

router = APIRouter(include_in_schema=False)
Sort = Annotated[Literal["rank", "E", "cflop", "cflop_paper", "profile", "date", "learner", "tasks"], Query()]


def _board(
    session: Session,
    stream: str | None,
    version: str | None,
    sort: SortKey,
    descending: bool,
    page: int,
    learner: str | None,
    since: datetime | None,
    viewer: Viewer,
    ruleset: str = "open",
    code: CodeFilter = "any",
) -> tuple[
    list[tuple[str, str]], str | None, str | None, LeaderboardPage | None, list[FrontPoint], KeptProfiles | None
]:
    known, name, ver = resolve_stream(session, stream, version, viewer)
    if name is None or ver is None or (name, ver) not in known:
        return known, name, ver, None, [], None
    kept = kept_profiles(session, stream=name, version=ver, viewer=viewer, ruleset=ruleset)  # within the board
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
            session, stream, version, sort, descending, page, learner, midnight(since), viewer, ruleset, shown
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
        return 200, render_page(
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
    return await cached_page(request, key, viewer, render)


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
        midnight(since),
        viewer,
        ruleset,
        code_filter(code, settings),
    )
    rows = [r.to_dict() for r in board.rows] if board else []
    return csv_download(to_csv(rows, BOARD_COLUMNS), f"leaderboard-{name}-{ver}-{RANKED_PHASE}-p{page}.csv")


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
            return 200, render_page(
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
                title=f"{TARGET_NAME}, within tau x the least",
                axis="tau (cFLOP / least cFLOP)",
            )
        floors, floor_rows = floor_table(session, stream=name, version=ver, viewer=viewer, ruleset=ruleset)
        return 200, render_page(
            "profiles.html",
            title="Performance profiles",
            stream=name,
            version=ver,
            found=found,
            figures=drawn,
            ruleset=ruleset,
            target_name=TARGET_NAME,
            target_tolerance=TARGET_TOLERANCE,
            floors=floors if floor_rows else [],
            floor_rows=floor_rows,
            error_floor=ERROR_FLOOR,
        )

    return await cached_page(request, ("profiles-page", stream, version, ruleset), viewer, render)


__all__ = [
    "BOARD_COLUMNS",
    "PAGE_SIZE",
    "PROFILE_CURVES",
    "leaderboard_csv",
    "leaderboard_page",
    "profiles_page",
    "router",
]
