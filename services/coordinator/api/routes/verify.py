"""Verified rows: an operator replays a finished public submission with new seeds; anyone who
may read it sees the verdict (:mod:`services.store.runs.verification`, docs/rules.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, status

from services.coordinator.api.deps import AdminUser, SessionDep, SettingsDep, StoreDep
from services.coordinator.api.fields import DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.routes.leaderboard import Reader
from services.coordinator.api.schemas_verify import VerificationOut, VerifyCreate
from services.coordinator.common.client_errors import ConflictError, NotFoundError
from services.coordinator.verify import queue_replays
from services.store.db.models import Submission
from services.store.runs.verdicts import verification_of
from services.store.runs.verification import NotVerifiableError, settle
from services.store.runs.visibility import may_read

router = APIRouter(prefix="/v1/submissions", tags=["verification"], responses=problems(401, 422, 503))
SubmissionId = Annotated[DbId, Path(description="The submission's id.")]


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


__all__ = ["read_verification", "request_verification", "router"]
