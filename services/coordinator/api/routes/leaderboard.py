"""The leaderboard API: ranked submissions of a stream version and their Pareto front.

Public by default, as leaderboards are (``NEVIS_DASHBOARD_PUBLIC=false`` puts it behind a
token). Responses carry an ``ETag`` (a hash of the body) and ``Cache-Control``; a request
whose ``If-None-Match`` matches gets a 304. A leaderboard changes only when a task commits
or a submission changes, so answers are cached in memory under a fingerprint of exactly
that (the newest result id, the newest submission update, the submission count), itself
re-read at most once a second (:data:`FINGERPRINT_TTL_S`): a read of a cached answer touches
neither the database nor a worker thread, and an answer is at most a second stale.

Private submissions (:mod:`services.store.runs.visibility`) are shown only to their owner and
admins, so an answer depends on who asks. Answers are cached per :class:`Viewer`, and every
reader who may see no private submission (no token, or the token of a user who owns none) is
the one anonymous viewer: they share one cached answer, the same bytes and ETag, and only
readers with private rows get (and cache) answers of their own, sent ``Cache-Control:
private`` so no shared cache keeps them. The key can never hand one viewer's answer to
another: the viewer is part of it, and what is rendered under a key is rendered for exactly
that viewer.

Leaderboards rank meta-test submissions only (issue 9, meta-test hygiene): meta-train runs
are tuning runs, and ranking them would reward tuning. ``phase`` stays accepted for old
clients, but only as ``meta_test``; any other value is a 422 naming ``phase``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import AwareDatetime, BaseModel, BeforeValidator
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.coordinator.api.deps import Limit, Offset, SettingsDep, bearer
from services.coordinator.api.fields import NAME_MAX, STREAM_MAX, VERSION_MAX
from services.coordinator.api.routes import problems
from services.coordinator.core.errors import InvalidInputError
from services.coordinator.crud import users as crud_users
from services.store.db.models import Submission, TaskResult
from services.store.runs.leaderboard import (
    RANKED_PHASE,
    FrontPoint,
    LeaderboardRow,
    front_points,
    leaderboard,
    stream_versions,
)
from services.store.runs.visibility import ANONYMOUS, Viewer, effective_viewer

router = APIRouter(prefix="/v1/leaderboard", tags=["leaderboard"], responses=problems(401, 422, 503))
CACHE_SIZE = 256
T = TypeVar("T")
FINGERPRINT_TTL_S = 1.0
CACHE_CONTROL_PUBLIC = "public, max-age=5, must-revalidate"
CACHE_CONTROL_PRIVATE = "private, max-age=5, must-revalidate"


class LeaderboardOut(BaseModel):
    stream: str | None
    version: str | None
    phase: str
    streams: list[dict[str, str]]
    items: list[LeaderboardRow]
    total: int
    limit: int
    offset: int


class FrontOut(BaseModel):
    stream: str | None
    version: str | None
    phase: str
    points: list[FrontPoint]


async def require_reader(request: Request, settings: SettingsDep,
                         credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Viewer:
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
Stream = Annotated[str | None, Query(max_length=STREAM_MAX, description="Stream name (default: the newest with submissions).")]
Version = Annotated[str | None, Query(max_length=VERSION_MAX, description="Stream version (default: its newest).")]


def meta_test_only(value: object) -> object:
    """The ``phase`` query: ``meta_test``, the only phase a leaderboard ranks."""
    if value != RANKED_PHASE:
        raise InvalidInputError(
            f"The 'phase' of a leaderboard must be {RANKED_PHASE!r}: leaderboards rank meta-test "
            "runs only (meta-train runs are tuning runs; list them with GET "
            "/v1/submissions?phase=meta_train).")  # the query's own name is the field
    return value


Phase = Annotated[Literal["meta_test"], BeforeValidator(meta_test_only), Query(
    description="Always meta_test (the default): leaderboards rank meta-test runs only.")]
LearnerFilter = Annotated[str | None, Query(max_length=NAME_MAX, description="Learner name prefix (a family).")]
Since = Annotated[AwareDatetime | None, Query(description="Only submissions created since then.")]


class AnswerCache:
    """Answers by (query, fingerprint): a changed database changes the fingerprint. Callers
    put the :class:`Viewer` an answer is rendered for in its query key."""

    def __init__(self, size: int) -> None:
        self.size, self._items, self._lock = size, OrderedDict[Any, Any](), threading.Lock()
        self._fingerprint: tuple[float, Any] = (-1e9, None)
        self._refreshing = False

    def get(self, key: Any) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    async def fingerprint(self, sessions: Any) -> Any:
        """The database's fingerprint, re-read at most every FINGERPRINT_TTL_S seconds, by one
        request at a time: the others meanwhile use the last one (at most a second stale)
        rather than all queueing for a database connection at once."""
        taken, value = self._fingerprint
        if time.monotonic() - taken < FINGERPRINT_TTL_S or (self._refreshing and taken > 0):
            return value
        self._refreshing = True
        try:
            def read() -> Any:
                with sessions() as session:
                    return fingerprint(session)

            value = await run_in_threadpool(read)
            self._fingerprint = (time.monotonic(), value)
        finally:
            self._refreshing = False
        return value

    async def answer(self, sessions: Any, key: Any, render: Callable[[Session], T]) -> T:
        """The cached answer to ``key`` at the database's current fingerprint, rendered (in a
        worker thread, with its own session) only when there is none."""
        key = (key, await self.fingerprint(sessions))
        found = self.get(key)
        if found is None:
            def run() -> T:
                with sessions() as session:
                    return render(session)

            found = await run_in_threadpool(run)
            self.put(key, found)
        return found

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


def fingerprint(session: Session) -> tuple[Any, ...]:
    """What changes whenever a leaderboard could: cheap, indexed aggregates."""
    newest_result = session.scalar(select(func.max(TaskResult.id)))
    changed, count = session.execute(select(func.max(Submission.updated_at), func.count(Submission.id))).one()
    return newest_result, str(changed), count


def answer_cache(app: Any) -> AnswerCache:
    """The app's cache of read-model answers (the leaderboard's, the dashboard's pages)."""
    cache = getattr(app.state, "answer_cache", None)
    if cache is None:
        cache = app.state.answer_cache = AnswerCache(CACHE_SIZE)
    return cache


