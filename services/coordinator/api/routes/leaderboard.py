"""The leaderboard API: ranked submissions of a stream version and their Pareto front.

Public by default, as leaderboards are (``NEVIS_DASHBOARD_PUBLIC=false`` puts it behind a
token). Answers are cached per viewer under a fingerprint of the database, and the
anonymous one is kept as sent (:mod:`services.coordinator.api.answers`).

Leaderboards rank meta-test submissions only (issue 9, meta-test hygiene): meta-train runs
are tuning runs, and ranking them would reward tuning. ``phase`` stays accepted for old
clients, but only as ``meta_test``; any other value is a 422 naming ``phase``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import AwareDatetime, BaseModel, BeforeValidator, Field
from sqlalchemy.orm import Session

from services.coordinator.api.answers import IF_NONE_MATCH_MAX, respond_cached
from services.coordinator.api.deps import Limit, Offset, SettingsDep, bearer
from services.coordinator.api.fields import NAME_MAX, STREAM_MAX, VERSION_MAX
from services.coordinator.api.routes import problems
from services.coordinator.api.schemas_uncertainty import BoardUncertaintyOut
from services.coordinator.common.client_errors import InvalidInputError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.crud import users as crud_users
from services.core.errors import UnknownNameError
from services.core.rulesets import DEFAULT_RULESET
from services.core.rulesets import ruleset as ruleset_named
from services.store.runs.board_front import FrontPoint, front_points, rulesets_of, stream_versions
from services.store.runs.board_query import RANKED_PHASE, CodeFilter
from services.store.runs.board_uncertainty import board_uncertainty
from services.store.runs.leaderboard import LeaderboardRow, leaderboard
from services.store.runs.profiles import ProfileSet, performance_profiles, profile_scores
from services.store.runs.visibility import ANONYMOUS, Viewer, effective_viewer

router = APIRouter(prefix="/v1/leaderboard", tags=["leaderboard"], responses=problems(401, 422, 503))


class LeaderboardOut(BaseModel):
    stream: str | None
    version: str | None
    phase: str
    ruleset: str = Field(default="open", description="The ruleset whose board this is (docs/rules.md).")
    rulesets: list[str] = Field(
        default_factory=list,
        description=("The rulesets with meta-test submissions on this stream version: each has its own board."),
    )
    code: Literal["any", "public"] = Field(
        default="any",
        description=(
            "Which rows are ranked: every row, or only those whose code is public (a baseline, or a code_url given)."
        ),
    )
    streams: list[dict[str, str]]
    items: list[LeaderboardRow]
    total: int
    limit: int
    offset: int
    uncertainty: list[BoardUncertaintyOut] = Field(
        default_factory=list,
        description=(
            "Per item: E's 95 % bootstrap interval and the learner's spread over seeds (docs/uncertainty.md)."
        ),
    )


class FrontOut(BaseModel):
    stream: str | None
    version: str | None
    phase: str
    ruleset: str = "open"
    code: Literal["any", "public"] = "any"
    points: list[FrontPoint]


async def require_reader(
    request: Request,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Viewer:
    """Who reads: anyone without a token when the leaderboard is public (:data:`ANONYMOUS`,
    no database read), otherwise the valid token's user (a 401 for a bad token, public or
    not: an owner must not take the public view for theirs), as :func:`effective_viewer`
    reduces it (anonymous, unless it may see a private submission)."""
    if credentials is None and settings.dashboard_public:
        return ANONYMOUS

    def check() -> Viewer:
        with request.app.state.sessions() as session:
            user = crud_users.authenticate(session, secret=credentials.credentials if credentials else None)
            return effective_viewer(session, Viewer(user_id=user.id, admin=user.role == "admin"))

    return await run_in_threadpool(check)


Reader = Annotated[Viewer, Depends(require_reader)]
Stream = Annotated[
    str | None, Query(max_length=STREAM_MAX, description="Stream name (default: the newest with submissions).")
]
Version = Annotated[str | None, Query(max_length=VERSION_MAX, description="Stream version (default: its newest).")]


def meta_test_only(value: object) -> object:
    """The ``phase`` query: ``meta_test``, the only phase a leaderboard ranks."""
    if value != RANKED_PHASE:
        raise InvalidInputError(
            f"The 'phase' of a leaderboard must be {RANKED_PHASE!r}: leaderboards rank meta-test "
            "runs only (meta-train runs are tuning runs; list them with GET "
            "/v1/submissions?phase=meta_train)."
        )  # the query's own name is the field
    return value


Phase = Annotated[
    Literal["meta_test"],
    BeforeValidator(meta_test_only),
    Query(description="Always meta_test (the default): leaderboards rank meta-test runs only."),
]
LearnerFilter = Annotated[str | None, Query(max_length=NAME_MAX, description="Learner name prefix (a family).")]
Since = Annotated[AwareDatetime | None, Query(description="Only submissions created since then.")]


def known_ruleset(value: object) -> object:
    """The ``ruleset`` query: a ruleset's name (:mod:`services.core.rulesets`), else a 422 naming it."""
    try:
        ruleset_named(str(value))
    except UnknownNameError as exc:
        raise InvalidInputError(f"The 'ruleset' of a leaderboard is not valid: {exc}") from None
    return value


