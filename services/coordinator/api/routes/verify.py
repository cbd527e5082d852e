"""Verified rows: an operator replays a finished public submission with new seeds; anyone who
may read it sees the verdict (:mod:`services.store.runs.verification`, docs/rules.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, Field

from services.coordinator.api.deps import AdminUser, SessionDep, SettingsDep, StoreDep
from services.coordinator.api.fields import DbId, StrictInt
from services.coordinator.api.routes import problems
from services.coordinator.api.routes.leaderboard import Reader
from services.coordinator.api.schemas import Request
from services.coordinator.common.client_errors import ConflictError, NotFoundError
from services.coordinator.verify import queue_replays
from services.store.db.models import Submission
from services.store.runs.verdicts import verification_of
from services.store.runs.verification import MAX_SEEDS, NotVerifiableError, settle
from services.store.runs.visibility import may_read

router = APIRouter(prefix="/v1/submissions", tags=["verification"], responses=problems(401, 422, 503))
SubmissionId = Annotated[DbId, Path(description="The submission's id.")]


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


def _out(found: Any) -> VerificationOut:
    return VerificationOut.model_validate(found.to_dict())


@router.post(
    "/{submission_id}/verify",
    status_code=status.HTTP_202_ACCEPTED,
    responses=problems(403, 404, 409, 413),
    summary="Replay a finished public submission with new seeds (operators); it is marked when they end",
)
def request_verification(
    submission_id: SubmissionId, user: AdminUser, session: SessionDep, settings: SettingsDep, body: VerifyCreate
) -> VerificationOut:
    if session.get(Submission, submission_id) is None:
        raise NotFoundError(f"No submission with id {submission_id}.", field="submission_id")
    try:
        queue_replays(session, settings=settings, submission_id=submission_id, seeds=body.seeds, owner=user)
    except NotVerifiableError as exc:
        session.rollback()
        raise ConflictError(str(exc), field="submission_id") from None
    session.commit()
    return _out(verification_of(session, submission_id=submission_id))


@router.get(
    "/{submission_id}/verify",
    responses=problems(404),
    summary="A submission's verification: verdict, the interval it was judged by, each replay",
)
def read_verification(
    submission_id: SubmissionId, viewer: Reader, session: SessionDep, store: StoreDep
) -> VerificationOut:
    if not may_read(session, viewer, submission_id):
        raise NotFoundError(f"No submission with id {submission_id} that you may see.", field="submission_id")
    found = verification_of(session, submission_id=submission_id)
    if found.verdict == "pending":  # the replays may have ended since the last pass: judge them now
        settle(session, store, submission_id=submission_id)
        session.commit()
        found = verification_of(session, submission_id=submission_id)
    return _out(found)


__all__ = ["VerificationOut", "VerifyCreate", "read_verification", "request_verification", "router"]
