"""The server's warm-up at start: the reads a first visitor makes, made by the server itself
before it accepts connections, so that the first real read costs what a later one does.

Why: a fresh process paid, on its first leaderboard read, for work done once per process
(issue 48: 743 ms against 48-55 ms for reads just after a commit). Profiled on 1,000 × 106
(py-spy, one cold read): ``scipy.stats`` imported for the seeds' Student t intervals (the
largest share; now the lighter ``scipy.special``, still imported here), FastAPI building its routes' state on the first match, anyio's thread-pool
backend imported on the first hop, SQLAlchemy compiling each statement, the pool opening its
connection, pydantic building serialisers, plotly's figure classes on a submission page's
first figure, and the answer itself rendered. The warm-up sends anonymous ``GET`` requests for
the registered paths (``app.state.warm_paths``: the API's default leaderboard page and Pareto
front here, the dashboard's front page and top submission's page where the dashboard is
mounted) through the whole app in this process (no socket), so every one of those is paid at
start, and their answers stay in the answer cache (:mod:`services.coordinator.api.answers`) for
the first readers while the database does not change.

A warm-up never fails a start: an error or a status other than 200 is logged and recorded
(``app.state.warm_up``, a :class:`WarmUp`). The start waits for it at most :data:`WAIT_S`
(a liveness probe waits 10 s before its first check, then tolerates 3 failures 20 s apart);
a slower one goes on in the background while the server serves. Warm-up requests are counted
in the request metrics like any other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

WAIT_S = 10.0
"""How long a start waits for its warm-up before it serves anyway (the rest goes on meanwhile):
the liveness probe's initial delay (helm/nevis/values.yaml). Measured 2026-12-07 on 1,000 × 106
on PostgreSQL at load average 10 on 2 cores: 4.0 s for the four reads."""
API_PATHS = ("/v1/leaderboard", "/v1/leaderboard/front")
"""What the API warms: the default leaderboard page (first: it names the top submission) and the front."""
TOP = "{top}"
"""In a warm path: the id of the first submission on the default leaderboard page (the path is
skipped when the page is empty)."""
USER_AGENT = b"nevis-warm-up"

log = logging.getLogger(__name__)


@dataclass
class WarmUp:
    """What a start's warm-up did: each path's status (or why it was skipped) and seconds, and
    when it ended."""

    paths: tuple[str, ...]
    statuses: dict[str, int | str] = field(default_factory=dict)
    took: dict[str, float] = field(default_factory=dict)  # path -> seconds its read took
    seconds: float | None = None  # None while it runs
    error: str | None = None  # the first exception a read raised before it answered, if any

    @property
    def done(self) -> bool:
        return self.seconds is not None


async def get(app: Callable[..., Any], path: str) -> tuple[int, bytes]:
    """One anonymous ``GET`` of ``path`` (query string allowed) through the ASGI ``app``, in
    this process: the status and the body. An error the app raises after it answered (Starlette
    sends the 500, then raises it for the server to log; it is logged already) gives that answer."""
    route, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": route,
        "raw_path": route.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
        "state": {},
        "headers": [(b"host", b"localhost"), (b"user-agent", USER_AGENT)],
    }
    sent = False
    status = 0
    body: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.disconnect"}  # nothing waits on this reader

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    try:
        await app(scope, receive, send)
    except Exception:
        if not status:
            raise
    return status, b"".join(body)


def _top(status: int, body: bytes) -> int | None:
    """The first submission's id on a leaderboard answer, if it has one."""
    if status != 200:
        return None
    try:
        items = json.loads(body).get("items") or []
        return int(items[0]["submission_id"]) if items else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


async def warm(app: Callable[..., Any], record: WarmUp) -> WarmUp:
    """Read each of ``record.paths`` through ``app`` in turn, recording what each answered."""
    began = time.perf_counter()
    top: int | None = None
    for path in record.paths:
        if TOP in path:
            if top is None:
                record.statuses[path] = "skipped: the default leaderboard page is empty"
                continue
            path = path.replace(TOP, str(top))
        begin = time.perf_counter()
        try:
            status, body = await get(app, path)
        except Exception as exc:  # noqa: BLE001 - a warm-up never fails a start
            record.statuses[path] = f"failed: {type(exc).__name__}"
            record.error = record.error or f"{path}: {type(exc).__name__}: {exc}"
            continue
        finally:
            record.took[path] = time.perf_counter() - begin
        record.statuses[path] = status
        if path == API_PATHS[0]:
            top = _top(status, body)
    record.seconds = time.perf_counter() - began
    failing = {p: s for p, s in record.statuses.items() if s != 200 and not str(s).startswith("skipped")}
    if record.error or failing:
        log.warning("warm-up: %s in %.2f s (%s)", record.error or failing, record.seconds, record.statuses)
    else:
        log.info(
            "warm-up: %d reads in %.2f s (%s)",
            len(record.statuses),
            record.seconds,
            ", ".join(f"{p} {s:.2f} s" for p, s in record.took.items()),
        )
    return record


async def start(app: Any, paths: Sequence[str], wait_s: float | None = None) -> asyncio.Task[WarmUp]:
    """Start warming ``paths`` (recorded in ``app.state.warm_up``) and wait for it at most
    ``wait_s`` seconds (default :data:`WAIT_S`); the task, which the caller cancels at shutdown
    if it still runs."""
    record = app.state.warm_up = WarmUp(tuple(paths))
    task = asyncio.get_running_loop().create_task(warm(app, record))
    await asyncio.wait({task}, timeout=WAIT_S if wait_s is None else wait_s)
    return task


__all__ = ["API_PATHS", "TOP", "WAIT_S", "WarmUp", "get", "start", "warm"]
