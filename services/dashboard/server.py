"""The whole server: the coordinator's app with the dashboard mounted (``nevis serve``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.coordinator.app import create_app
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.warm_up import TOP
from services.dashboard import log_pages
from services.dashboard.pages import router

WARM_PATHS = ("/", f"/submissions/{TOP}")
"""The pages a start warms (``create_app(warm_up=True)``): the leaderboard and its top submission's."""


def create_server_app(settings: CoordinatorSettings, **options: Any) -> FastAPI:
    """:func:`services.coordinator.app.create_app` plus the dashboard's pages at ``/``."""
    app = create_app(settings, **options)
    app.include_router(router)
    app.include_router(log_pages.router)
    app.state.warm_paths.extend(WARM_PATHS)
    return app


__all__ = ["WARM_PATHS", "create_server_app"]
