"""Liveness, readiness and Prometheus metrics (no token needed; no /v1 prefix)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import text

from services.coordinator.api.deps import MetricsDep, SessionDep
from services.coordinator.api.problems import problem
from services.coordinator.metrics import CONTENT_TYPE
from services.store.db.migrate import head_revision

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database is reachable and current; the scheduler runs")
def readyz(request: Request, session: SessionDep) -> Response:
    checks: dict[str, str] = {}
    try:
        revision = session.execute(text("SELECT version_num FROM alembic_version")).scalar()
        checks["database"] = "ok" if revision == head_revision() else (
            f"at revision {revision}, code expects {head_revision()}: run `nevis db upgrade`")
    except Exception as exc:  # noqa: BLE001 - readiness reports, it does not raise
        checks["database"] = f"unreachable: {' '.join(str(exc).split())[:200]}"
    scheduler = request.app.state.scheduler
    if scheduler is not None:
        checks["scheduler"] = "ok" if scheduler.running else "not running"
    failing = {k: v for k, v in checks.items() if v != "ok"}
    if failing:
        return problem(503, slug="not-ready", detail="; ".join(f"{k}: {v}" for k, v in failing.items()),
                       instance="/readyz", checks=checks)
    return JSONResponse({"status": "ready", "checks": checks})


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=CONTENT_TYPE)


__all__ = ["healthz", "metrics", "readyz", "router"]
