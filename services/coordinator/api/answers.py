"""Cached read-model answers, for the leaderboard API and the dashboard's pages.

A leaderboard changes only when a task commits or a submission changes, so answers are
cached in memory under a fingerprint of exactly that (the newest result id, the newest
submission update, the submission count), itself re-read at most once a second
(:data:`FINGERPRINT_TTL_S`): a read of a cached answer touches neither the database nor a
worker thread, and an answer is at most a second stale. Answers carry an ``ETag`` (a hash of
the body) and ``Cache-Control``; a request whose ``If-None-Match`` matches gets a 304.

Under a stream of commits (many a second at scale) the fingerprint changes every second, and
every query's answer with it: were readers to wait for each new render, every read would be a
first read. So a query whose answer was current at most :data:`STALE_FOR_S` seconds ago gets
that answer at once while its successor renders in the background (:data:`BACKGROUND_RENDERS` at
once: a render mostly waits for the database); only a query never answered, or answered longer
ago, waits for its render. A query is rendered again in the background at most every
:data:`RERENDER_EVERY_S` seconds: at many commits a second, the 60 queries a page's readers mix
would otherwise each render again every second, and a render's Python holds the interpreter that
sends every cached answer (the tail of all reads). Staleness stays within
:data:`RERENDER_EVERY_S` plus a render while the renders keep up, and never passes
:data:`STALE_FOR_S` plus a second. A fingerprint read every time
(``FINGERPRINT_TTL_S = 0``, as tests that read their own writes set) sends no stale answer.

Private submissions (:mod:`services.store.runs.visibility`) are shown only to their owner and
admins, so an answer depends on who asks. Answers are cached per :class:`Viewer`, and every
reader who may see no private submission (no token, or the token of a user who owns none) is
the one anonymous viewer: they share one cached answer, the same bytes and ETag, and only
readers with private rows get (and cache) answers of their own, sent ``Cache-Control:
private`` so no shared cache keeps them. The key can never hand one viewer's answer to
another: the viewer is part of it, and what is rendered under a key is rendered for exactly
that viewer.

The anonymous answers are also kept as sent, by raw request, and replayed before FastAPI
routes them: :class:`~services.coordinator.api.shared_answers.SharedAnswers`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.coordinator.api.bounded_table import BoundedTable
from services.coordinator.common.config import CoordinatorSettings
from services.store.db.models import Submission, TaskResult
from services.store.runs.visibility import ANONYMOUS, Viewer

CACHE_SIZE = 256
SHARED_SIZE = 1024
"""Anonymous answers kept as sent, by path and raw query string (see :class:`~services.coordinator.api.shared_answers.SharedAnswers`)."""
SHARED_SLOT = "nevis.shared_answer"
"""The ``scope`` key of the slot in which a route says its answer is the anonymous one."""
IF_NONE_MATCH_MAX = 1000
T = TypeVar("T")
FINGERPRINT_TTL_S = 1.0
STALE_FOR_S = 10.0  # how long a superseded answer may be sent while its successor renders
RERENDER_EVERY_S = 4.0  # a query's background renders start at least this far apart (< STALE_FOR_S)
ENDED_KEPT = 256  # superseded fingerprints remembered, with when they were superseded
BACKGROUND_RENDERS = 4  # at once: a render mostly waits for the database (17 ms of Python in 80)
CACHE_CONTROL_PUBLIC = "public, max-age=5, must-revalidate"
CACHE_CONTROL_PRIVATE = "private, max-age=5, must-revalidate"


@dataclass(frozen=True)
class SharedAnswer:
    """An anonymous answer as the app sent it, at the database fingerprint it was rendered at."""

    fingerprint: Any
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    etag: str | None
    not_modified: tuple[tuple[bytes, bytes], ...]
    """The headers of its 304: those of the answer less Content-Length and Content-Type, as the
    route's own 304 has them."""
    route: Any
    """The route that rendered it (for the request metrics' label)."""
    query: Any = None
    """The cache's key of its answer: while that answer's successor renders in the background,
    these bytes are sent as they are (see :meth:`AnswerCache.renders_soon`)."""


