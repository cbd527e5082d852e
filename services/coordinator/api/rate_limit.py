"""Per-token rate limits on writes: one client cannot flood the database or the scheduler.

Every POST, PUT, PATCH and DELETE counts against the limits of ``NEVIS_WRITE_RATE`` (for
example ``120/minute;2000/hour``, moving windows, from the ``limits`` package), keyed by the
caller's bearer token (a hash of it: the secret is never kept) or, without one, by its
address. A request over a limit is a 429 ``rate-limited`` with ``Retry-After`` before any
body is read or any token is looked up. Counts live in this replica's memory: with N
replicas behind a balancer a client gets at most N times the limit.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.types import Scope

from services.coordinator.api.problems import problem
from services.coordinator.api.routes import problems
from services.coordinator.core.validation import parse_rate

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class WriteRateLimit:
    """ASGI middleware: refuses writes over the caller's rate with a 429."""

    def __init__(self, app: Any, *, rate: str) -> None:
        self.app = app
        self.items = parse_rate(rate)
        self.rate = rate
        self.limiter = MovingWindowRateLimiter(MemoryStorage())

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        key = _caller(scope)
        for item in self.items:
            if not self.limiter.hit(item, key):
                reset = self.limiter.get_window_stats(item, key).reset_time
                wait = max(1, math.ceil(reset - time.time()))
                response = problem(
                    429, slug="rate-limited", instance=scope["path"],
                    detail=f"Too many writes: at most {item} per caller (NEVIS_WRITE_RATE="
                           f"{self.rate}); retry in {wait} seconds.",
                    headers={"Retry-After": str(wait)})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _caller(scope: Scope) -> str:
    header = dict(scope.get("headers") or []).get(b"authorization")
    if header:
        return "token:" + hashlib.sha256(header).hexdigest()[:32]
    client = scope.get("client") or ("unknown", 0)
    return f"address:{client[0]}"


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
                    operation.setdefault("responses", {}).setdefault("429", {
                        "description": "A problem (RFC 9457): over a limit or quota.",
                        "content": entry["content"],
                        "headers": {"Retry-After": {"schema": {"type": "integer"},
                                                    "description": "Seconds to wait."}},
                    })
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["WRITE_METHODS", "WriteRateLimit", "document_rate_limits"]
