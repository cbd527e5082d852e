"""Two small ASGI middlewares: request metrics, and a Content-Length gate on uploads.

Pure ASGI (no BaseHTTPMiddleware), so streaming bodies and exceptions pass untouched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from services.coordinator.api.problems import problem
from services.coordinator.metrics import Metrics

Scope = dict[str, Any]


class RequestMetrics:
    """Counts requests and times them, labelled by route template (not raw path)."""

    def __init__(self, app: Any, *, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

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
            method = scope.get("method", "")
            self.metrics.requests.labels(method=method, route=route, status=str(status["code"])).inc()
            self.metrics.latency.labels(method=method, route=route).observe(time.perf_counter() - started)


class UploadLimit:
    """Refuses an upload to ``path`` without a Content-Length (411) or above ``limit`` (413)
    before its body is read; the route re-checks the bytes it actually received."""

    def __init__(self, app: Any, *, path: str, limit: int) -> None:
        self.app, self.path, self.limit = app, path, limit

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["path"] == self.path and scope["method"] == "POST":
            headers = dict(scope.get("headers") or [])
            length = headers.get(b"content-length")
            response = None
            if length is None or not length.isdigit():
                response = problem(411, slug="length-required", field="Content-Length",
                                   detail="An upload needs a Content-Length header.",
                                   instance=self.path)
            elif int(length) > self.limit + 64 * 1024:  # room for the form's other fields
                response = problem(413, slug="payload-too-large", field="file", instance=self.path,
                                   detail=f"The upload is {int(length)} bytes; bundles may be at "
                                          f"most {self.limit} bytes (NEVIS_BUNDLE_MAX_BYTES).")
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["RequestMetrics", "UploadLimit"]