class AnswerCache:
    """Answers by (query, fingerprint): a changed database changes the fingerprint. Callers
    put the :class:`Viewer` an answer is rendered for in its query key. Beside them, the
    anonymous answers as sent, by raw request (:class:`~services.coordinator.api.shared_answers.SharedAnswers`)."""

    def __init__(self, size: int, shared_size: int = SHARED_SIZE) -> None:
        self._items, self._shared = BoundedTable[Any](size), BoundedTable[SharedAnswer](shared_size)
        self._fingerprint: tuple[float, Any] = (-1e9, None)
        self._refreshing = False
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._latest = BoundedTable[tuple[Any, Any]](size)  # query -> (fingerprint, answer): its newest
        self._ended: OrderedDict[Any, float] = OrderedDict()  # fingerprint -> when it was superseded
        self._queued: dict[Any, tuple[Any, Callable[[Session], Any]]] = {}  # queries to render, in order
        self._rerendered = BoundedTable[float](size)  # query -> when its last background render began
        self._workers: set[asyncio.Task[None]] = set()

    def shared(self, key: Any) -> SharedAnswer | None:
        """The anonymous answer kept for the raw request ``key``, at whatever fingerprint."""
        return self._shared.get(key)

    def share(self, key: Any, answer: SharedAnswer) -> None:
        self._shared.put(key, answer)

    def get(self, key: Any) -> Any:
        return self._items.get(key)

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
            previous = self._fingerprint[1]
            self._fingerprint = (time.monotonic(), value)
            if previous is not None and value != previous:
                self._ended[previous] = time.monotonic()
                while len(self._ended) > ENDED_KEPT:
                    self._ended.popitem(last=False)
        finally:
            self._refreshing = False
        return value

    async def answer(
        self, sessions: Any, key: Any, render: Callable[[Session], T], shared: dict[str, Any] | None = None
    ) -> T:
        """The cached answer to ``key`` at the database's current fingerprint, rendered (in a
        worker thread, with its own session) only when there is none, and once: readers who
        ask while it renders wait for that render (after a commit, 50 readers of a page run
        its query once, not 50 times). ``shared`` (the slot of :func:`shared_slot`, for an
        anonymous answer) is told that fingerprint."""
        now = await self.fingerprint(sessions)
        query, key = key, (key, now)
        found = self.get(key)
        if shared is not None:
            shared["query"] = query
        if found is None:
            latest = self._latest.get(query)
            if latest is not None and self._recent(latest[0]):
                self._render_later(sessions, query, render)
                if shared is not None:  # kept as of its own fingerprint: the fresh one replaces it
                    shared["fingerprint"] = latest[0]
                return latest[1]
        if shared is not None:
            shared["fingerprint"] = now
        while found is None:
            pending = self._pending.get(key)
            if pending is None:
                return await self._render(sessions, key, render)
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this reader was cancelled, not the render it waited for
            found = self.get(key)  # the render's own reader was cancelled: render again
        return found

    def renders_soon(self, query: Any, fingerprint: Any, now: Any) -> bool:
        """Whether ``query``'s answer at ``now`` is queued or rendering (or waits out
        RERENDER_EVERY_S after its last render) while its answer at ``fingerprint`` is recent
        enough to send meanwhile (as the kept bytes are)."""
        waiting = query in self._queued or (query, now) in self._pending or self._rendered_lately(query)
        return waiting and self.get((query, now)) is None and self._recent(fingerprint)

    def _rendered_lately(self, query: Any) -> bool:
        """Whether ``query``'s last background render began under RERENDER_EVERY_S ago."""
        began = self._rerendered.get(query)
        return began is not None and time.monotonic() - began < RERENDER_EVERY_S

    def _recent(self, fingerprint: Any) -> bool:
        """Whether an answer rendered at ``fingerprint`` was current at most STALE_FOR_S ago."""
        ended = self._ended.get(fingerprint)
        return FINGERPRINT_TTL_S > 0 and ended is not None and time.monotonic() - ended <= STALE_FOR_S

    def _render_later(self, sessions: Any, query: Any, render: Callable[[Session], Any]) -> None:
        """Queue the render of ``query`` for the background worker, once, and not again
        within RERENDER_EVERY_S of its last one (a later reader queues it then)."""
        if query in self._queued or self._rendered_lately(query):
            return
        self._queued[query] = (sessions, render)
        loop = asyncio.get_running_loop()
        self._workers = {w for w in self._workers if not w.done() and w.get_loop() is loop}
        if len(self._workers) < BACKGROUND_RENDERS:
            self._workers.add(loop.create_task(self._drain()))

    async def _drain(self) -> None:
        """Render queued queries, oldest first, each at the fingerprint current when its turn
        comes (commits that arrived while it waited are in it); one of BACKGROUND_RENDERS."""
        while self._queued:
            query = next(iter(self._queued))
            sessions, render = self._queued.pop(query)
            key = (query, self._fingerprint[1])
            self._rerendered.put(query, time.monotonic())
            try:
                if self.get(key) is None and key not in self._pending:
                    await self._render(sessions, key, render)  # pending from its first line: no gap
            except Exception:  # noqa: BLE001 - the next reader who waits for this render sees it fail
                pass

    async def _render(self, sessions: Any, key: Any, render: Callable[[Session], T]) -> T:
        def run() -> T:
            with sessions() as session:
                return render(session)

        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending[key] = done
        try:
            found = await run_in_threadpool(run)
        except asyncio.CancelledError:
            done.cancel()
            raise
        except BaseException as exc:
            done.set_exception(exc)
            done.exception()  # retrieved: no "never retrieved" warning when nobody waited
            raise
        finally:
            del self._pending[key]
        self.put(key, found)
        query, fingerprint = key
        newest = self._latest.get(query)
        if newest is None or fingerprint == self._fingerprint[1] or newest[0] != self._fingerprint[1]:
            self._latest.put(query, (fingerprint, found))
        done.set_result(found)
        return found

    def put(self, key: Any, value: Any) -> None:
        self._items.put(key, value)


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


