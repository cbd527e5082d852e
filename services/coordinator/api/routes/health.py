"""Liveness, readiness and Prometheus metrics (no token needed; no /v1 prefix)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, text

from services.coordinator.api.deps import MetricsDep, SessionDep
from services.coordinator.api.problems import RETRY_AFTER_S, problem
from services.coordinator.api.routes import problems
from services.coordinator.telemetry import CONTENT_TYPE
from services.store.db.engine import SQLITE_BUSY_TIMEOUT_MS, WRITE_INTENT
from services.store.db.migrate import head_revision

router = APIRouter(tags=["health"])
WRITE_PROBE_TIMEOUT_MS = 2000
"""How long the readiness write probe waits for a lock before it calls the database busy."""


@router.get("/healthz", summary="The process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses=problems(503),
    summary="The database is reachable, current and accepts writes; the scheduler runs",
)
def readyz(request: Request, session: SessionDep) -> Response:
    checks: dict[str, str] = {}
    try:
        revision = session.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except Exception as exc:  # noqa: BLE001 - readiness reports, it does not raise
        checks["database"] = f"unreachable: {_one_line(exc)}"
    else:
        checks["database"] = (
            "ok"
            if revision == head_revision()
            else (f"at revision {revision}, code expects {head_revision()}: run `nevis db upgrade`")
        )
    if checks["database"] == "ok":
        session.rollback()  # end the read before the probe writes
        try:
            write_probe(session.get_bind())
        except Exception as exc:  # noqa: BLE001 - readiness reports, it does not raise
            checks["database"] = f"refuses writes: {_one_line(exc)}"
    scheduler = request.app.state.scheduler
    if scheduler is not None:
        checks["scheduler"] = "ok" if scheduler.running else "not running"
    failing = {k: v for k, v in checks.items() if v != "ok"}
    if failing:
        return problem(
            503,
            slug="not-ready",
            detail="; ".join(f"{k}: {v}" for k, v in failing.items()),
            instance="/readyz",
            checks=checks,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return JSONResponse({"status": "ready", "checks": checks})


def write_probe(engine: Engine) -> None:
    """Raise unless the database accepts a write now: a no-op UPDATE, rolled back.

    On SQLite the transaction begins IMMEDIATE (it takes the write lock) and waits at most
    :data:`WRITE_PROBE_TIMEOUT_MS` for another writer; a read-only file or a lock held longer
    fails it. On PostgreSQL a read-only server (a standby) or a row lock held longer fails it.
    """
    with engine.connect() as connection:
        sqlite = engine.dialect.name == "sqlite"
        raw = connection.connection.driver_connection  # before BEGIN: set the wait first
        if sqlite:
            raw.execute(f"PRAGMA busy_timeout = {WRITE_PROBE_TIMEOUT_MS}")
        try:
            connection.execution_options(**{WRITE_INTENT: True})
            if not sqlite:
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = {WRITE_PROBE_TIMEOUT_MS}")
                connection.exec_driver_sql(f"SET LOCAL statement_timeout = {2 * WRITE_PROBE_TIMEOUT_MS}")
            connection.execute(text("UPDATE alembic_version SET version_num = version_num"))
        finally:
            connection.rollback()
            if sqlite:
                raw.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=CONTENT_TYPE)


__all__ = ["WRITE_PROBE_TIMEOUT_MS", "healthz", "metrics", "readyz", "router", "write_probe"]
