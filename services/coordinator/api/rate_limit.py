"""Per-caller rate limits on writes: one client cannot flood the database or the scheduler.

Every POST, PUT, PATCH and DELETE counts against the limits of ``NEVIS_WRITE_RATE`` (for
example ``120/minute;2000/hour``, moving windows, from the ``limits`` package), keyed by who
the caller is: the user of a valid bearer token (``user:<id>``, so that neither spellings of
one header nor a user's many tokens get separate budgets), or else, for a missing, malformed,
unknown, revoked or expired token, the client's address (so that a flood of made-up tokens
from one address shares one budget). Telling the two apart costs one indexed lookup by the
token's hash, in a worker thread, before any body is read; a request over a limit is then a
429 ``rate-limited`` with ``Retry-After``. Counts live in this replica's memory: with N
replicas behind a balancer a client gets at most N times the limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import anyio
from fastapi import FastAPI
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.types import Scope

from services.coordinator.api.deps import token_identity
from services.coordinator.api.problems import database_unavailable, problem
from services.coordinator.api.routes import problems
from services.coordinator.common import security
from services.coordinator.common.validation import parse_rate

Identify = Callable[[str], str | None]
"""A bearer secret to its caller's key, or ``None`` when the token does not work."""

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class WriteRateLimit:
    """ASGI middleware: refuses writes over the caller's rate with a 429."""

    def __init__(self, app: Any, *, rate: str, identify: Identify | None = None) -> None:
        """``identify`` defaults to a lookup in the serving app's database (its
        ``state.sessions``, found on the first request)."""
        self.app = app
        self.items = parse_rate(rate)
        self.rate = rate
        self.limiter = MovingWindowRateLimiter(MemoryStorage())
        self.identify = identify

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        key = await self._caller(scope)
        for item in self.items:
            if not self.limiter.hit(item, key):
                reset = self.limiter.get_window_stats(item, key).reset_time
                wait = max(1, math.ceil(reset - time.time()))
                response = problem(
                    429,
                    slug="rate-limited",
                    instance=scope["path"],
                    detail=f"Too many writes: at most {item} per caller (NEVIS_WRITE_RATE="
                    f"{self.rate}); retry in {wait} seconds.",
                    headers={"Retry-After": str(wait)},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _caller(self, scope: Scope) -> str:
        """``user:<id>`` for a working token, else ``address:<client host>``."""
        header = dict(scope.get("headers") or []).get(b"authorization")
        secret = security.bearer_secret(header.decode("latin-1") if header else None)
        identify = self._identify_for(scope)
        if secret and identify is not None and security.looks_like_token(secret):
            try:
                who = await anyio.to_thread.run_sync(identify, secret)
            except Exception as exc:
                if not database_unavailable(exc):
                    raise
                who = None  # the route answers 503; meanwhile the address's budget counts it
            if who:
                return who
        client = scope.get("client") or ("unknown", 0)
        return f"address:{client[0]}"

    def _identify_for(self, scope: Scope) -> Identify | None:
        """The lookup to use: the one given, or one on the app's sessions (made once)."""
        if self.identify is None:
            sessions = getattr(getattr(scope.get("app"), "state", None), "sessions", None)
            if sessions is not None:
                self.identify = token_identity(sessions)
        return self.identify


def document_rate_limits(app: FastAPI) -> None:
    """Add the 429 to every write operation of ``app``'s OpenAPI document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build()
        entry = problems(429)[429]
        for operations in document.get("paths", {}).values():
            for method, operation in operations.items():
                if method.upper() in WRITE_METHODS:
                    operation.setdefault("responses", {}).setdefault(
                        "429",
                        {
                            "description": "A problem (RFC 9457): over a limit or quota.",
                            "content": entry["content"],
                            "headers": {
                                "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}
                            },
                        },
                    )
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["WRITE_METHODS", "Identify", "WriteRateLimit", "document_rate_limits"]
