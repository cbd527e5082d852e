"""The FastAPI application: :func:`create_app` wires settings, database, store, metrics,
routes, problem details and (optionally) the scheduler.

Nothing is built at import time: ``create_app`` takes the settings, so tests and
``nevis serve`` each build their own app. The scheduler runs in the server process when
asked (``nevis serve`` does by default); any number of replicas may run it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.coordinator import warm_up as warming
from services.coordinator.api import problems
from services.coordinator.api.deps import token_checker
from services.coordinator.api.middleware import BodyLimit, RequestMetrics, UploadLimit
from services.coordinator.api.rate_limit import WriteRateLimit, document_rate_limits
from services.coordinator.api.routes import (
    compare,
    health,
    leaderboard,
    learners,
    logs,
    refreshes,
    streams,
    submissions,
    users,
    verify,
)
from services.coordinator.api.shared_answers import SharedAnswers
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.scheduler.loop import Scheduler
from services.coordinator.telemetry import Metrics
from services.store.db import make_engine, session_factory
from services.store.objects import open_store

API_VERSION = "1.0.0"
DESCRIPTION = """Submit never-ending learners, watch them run the NEVIS'22 protocol task by
task, and read their error (E) and compute (cFLOP) back. Every error is a problem-details
document (RFC 9457) naming the offending field."""


def create_app(
    settings: CoordinatorSettings,
    *,
    run_scheduler: bool = False,
    scheduler: Scheduler | None = None,
    warm_up: bool = False,
) -> FastAPI:
    """Build the app.

    Args:
        settings: the process's coordinator settings.
        run_scheduler: start a scheduler (with the configured backend) for the app's
            lifetime.
        scheduler: a scheduler to start instead of building one.
        warm_up: read ``app.state.warm_paths`` through the app at start, before it serves
            (:mod:`services.coordinator.warm_up`; ``nevis serve`` does), so that the first
            reader does not pay the process's first-read costs.
    """
    engine = make_engine(settings.database_url)
    sessions = session_factory(engine)
    metrics = Metrics()
    metrics.watch_database(sessions)
    if run_scheduler and scheduler is None:
        from services.coordinator.backends import make_backend  # noqa: PLC0415 - Ray and kubectl clients: schedulers only

        scheduler = Scheduler(settings, backend=make_backend(settings), sessions=sessions, metrics=metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if scheduler is not None:
            scheduler.start()
        warming_task = await warming.start(app, app.state.warm_paths) if warm_up else None
        try:
            yield
        finally:
            if warming_task is not None and not warming_task.done():
                warming_task.cancel()
            if scheduler is not None:
                scheduler.stop()
            engine.dispose()

    app = FastAPI(title="NEVIS coordinator", version=API_VERSION, description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.sessions = sessions
    app.state.metrics = metrics
    app.state.scheduler = scheduler
    app.state.warm_paths = list(warming.API_PATHS)  # the dashboard adds its pages
    app.state.warm_up = None  # a warming.WarmUp once a warm-up starts
    app.state.store = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
    for module in (health, users, learners, submissions, verify, logs, streams, leaderboard, compare, refreshes):
        app.include_router(module.router)
    problems.install(app)
    app.add_middleware(
        UploadLimit, path=learners.BUNDLE_PATH, limit=settings.bundle_max_bytes, authenticate=token_checker(sessions)
    )
    app.add_middleware(BodyLimit, limit=settings.max_json_bytes, exempt=(learners.BUNDLE_PATH,))
    app.add_middleware(WriteRateLimit, rate=settings.write_rate)  # before any body or token
    app.add_middleware(SharedAnswers, server=app)  # anonymous reads kept as sent, counted
    app.add_middleware(RequestMetrics, metrics=metrics)
    document_rate_limits(app)
    return app


__all__ = ["API_VERSION", "DESCRIPTION", "create_app"]
