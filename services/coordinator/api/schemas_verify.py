"""Bodies of the verification routes (``/v1/submissions/{id}/verify``) and the ``verification``
object of a submission's detail (:mod:`services.store.runs.verdicts` builds them)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from services.coordinator.api.fields import StrictInt
from services.coordinator.api.schemas import Request
from services.store.runs.verification import MAX_SEEDS


class VerifyCreate(Request):
    seeds: StrictInt = Field(default=2, ge=1, le=MAX_SEEDS, description="Replays to run, each with a new seed.")


class ReplayOut(BaseModel):
    id: int
    seed: int
    request: int = Field(description="Which verify request of the original made it (1, 2, ...).")
    status: str | None = Field(description="The replay's status when last judged; null for an earlier request's.")
    error: float | None = Field(description="The replay's E; null until it finished with every task scored.")
    inside: bool | None = Field(description="Whether E fell inside the original's interval; null until judged.")
    learner_digest: str = Field(description="What both ran: bundle sha256, image or entry point.")


class JudgedIntervalOut(BaseModel):
    low: float
    high: float
    level: float


class VerificationOut(BaseModel):
    submission_id: int
    verdict: str | None = Field(
        description="pending (replays not ended), verified, not_reproduced or inconclusive; null: never verified."
    )
    mark: str | None = Field(description="What its leaderboard row shows: verified, not_reproduced or null.")
    interval: JudgedIntervalOut | None = Field(
        description="The original's interval of E on this benchmark it was judged by."
    )
    replays: list[ReplayOut]
    note: str | None
    replay_of: int | None = Field(description="This submission is a replay of that one (no leaderboard row).")


__all__ = ["JudgedIntervalOut", "ReplayOut", "VerificationOut", "VerifyCreate"]
