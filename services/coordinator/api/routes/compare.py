"""Paired comparison of two runs on the same stream version: ΔE with its bootstrap interval,
Δ cFLOP, and the tasks that differ beyond noise (:mod:`services.store.runs.uncertainty`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from services.coordinator.api.deps import SessionDep, StoreDep
from services.coordinator.api.fields import DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.routes.leaderboard import Reader
from services.coordinator.api.schemas_uncertainty import CompareOut
from services.store.runs.uncertainty import compare
from services.store.runs.visibility import check_readable

router = APIRouter(prefix="/v1/compare", tags=["leaderboard"], responses=problems(401, 422, 503))


@router.get("", response_model=CompareOut,
            summary="Run a against run b: per-task differences, the paired interval of ΔE, Δ cFLOP")
def read_compare(session: SessionDep, store: StoreDep, viewer: Reader,
                 a: Annotated[DbId, Query(description="The first run (ΔE = E(a) − E(b)).")],
                 b: Annotated[DbId, Query(description="The second run.")]) -> CompareOut:
    check_readable(session, viewer, [a, b])
    return CompareOut.model_validate(compare(session, store, a=a, b=b).to_dict())


__all__ = ["router"]
