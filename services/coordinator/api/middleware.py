"""Small ASGI middlewares: request metrics, a Content-Length and token gate on uploads, and
a size limit on every other request body.

Pure ASGI (no BaseHTTPMiddleware), so streaming bodies and exceptions pass untouched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

from services.coordinator.api.problems import RETRY_AFTER_S, database_unavailable, problem
from services.coordinator.common.client_errors import AuthenticationError
from services.coordinator.common.security import bearer_secret
from services.coordinator.telemetry import Metrics

Scope = dict[str, Any]


class RequestMetrics:
    """Counts requests and times them, labelled by route template (not raw path).

    The labelled children are looked up once per (method, route, status) and kept: the labels
    are bounded (route templates, not paths), and ``labels()`` on every request cost a cached
    leaderboard read a few percent of its CPU.
    """

    def __init__(self, app: Any, *, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def tracking_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            key = (scope.get("method", ""), route, str(status["code"]))
            children = self._children.get(key)
            if children is None:
                children = self._children[key] = (
                    self.metrics.requests.labels(method=key[0], route=route, status=key[2]),
                    self.metrics.latency.labels(method=key[0], route=route),
                )
            children[0].inc()
            children[1].observe(time.perf_counter() - started)


class UploadLimit:
    """Refuses an upload to ``path`` without a Content-Length (411), above ``limit`` (413) or
    without a valid token (401) before its body is read; the route re-checks the bytes it
    actually received, and authenticates again.

    FastAPI reads a multipart body whole before it resolves a route's dependencies, so
    without this gate anyone could make the server read (and spool to disk) a 50 MB upload
    before being told they have no token. ``authenticate`` takes the bearer secret (or
    ``None``) and raises :class:`AuthenticationError`; it runs in a worker thread. The header
    is read by :func:`~services.coordinator.common.security.bearer_secret`, as the route reads
    it, so the gate never refuses a header the route would accept.
    """

    def __init__(
        self, app: Any, *, path: str, limit: int, authenticate: Callable[[str | None], None] | None = None
    ) -> None:
        self.app, self.path, self.limit, self.authenticate = app, path, limit, authenticate

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["path"] == self.path and scope["method"] == "POST":
            headers = dict(scope.get("headers") or [])
            length = headers.get(b"content-length")
            response = None
            if length is None or not length.isdigit():
                response = problem(
                    411,
                    slug="length-required",
                    field="Content-Length",
                    detail="An upload needs a Content-Length header.",
                    instance=self.path,
                )
            elif int(length) > self.limit + 64 * 1024:  # room for the form's other fields
                response = problem(
                    413,
                    slug="payload-too-large",
                    field="file",
                    instance=self.path,
                    detail=f"The upload is {int(length)} bytes; bundles may be at "
                    f"most {self.limit} bytes (NEVIS_BUNDLE_MAX_BYTES).",
                )
            if response is None and self.authenticate is not None:
                response = await self._authenticate(headers.get(b"authorization"))
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _authenticate(self, header: bytes | None) -> Any:
        """A 401 (or 503) problem if the Authorization header does not authenticate, else None."""
        secret = bearer_secret(header.decode("latin-1") if header is not None else None)
        try:
            await anyio.to_thread.run_sync(self.authenticate, secret)
        except AuthenticationError as exc:
            return problem(
                401,
                slug="unauthenticated",
                detail=str(exc),
                field=exc.field,
                instance=self.path,
                headers={"WWW-Authenticate": "Bearer", "Connection": "close"},
            )
        except Exception as exc:
            if not database_unavailable(exc):
                raise
            return problem(
                503,
                slug="database-unavailable",
                instance=self.path,
                detail="The database is unavailable; try again shortly.",
                headers={"Retry-After": str(RETRY_AFTER_S), "Connection": "close"},
            )
        return None


class BodyLimit:
    """Refuses a request body above ``limit`` bytes with 413 before the app sees a byte of it.

    A Content-Length above the limit is refused at once, unread; a body without one (chunked)
    is read up to the limit and refused as soon as it passes it. A body within the limit is
    handed to the app whole, so nothing (neither JSON parsing nor authentication) runs on a
    body that is too large. ``exempt`` paths (uploads) have a limit of their own.
    """

    METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

    def __init__(self, app: Any, *, limit: int, exempt: tuple[str, ...] = ()) -> None:
        self.app, self.limit, self.exempt = app, limit, frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] not in self.METHODS or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._refuse(scope, receive, send, f"is {int(length)} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send, f"passed {self.limit} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return await receive()  # after the body: wait for the disconnect
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Callable, send: Callable, what: str) -> None:
        response = problem(
            413,
            slug="payload-too-large",
            field="body",
            instance=scope["path"],
            detail=f"The request body {what}; a request body may be at most {self.limit} bytes (NEVIS_MAX_JSON_BYTES).",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


__all__ = ["BodyLimit", "RequestMetrics", "UploadLimit"]