def cache_control(settings: Any, viewer: Viewer) -> str:
    """``public`` for the anonymous answer of a public leaderboard; ``private`` for the rest
    (a token-only leaderboard, or an answer with a viewer's private rows)."""
    return CACHE_CONTROL_PUBLIC if settings.dashboard_public and viewer == ANONYMOUS else CACHE_CONTROL_PRIVATE


async def _respond(request: Request, response_cls: type[BaseModel], build, key: Any, settings,
                   viewer: Viewer) -> Response:
    def render(session: Session) -> tuple[bytes, str]:
        body = response_cls.model_validate(build(session)).model_dump_json().encode()
        return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'

    found = await answer_cache(request.app).answer(request.app.state.sessions, (key, viewer), render)
    body, etag = found
    headers = {"ETag": etag, "Cache-Control": cache_control(settings, viewer), "Vary": "Authorization"}
    if etag in [tag.strip() for tag in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def resolve_stream(session: Session, stream: str | None, version: str | None, viewer: Viewer = ANONYMOUS
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
CACHE_HEADERS = {"ETag": {"description": "A hash of the body.", "schema": {"type": "string"}},
                 "Cache-Control": {"description": "How long the answer may be reused.", "schema": {"type": "string"}}}


@router.get("", response_model=LeaderboardOut, summary="Ranked submissions of a stream version",
            responses={**NOT_MODIFIED, 200: {"headers": CACHE_HEADERS}})
async def read_leaderboard(
    request: Request, settings: SettingsDep, viewer: Reader, stream: Stream = None,
    version: Version = None, phase: Phase = "meta_test",
    sort: Annotated[Literal["rank", "E", "cflop", "date", "learner", "tasks"], Query()] = "rank",
    descending: bool = False, limit: Limit = 50, offset: Offset = 0, learner: LearnerFilter = None,
    since: Since = None, baselines: Annotated[bool | None, Query(description="Only baselines (true) or none (false).")] = None,
    if_none_match: Annotated[str | None, Header(max_length=1000)] = None,
) -> Response:
    key = ("board", stream, version, phase, sort, descending, limit, offset, learner,
           since.isoformat() if since else None, baselines)

    def build(session: Session) -> dict[str, Any]:
        known, name, ver = resolve_stream(session, stream, version, viewer)
        streams = [{"stream": s, "version": v} for s, v in known]
        if name is None or ver is None:
            return {"stream": name, "version": ver, "phase": phase, "streams": streams, "items": [],
                    "total": 0, "limit": limit, "offset": offset}
        page = leaderboard(session, stream=name, version=ver, sort=sort, descending=descending,
                           limit=limit, offset=offset, learner_prefix=learner, since=since, baselines=baselines,
                           viewer=viewer)
        return {"stream": name, "version": ver, "phase": phase, "streams": streams,
                "items": list(page.rows), "total": page.total, "limit": limit, "offset": offset}

    return await _respond(request, LeaderboardOut, build, key, settings, viewer)


@router.get("/front", response_model=FrontOut, summary="Every finished submission as a (cFLOP, E) point, front marked",
            responses={**NOT_MODIFIED, 200: {"headers": CACHE_HEADERS}})
async def read_front(
    request: Request, settings: SettingsDep, viewer: Reader, stream: Stream = None,
    version: Version = None, phase: Phase = "meta_test", learner: LearnerFilter = None, since: Since = None,
    if_none_match: Annotated[str | None, Header(max_length=1000)] = None,
) -> Response:
    key = ("front", stream, version, phase, learner, since.isoformat() if since else None)

    def build(session: Session) -> dict[str, Any]:
        _, name, ver = resolve_stream(session, stream, version, viewer)
        points = [] if name is None or ver is None else front_points(
            session, stream=name, version=ver, learner_prefix=learner, since=since, viewer=viewer)
        return {"stream": name, "version": ver, "phase": phase, "points": points}

    return await _respond(request, FrontOut, build, key, settings, viewer)


__all__ = ["CACHE_SIZE", "FINGERPRINT_TTL_S", "AnswerCache", "FrontOut", "LeaderboardOut", "Reader", "answer_cache",
           "cache_control", "fingerprint", "meta_test_only", "require_reader", "resolve_stream", "router"]
