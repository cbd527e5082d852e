"""Problem details (RFC 9457) for every error: the one place errors become HTTP responses.

Each response is ``application/problem+json`` with ``type``, ``title``, ``status``,
``detail`` and, where one input is at fault, ``field`` (a dotted path such as
``budget.trials`` or a header name such as ``Idempotency-Key``); request validation errors
also list every problem under ``errors``. Bad input is always a 4xx: only a bug is a 500.
A database that is down, locked or read-only is a 503 ``database-unavailable`` with
``Retry-After``. No message echoes more than a few hundred characters of what a client sent
(:func:`clip`), and none can fail to encode (a lone surrogate in a JSON key is escaped).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.coordinator.common.client_errors import (
    AuthenticationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    QuotaExceededError,
)
from services.coordinator.common.validation import ECHO_MAX
from services.core.errors import BudgetError, ConfigError, DatabaseError, ManifestError, NevisError, UnknownNameError

log = logging.getLogger("nevis.api")
MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "urn:nevis:problem:"
RETRY_AFTER_S = 5
"""What a 503 ``database-unavailable`` tells a client to wait (``Retry-After``), in seconds."""
DETAIL_MAX = 1000
"""The longest ``detail`` or message a problem carries; longer ones are cut."""
# SQLSTATE classes of a server that cannot serve now, not of a bad statement: connection
# exceptions (08), insufficient resources (53), operator intervention (57P), and a
# read-only transaction (25006: a standby, or default_transaction_read_only).
_UNAVAILABLE_SQLSTATES = ("08", "53", "57P", "25006")

# Most specific first: the first class an error is an instance of decides.
_STATUS: tuple[tuple[type[BaseException], int, str], ...] = (
    (InvalidInputError, 422, "invalid-input"),
    (AuthenticationError, 401, "unauthenticated"),
    (PermissionDeniedError, 403, "forbidden"),
    (NotFoundError, 404, "not-found"),
    (ConflictError, 409, "conflict"),
    (QuotaExceededError, 429, "quota-exceeded"),
    (PayloadTooLargeError, 413, "payload-too-large"),
    (UnknownNameError, 422, "unknown-name"),
    (BudgetError, 422, "invalid-input"),
    (ManifestError, 422, "invalid-input"),
    (DatabaseError, 503, "database-unavailable"),
    (ConfigError, 503, "misconfigured"),
    (ValueError, 422, "invalid-input"),
)


def clip(text: str, limit: int = DETAIL_MAX) -> str:
    """``text`` cut to ``limit`` characters, lone surrogates escaped (JSON must encode it)."""
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def problem(
    status: int,
    *,
    slug: str,
    detail: str,
    field: str | None = None,
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem-details response."""
    body: dict[str, Any] = {
        "type": TYPE_BASE + slug if slug != "about:blank" else slug,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": clip(detail),
    }
    if field is not None:
        body["field"] = clip(field, ECHO_MAX)
    if instance is not None:
        body["instance"] = clip(instance, 2 * ECHO_MAX)
    body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers, media_type=MEDIA_TYPE)


async def _nevis_error(request: Request, exc: Exception) -> JSONResponse:
    status, slug = 400, "bad-request"
    for cls, code, name in _STATUS:
        if isinstance(exc, cls):
            status, slug = code, name
            break
    field = exc.field if isinstance(exc, NevisError) else None
    headers: dict[str, str] = {}
    if isinstance(exc, AuthenticationError):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, QuotaExceededError) and exc.retry_after_s:
        headers["Retry-After"] = str(exc.retry_after_s)
    if slug == "database-unavailable":
        headers["Retry-After"] = str(RETRY_AFTER_S)
    if status >= 500:
        log.error("%s %s: %s", request.method, request.url.path, exc)
    return problem(status, slug=slug, detail=str(exc), field=field, instance=request.url.path, headers=headers or None)


def _describe(error: dict[str, Any]) -> dict[str, str]:
    """Field and message of one validation error. A domain error raised while validating (a
    budget's :class:`BudgetError`) brings its own message and the field it carries."""
    if error.get("type") == "json_invalid":
        return {"field": "body", "message": error.get("msg", "invalid JSON")}
    loc = tuple(error.get("loc", ()))
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, NevisError):
        field = _field_of((*loc, cause.field) if cause.field else loc)
        return {"field": field, "message": clip(str(cause), 2 * ECHO_MAX + 200)}
    field = _field_of(loc)
    message = clip(str(error.get("msg", "invalid")), 2 * ECHO_MAX)
    return {"field": field, "message": f"The '{field}' is not valid: {message}."}


def _field_of(loc: tuple[Any, ...]) -> str:
    """``('body', 'budget', 'trials')`` → ``budget.trials``; ``('header', 'x')`` → ``x``.

    A part is a client's JSON key when the key is unknown, so each is cut to 100 characters
    and the whole to :data:`ECHO_MAX`.
    """
    parts = [clip(str(p), 100) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:] or parts
    return clip(".".join(parts), ECHO_MAX)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [_describe(e) for e in exc.errors()]
    first = errors[0] if errors else {"field": "body", "message": "The 'body' is not valid."}
    detail = first["message"]
    if len(errors) > 1:
        detail += f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} listed in 'errors'.)"
    return problem(
        422, slug="invalid-input", detail=detail, field=first["field"], instance=request.url.path, errors=errors
    )


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400:
        # The framework's only 400: a body it cannot parse (JSON that is not UTF-8, a broken
        # multipart form). Malformed JSON is a 422 naming the body; so is this.
        cause = exc.__cause__ or exc.__context__
        reason = clip(" ".join(str(cause or exc.detail).split()), 2 * ECHO_MAX)
        message = f"The 'body' cannot be parsed: {reason}."
        return problem(
            422,
            slug="invalid-input",
            detail=message,
            field="body",
            instance=request.url.path,
            errors=[{"field": "body", "message": message}],
        )
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"No route {request.url.path}; see /docs for the API."
    return problem(
        exc.status_code,
        slug="about:blank",
        detail=detail,
        instance=request.url.path,
        headers=getattr(exc, "headers", None),
    )


def database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot serve now (down, locked, read-only, out of
    connections), as opposed to a statement that is wrong (a bug)."""
    if isinstance(
        exc, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError | sa_exc.DisconnectionError
    ):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        sqlstate = getattr(exc.orig, "sqlstate", None) or ""
        return sqlstate.startswith(_UNAVAILABLE_SQLSTATES)
    return False


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    if not database_unavailable(exc):
        raise exc  # a wrong statement is a bug: the 500 handler logs it
    reason = " ".join(str(getattr(exc, "orig", None) or exc).split())[:300]
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, reason)
    return problem(
        503,
        slug="database-unavailable",
        detail=f"The database cannot serve this request right now (it is unreachable, "
        f"locked or read-only); retry in {RETRY_AFTER_S} seconds.",
        instance=request.url.path,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(
        500, slug="internal-error", detail="An internal error occurred; it has been logged.", instance=request.url.path
    )


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(NevisError, _nevis_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for cls in (sa_exc.DBAPIError, sa_exc.TimeoutError, sa_exc.DisconnectionError):
        app.add_exception_handler(cls, _database_error)
    app.add_exception_handler(Exception, _unexpected)


__all__ = [
    "DETAIL_MAX",
    "MEDIA_TYPE",
    "RETRY_AFTER_S",
    "TYPE_BASE",
    "clip",
    "database_unavailable",
    "install",
    "problem",
]