def etag_matches(etag: str, if_none_match: str | None) -> bool:
    """Whether an ``If-None-Match`` header names ``etag``."""
    return etag in [tag.strip() for tag in (if_none_match or "").split(",")]


def shared_slot(request: Request, viewer: Viewer) -> dict[str, Any] | None:
    """Where a route rendering for ``viewer`` says that its answer is the anonymous one, so
    :class:`~services.coordinator.api.shared_answers.SharedAnswers` may keep it as sent; ``None`` for any other viewer (or without the
    middleware)."""
    return request.scope.get(SHARED_SLOT) if viewer == ANONYMOUS else None


async def respond_cached(
    request: Request,
    response_cls: type[BaseModel],
    build: Callable[[Session], Any],
    key: Any,
    settings: CoordinatorSettings,
    viewer: Viewer,
) -> Response:
    """The answer of ``build`` (validated as ``response_cls``) from the cache, rendered when it
    must be, with its ETag and Cache-Control; a 304 when ``If-None-Match`` names the ETag."""

    def render(session: Session) -> tuple[bytes, str]:
        body = response_cls.model_validate(build(session)).model_dump_json().encode()
        return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'

    shared = shared_slot(request, viewer)
    found = await answer_cache(request.app).answer(request.app.state.sessions, (key, viewer), render, shared)
    body, etag = found
    headers = {"ETag": etag, "Cache-Control": cache_control(settings, viewer), "Vary": "Authorization"}
    if etag_matches(etag, request.headers.get("if-none-match")):  # a 304: not kept (no body)
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


__all__ = [
    "CACHE_SIZE",
    "FINGERPRINT_TTL_S",
    "IF_NONE_MATCH_MAX",
    "SHARED_SIZE",
    "SHARED_SLOT",
    "STALE_FOR_S",
    "AnswerCache",
    "SharedAnswer",
    "answer_cache",
    "cache_control",
    "etag_matches",
    "fingerprint",
    "respond_cached",
    "shared_slot",
]
