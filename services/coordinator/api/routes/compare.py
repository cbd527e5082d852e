"""Run a against run b (paired), or a's seeds against b's, on one stream version: ΔE with its
interval on this benchmark, P(a < b) with seeds, Δ cFLOP, and the tasks flagged as differing
beyond noise under Holm's correction (:mod:`services.store.runs.comparison`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from services.coordinator.api.deps import SessionDep, StoreDep
from services.coordinator.api.fields import DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.routes.leaderboard import Reader
from services.coordinator.api.schemas_uncertainty import CompareOut
from services.store.runs.comparison import compare
from services.store.runs.visibility import check_readable

MAX_RUNS = 20  # seeds a side: each one's predictions are resampled

router = APIRouter(prefix="/v1/compare", tags=["leaderboard"], responses=problems(401, 422, 503))


@router.get(
    "",
    response_model=CompareOut,
    summary="Run(s) a against run(s) b: per-task differences and flags, ΔE with its interval, Δ cFLOP",
)
def read_compare(
    session: SessionDep,
    store: StoreDep,
    viewer: Reader,
    a: Annotated[
        list[DbId],
        Query(
            max_length=MAX_RUNS,
            description=(
                "The first run (ΔE = E(a) − E(b)); repeat (a=1&a=2) to compare seeds: two runs or more "
                "on each side give a bootstrap over seeds and examples and P(a < b)."
            ),
        ),
    ],
    b: Annotated[list[DbId], Query(max_length=MAX_RUNS, description="The second run (or runs).")],
) -> CompareOut:
    check_readable(session, viewer, [*a, *b])
    return CompareOut.model_validate(compare(session, store, a=a, b=b).to_dict())


__all__ = ["router"]
