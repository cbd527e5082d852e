"""The anonymous answers kept as sent, and replayed before FastAPI routes a request (the cache
of rendered answers is :mod:`services.coordinator.api.answers`).

A read of the anonymous answer is answered before FastAPI routes it (:class:`SharedAnswers`):
once a ``GET`` without an ``Authorization`` header has been answered in full for the
anonymous viewer (its query validated, its answer rendered or found in the cache), the bytes
the app sent, status, headers and body, are kept under the request's path and raw query
string with the fingerprint they were rendered at. The same request again, at the same
fingerprint (or while the answer's successor renders in the background, as long as the kept
one may be sent meanwhile), gets those bytes (or a 304 when its ``If-None-Match`` names the
ETag) without validation, dependencies or routing: the same query string validates the same way, and the
anonymous answer is everyone's. Requests with a token, a private leaderboard
(``NEVIS_DASHBOARD_PUBLIC=false``) and answers rendered for another viewer never take that
path; it keeps its own bounded table (:data:`~services.coordinator.api.answers.SHARED_SIZE`), so odd query strings can evict
only each other, never the answers above.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.coordinator.api.answers import (
    IF_NONE_MATCH_MAX,
    SHARED_SLOT,
    AnswerCache,
    SharedAnswer,
    answer_cache,
    etag_matches,
)


class SharedAnswers:
    """ASGI middleware: answers a ``GET`` without a token, on a public leaderboard, from the
    bytes kept for the same path and raw query string at the current fingerprint (see the
    module's docstring); any other request, and a first or outdated one, goes to the app,
    and what the app sends is kept when the route marked it as the anonymous answer.

    Args:
        app: the ASGI app inside.
        server: the FastAPI app (its settings, sessions and :func:`answer_cache`).
    """

    KEPT = frozenset({200, 404})
    """The statuses of whole answers a route may mark (a 304 has no body to keep)."""

    def __init__(self, app: Any, *, server: Any) -> None:
        self.app, self.server = app, server

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not self.server.state.settings.dashboard_public:
            await self.app(scope, receive, send)
            return
        if_none_match = None
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                await self.app(scope, receive, send)  # the route checks the token (401 if bad)
                return
            if name == b"if-none-match" and if_none_match is None:
                if_none_match = value
        cache = answer_cache(self.server)
        key = (scope["path"], scope.get("query_string", b""))
        found = cache.shared(key)
        if found is not None and (if_none_match is None or len(if_none_match) <= IF_NONE_MATCH_MAX):
            try:
                now = await cache.fingerprint(self.server.state.sessions)
            except Exception:  # noqa: BLE001 - the app answers the same error properly (a 503 problem)
                now = None
            if now is not None and (
                found.fingerprint == now
                or (found.query is not None and cache.renders_soon(found.query, found.fingerprint, now))
            ):
                if found.route is not None:
                    scope["route"] = found.route
                await self._replay(found, if_none_match, send)
                return
        await self._keep(scope, receive, send, cache, key)

    @staticmethod
    async def _replay(found: SharedAnswer, if_none_match: bytes | None, send: Callable) -> None:
        if (
            found.etag is not None
            and if_none_match is not None
            and etag_matches(found.etag, if_none_match.decode("latin-1"))
        ):
            await send({"type": "http.response.start", "status": 304, "headers": list(found.not_modified)})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": found.status, "headers": list(found.headers)})
        await send({"type": "http.response.body", "body": found.body})

    async def _keep(
        self, scope: dict[str, Any], receive: Callable, send: Callable, cache: AnswerCache, key: Any
    ) -> None:
        """Run the app; keep what it sends if its route marked it as the anonymous answer."""
        slot: dict[str, Any] = {}
        scope[SHARED_SLOT] = slot
        start: dict[str, Any] = {}
        chunks: list[bytes] = []
        whole = True

        async def keeping(message: dict[str, Any]) -> None:
            nonlocal whole
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    whole = False  # a streamed answer is not kept
            await send(message)

        await self.app(scope, receive, keeping)
        if "fingerprint" not in slot or not whole or start.get("status") not in self.KEPT:
            return
        headers = tuple((bytes(name), bytes(value)) for name, value in start.get("headers") or ())
        etag = next((value.decode("latin-1") for name, value in headers if name.lower() == b"etag"), None)
        cache.share(
            key,
            SharedAnswer(
                fingerprint=slot["fingerprint"],
                status=start["status"],
                headers=headers,
                body=b"".join(chunks),
                etag=etag,
                route=scope.get("route"),
                query=slot.get("query"),
                not_modified=tuple(h for h in headers if h[0].lower() not in (b"content-length", b"content-type")),
            ),
        )


__all__ = ["SharedAnswers"]
