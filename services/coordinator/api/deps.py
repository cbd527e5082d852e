"""Shared dependencies of the routes, as ``Annotated`` aliases.

The app keeps its settings, session factory, object store and metrics on ``app.state``
(built once by :func:`services.coordinator.app.create_app`); each request gets its own
session, closed (and rolled back unless committed) when the request ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from services.coordinator.api.fields import DbCount
from services.coordinator.core.config import CoordinatorSettings
from services.coordinator.core.errors import PermissionDeniedError
from services.coordinator.crud import users as crud_users
from services.coordinator.metrics import Metrics
from services.store.db import declare_writer
from services.store.db.models_coordinator import User
from services.store.objects import ObjectStore


def get_settings(request: Request) -> CoordinatorSettings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.sessions() as session:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            declare_writer(session)  # SQLite: wait for other writers instead of failing
        yield session


def get_store(request: Request) -> ObjectStore:
    return request.app.state.store


def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


SettingsDep = Annotated[CoordinatorSettings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
StoreDep = Annotated[ObjectStore, Depends(get_store)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]

bearer = HTTPBearer(auto_error=False, scheme_name="ApiToken",
                    description="An API token: `nevis tokens create` or POST /v1/tokens.")


def get_current_user(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> User:
    return crud_users.authenticate(session, secret=credentials.credentials if credentials else None)


CurrentUser = Annotated[User, Depends(get_current_user)]


def get_admin(user: CurrentUser) -> User:
    if user.role != "admin":
        raise PermissionDeniedError(
            f"User {user.name!r} has role {user.role!r}; this route needs role 'admin'.",
            field="Authorization")
    return user


AdminUser = Annotated[User, Depends(get_admin)]
Limit = Annotated[int, Query(ge=1, le=100, description="Page size.")]
Offset = Annotated[DbCount, Query(description="Items to skip.")]


__all__ = [
    "AdminUser", "CurrentUser", "Limit", "MetricsDep", "Offset", "SessionDep", "SettingsDep",
    "StoreDep", "get_admin", "get_current_user", "get_metrics", "get_session", "get_settings",
    "get_store",
]
