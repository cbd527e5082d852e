"""What every dashboard page shares: the templates and their number filters, one render, the
cache a shared page is kept in per reader, and the CSV download.

Pages are rendered once per database fingerprint and reader (see the leaderboard API's cache); a
reader's own view (with private rows) is ``Cache-Control: private``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from services.coordinator.api.answers import answer_cache, shared_slot
from services.store.runs.visibility import ANONYMOUS, Viewer

HERE = Path(__file__).parent


def cpu_seconds_text(seconds: float | None) -> str:
    """CPU seconds as the pages show them: two significant digits below a second, so a short
    but measured time never reads as 0."""
    if seconds is None:
        return "–"
    return f"{seconds:,.1f}" if seconds >= 1 else f"{seconds:.2g}"


templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["sci"] = lambda v: "–" if v is None else f"{v:.3e}"
templates.env.filters["err"] = lambda v: "–" if v is None else f"{v:.4f}"
templates.env.filters["secs"] = cpu_seconds_text
templates.env.filters["when"] = lambda v: "–" if v is None else v.strftime("%Y-%m-%d %H:%M")
Text = Annotated[str | None, Query(max_length=100)]
Since = Annotated[date | None, Query(description="Only submissions created on or after this day (UTC).")]


def midnight(day: date | None) -> datetime | None:
    return None if day is None else datetime.combine(day, time.min, tzinfo=UTC)


def html_page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(render_page(template, **context), status_code=status)


def render_page(template: str, **context: Any) -> str:
    return templates.get_template(template).render(**context)


async def cached_page(
    request: Request, key: Any, viewer: Viewer, render: Callable[[Session], tuple[int, str]]
) -> HTMLResponse:
    """A page rendered once per database fingerprint and reader (see the leaderboard API's
    cache); a reader's own view (with private rows) is ``Cache-Control: private``."""
    found = await answer_cache(request.app).answer(
        request.app.state.sessions, (key, viewer), render, shared_slot(request, viewer)
    )
    status, html = found
    control = "no-cache" if viewer == ANONYMOUS else "private, no-cache"
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": control, "Vary": "Authorization"})


def csv_download(text: str, filename: str) -> PlainTextResponse:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename)
    return PlainTextResponse(
        text, media_type="text/csv", headers={"Content-Disposition": f'attachment; filename="{safe}"'}
    )


__all__ = [
    "HERE",
    "Since",
    "Text",
    "cached_page",
    "cpu_seconds_text",
    "csv_download",
    "html_page",
    "midnight",
    "render_page",
    "templates",
]
