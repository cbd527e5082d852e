"""The whole server: the coordinator's app with the dashboard mounted (``nevis serve``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.coordinator.app import create_app
from services.coordinator.common.config import CoordinatorSettings
from services.dashboard import log_pages
from services.dashboard.pages import router


def create_server_app(settings: CoordinatorSettings, **options: Any) -> FastAPI:
    """:func:`services.coordinator.app.create_app` plus the dashboard's pages at ``/``."""
    app = create_app(settings, **options)
    app.include_router(router)
    app.include_router(log_pages.router)
    return app


__all__ = ["create_server_app"]
