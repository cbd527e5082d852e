"""Shared dependencies of the routes, as ``Annotated`` aliases.

The app keeps its settings, session factory, object store and metrics on ``app.state``
(built once by :func:`services.coordinator.app.create_app`); each request gets its own
session, closed (and rolled back unless committed) when the request ends.

The dependencies that only look something up on ``app.state`` are ``async``: FastAPI runs a
plain ``def`` dependency in a worker thread, a hop that cost a cached leaderboard read about a
tenth of its CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import HTTPConnection

from services.coordinator.api.fields import DbCount
from services.coordinator.common import security
from services.coordinator.common.client_errors import AuthenticationError, PermissionDeniedError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.crud import users as crud_users
from services.coordinator.telemetry import Metrics
from services.store.db import declare_writer
from services.store.db.models_coordinator import ApiToken, User
from services.store.objects import ObjectStore


async def get_settings(request: Request) -> CoordinatorSettings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.sessions() as session:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            declare_writer(session)  # SQLite: wait for other writers instead of failing
        yield session


async def get_sessions(request: Request) -> sessionmaker[Session]:
    """The session factory, for a route that must choose when its writer session starts."""
    return request.app.state.sessions


async def get_store(request: Request) -> ObjectStore:
    return request.app.state.store


async def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


SettingsDep = Annotated[CoordinatorSettings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
SessionsDep = Annotated[sessionmaker[Session], Depends(get_sessions)]
StoreDep = Annotated[ObjectStore, Depends(get_store)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]


class CanonicalBearer(HTTPBearer):
    """HTTPBearer that reads the header as :func:`security.bearer_secret` does (any case of
    the scheme, any whitespace), the reading the write rate limit keys on too."""

    async def __call__(self, request: HTTPConnection) -> HTTPAuthorizationCredentials | None:
        secret = security.bearer_secret(request.headers.get("Authorization"))
        return HTTPAuthorizationCredentials(scheme="Bearer", credentials=secret) if secret else None


bearer = CanonicalBearer(
    auto_error=False, scheme_name="ApiToken", description="An API token: `nevis tokens create` or POST /v1/tokens."
)


def get_current_token(
    session: SessionDep,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> ApiToken:
    """The token the request presents; routes that mint tokens need its expiry. Whatever the
    request's session mints descends from it and counts against NEVIS_MAX_TOKENS_PER_USER."""
    token = crud_users.authenticate_token(session, secret=credentials.credentials if credentials else None)
    crud_users.mint_for(session, token=token, max_tokens=settings.max_tokens_per_user)
    return token


CurrentToken = Annotated[ApiToken, Depends(get_current_token)]


def get_current_user(session: SessionDep, token: CurrentToken) -> User:
    user = session.get(User, token.user_id)
    if user is None:  # pragma: no cover - the foreign key cascades
        raise AuthenticationError("The API token is not valid (unknown, revoked or expired).", field="Authorization")
    return user


CurrentUser = Annotated[User, Depends(get_current_user)]


def authenticate_upload(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> User:
    """Authenticate in a short read-only session that is closed before the route runs.

    The bundle upload checks its archive before it writes anything, so it must not hold the
    request's writer session (on SQLite a BEGIN IMMEDIATE: the database write lock) while it
    spools and inspects the upload. The returned user is detached; the route reloads it in
    the session it writes with. The UploadLimit middleware has already authenticated the same
    header before the body was read; this check is the one the route relies on.
    """
    with request.app.state.sessions() as session:
        return crud_users.authenticate(session, secret=credentials.credentials if credentials else None)


UploadUser = Annotated[User, Depends(authenticate_upload)]


def token_checker(sessions: sessionmaker[Session]) -> Callable[[str | None], None]:
    """A check of a bearer secret in its own short session, for the upload gate middleware."""

    def check(secret: str | None) -> None:
        with sessions() as session:
            crud_users.authenticate(session, secret=secret)

    return check


def token_identity(sessions: sessionmaker[Session]) -> Callable[[str], str | None]:
    """Who a bearer secret stands for, as a rate-limit key (``user:<id>``), or ``None`` when it
    does not work; a quiet lookup in its own short session, for the write rate limit."""

    def identify(secret: str) -> str | None:
        with sessions() as session:
            token = crud_users.live_token(session, secret=secret)
            return None if token is None else f"user:{token.user_id}"

    return identify


def get_admin(user: CurrentUser) -> User:
    if user.role != "admin":
        raise PermissionDeniedError(
            f"User {user.name!r} has role {user.role!r}; this route needs role 'admin'.", field="Authorization"
        )
    return user


AdminUser = Annotated[User, Depends(get_admin)]
Limit = Annotated[int, Query(ge=1, le=100, description="Page size.")]
Offset = Annotated[DbCount, Query(description="Items to skip.")]


__all__ = [
    "AdminUser",
    "CanonicalBearer",
    "CurrentToken",
    "CurrentUser",
    "Limit",
    "MetricsDep",
    "Offset",
    "SessionDep",
    "SessionsDep",
    "SettingsDep",
    "StoreDep",
    "UploadUser",
    "authenticate_upload",
    "bearer",
    "get_admin",
    "get_current_token",
    "get_current_user",
    "get_metrics",
    "get_session",
    "get_sessions",
    "get_settings",
    "get_store",
    "token_checker",
    "token_identity",
]