Ruleset = Annotated[
    str,
    BeforeValidator(known_ruleset),
    Query(max_length=48, description="The ruleset whose board to show (default open); each ruleset has its own."),
]
CodeQuery = Annotated[
    Literal["any", "public"] | None,
    Query(
        description=(
            "Rank every row (any) or only rows whose code is public (public); default: the operator's "
            "NEVIS_LEADERBOARD_CODE (any unless set)."
        )
    ),
]


def code_filter(asked: str | None, settings: CoordinatorSettings) -> CodeFilter:
    """The rows a board ranks: what the reader asked for, else the operator's default."""
    return cast(CodeFilter, asked or settings.leaderboard_code)


def resolve_stream(
    session: Session, stream: str | None, version: str | None, viewer: Viewer = ANONYMOUS
) -> tuple[list[tuple[str, str]], str | None, str | None]:
    """All stream versions with submissions ``viewer`` may read, and the one asked for
    (default: the newest)."""
    known = stream_versions(session, viewer)
    if stream is None:
        stream = known[0][0] if known else None
    if version is None and stream is not None:
        version = next((v for s, v in known if s == stream), None)
    return known, stream, version


NOT_MODIFIED = {304: {"description": "Not modified: the If-None-Match ETag is current."}}
CACHE_HEADERS = {
    "ETag": {"description": "A hash of the body.", "schema": {"type": "string"}},
    "Cache-Control": {"description": "How long the answer may be reused.", "schema": {"type": "string"}},
}


@router.get(
    "",
    response_model=LeaderboardOut,
    summary="Ranked submissions of a stream version",
    responses={**NOT_MODIFIED, 200: {"headers": CACHE_HEADERS}},
)
async def read_leaderboard(
    request: Request,
    settings: SettingsDep,
    viewer: Reader,
    stream: Stream = None,
    version: Version = None,
    phase: Phase = "meta_test",
    ruleset: Ruleset = DEFAULT_RULESET,
    sort: Annotated[
        Literal["rank", "E", "cflop", "cflop_paper", "profile", "date", "learner", "tasks"],
        Query(
            description="'profile': by error-profile score, best (highest) first; descending=true: lowest first. "
            "Rows without a score (not finished) come last."
        ),
    ] = "rank",
    descending: bool = False,
    limit: Limit = 50,
    offset: Offset = 0,
    learner: LearnerFilter = None,
    since: Since = None,
    baselines: Annotated[bool | None, Query(description="Only baselines (true) or none (false).")] = None,
    code: CodeQuery = None,
    if_none_match: Annotated[str | None, Header(max_length=IF_NONE_MATCH_MAX)] = None,
) -> Response:
    shown = code_filter(code, settings)
    key = (
        "board",
        stream,
        version,
        phase,
        sort,
        descending,
        limit,
        offset,
        learner,
        since.isoformat() if since else None,
        baselines,
        ruleset,
        shown,
    )

    def build(session: Session) -> dict[str, Any]:
        known, name, ver = resolve_stream(session, stream, version, viewer)
        streams = [{"stream": s, "version": v} for s, v in known]
        if name is None or ver is None:
            return {
                "stream": name,
                "version": ver,
                "phase": phase,
                "streams": streams,
                "items": [],
                "total": 0,
                "limit": limit,
                "offset": offset,
                "ruleset": ruleset,
                "code": shown,
            }
        page = leaderboard(
            session,
            stream=name,
            version=ver,
            sort=sort,
            descending=descending,
            ruleset=ruleset,
            limit=limit,
            offset=offset,
            learner_prefix=learner,
            since=since,
            baselines=baselines,
            viewer=viewer,
            code=shown,
            profiles="kept"
            if viewer == ANONYMOUS
            else profile_scores(session, stream=name, version=ver, viewer=viewer, ruleset=ruleset),
        )
        spread = board_uncertainty(session, request.app.state.store, page, viewer)
        return {
            "stream": name,
            "version": ver,
            "phase": phase,
            "streams": streams,
            "ruleset": ruleset,
            "code": shown,
            "rulesets": rulesets_of(session, stream=name, version=ver, viewer=viewer),
            "items": list(page.rows),
            "total": page.total,
            "limit": limit,
            "offset": offset,
            "uncertainty": [BoardUncertaintyOut.of(i, u) for i, u in spread.items()],
        }

    return await respond_cached(request, LeaderboardOut, build, key, settings, viewer)


@router.get(
    "/front",
    response_model=FrontOut,
    summary="Every finished submission as a (cFLOP, E) point, front marked",
    responses={**NOT_MODIFIED, 200: {"headers": CACHE_HEADERS}},
)
async def read_front(
    request: Request,
    settings: SettingsDep,
    viewer: Reader,
    stream: Stream = None,
    version: Version = None,
    phase: Phase = "meta_test",
    learner: LearnerFilter = None,
    since: Since = None,
    ruleset: Ruleset = DEFAULT_RULESET,
    code: CodeQuery = None,
    if_none_match: Annotated[str | None, Header(max_length=IF_NONE_MATCH_MAX)] = None,
) -> Response:
    shown = code_filter(code, settings)
    key = ("front", stream, version, phase, learner, since.isoformat() if since else None, ruleset, shown)

    def build(session: Session) -> dict[str, Any]:
        _, name, ver = resolve_stream(session, stream, version, viewer)
        points = (
            []
            if name is None or ver is None
            else front_points(
                session,
                stream=name,
                version=ver,
                learner_prefix=learner,
                since=since,
                viewer=viewer,
                ruleset=ruleset,
                code=shown,
            )
        )
        return {"stream": name, "version": ver, "phase": phase, "points": points, "ruleset": ruleset, "code": shown}

    return await respond_cached(request, FrontOut, build, key, settings, viewer)


class ProfilesOut(BaseModel):
    stream: str | None
    version: str | None
    phase: str
    ruleset: str | None = Field(default=None, description="The ruleset whose submissions are profiled; null: all.")
    profiles: ProfileSet | None


@router.get(
    "/profiles",
    response_model=ProfilesOut,
    summary="Performance profiles of the finished submissions: error and cFLOP to reach Indep's median error + 0.01",
    responses={**NOT_MODIFIED, 200: {"headers": CACHE_HEADERS}},
)
async def read_profiles(
    request: Request,
    settings: SettingsDep,
    viewer: Reader,
    stream: Stream = None,
    version: Version = None,
    phase: Phase = "meta_test",
    ruleset: Annotated[
        str | None,
        BeforeValidator(known_ruleset),
        Query(max_length=48, description="Profile one ruleset's submissions only (default: all of them)."),
    ] = None,
    if_none_match: Annotated[str | None, Header(max_length=IF_NONE_MATCH_MAX)] = None,
) -> Response:
    """For each finished submission, the fraction of tasks on which its error is within a
    factor tau of the best submission's (and the FLOPs it spent to reach the median error of
    Indep's seeds + 0.01 within a factor tau of the least spent), as curves over tau in [1, 4],
    and their areas as scores in [0, 1] (docs: performance profiles)."""
    key = ("profiles", stream, version, phase, ruleset)

    def build(session: Session) -> dict[str, Any]:
        _, name, ver = resolve_stream(session, stream, version, viewer)
        found = (
            None
            if name is None or ver is None
            else performance_profiles(session, stream=name, version=ver, viewer=viewer, ruleset=ruleset)
        )
        return {"stream": name, "version": ver, "phase": phase, "profiles": found, "ruleset": ruleset}

    return await respond_cached(request, ProfilesOut, build, key, settings, viewer)


__all__ = [
    "CodeQuery",
    "FrontOut",
    "LeaderboardOut",
    "code_filter",
    "ProfilesOut",
    "Reader",
    "Ruleset",
    "known_ruleset",
    "meta_test_only",
    "require_reader",
    "resolve_stream",
    "router",
]
