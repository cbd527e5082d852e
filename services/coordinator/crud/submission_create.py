"""Creating a submission: validate the request's values, check the caller's quotas (see
:mod:`~services.coordinator.crud.submission_checks`), queue it, idempotently per key."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.coordinator.common.client_errors import ConflictError, InvalidInputError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import check_code_url
from services.coordinator.crud import quotas, submission_checks
from services.coordinator.crud.learners import get_learner
from services.coordinator.streams import resolve_stream
from services.core.budget import RunBudget
from services.core.errors import BudgetError
from services.core.rulesets import DEFAULT_RULESET
from services.store.db.models import PHASES, VISIBILITIES, Submission
from services.store.db.models_coordinator import IdempotencyKey, ScheduledSubmission, User
from services.store.runs import records
from workers.stream.prepare import stored_image_size
from workers.stream.versions import ensure_stream_version

CREATE_SCOPE = "POST /v1/submissions"


@dataclass(frozen=True)
class SubmissionRequest:
    """A validated-at-the-edge create request (types are checked; values are checked here)."""

    learner_id: int
    stream: str
    phase: str
    budget: RunBudget
    stream_version: str | None = None
    image_size: int | None = None
    visibility: str = "public"
    pinned: bool = False
    code_url: str | None = None
    ruleset: str = DEFAULT_RULESET

    def sha256(self) -> str:
        """Hash of the request's canonical JSON, to recognise a replay. The default
        visibility, pin, code URL and ruleset are left out, so keys stored before they existed still match."""
        defaults = {("visibility", "public"), ("pinned", False), ("code_url", None), ("ruleset", DEFAULT_RULESET)}
        fields = {k: v for k, v in self.__dict__.items() if (k, v) not in defaults}
        doc = json.dumps(
            {**fields, "budget": self.budget.to_dict()}, sort_keys=True, separators=(",", ":"), default=str
        )
        return hashlib.sha256(doc.encode()).hexdigest()


def find_replay(session: Session, *, user: User, key: str, request: SubmissionRequest) -> Submission | None:
    """The submission an earlier request with this key made, or None.

    Raises:
        ConflictError: the key was used with a different request.
    """
    found = session.scalar(
        select(IdempotencyKey).where(
            IdempotencyKey.user_id == user.id, IdempotencyKey.scope == CREATE_SCOPE, IdempotencyKey.key == key
        )
    )
    if found is None:
        return None
    if found.request_sha256 != request.sha256():
        raise ConflictError(
            "This Idempotency-Key was used before with a different request; send the same "
            "request to get its result again, or use a new key.",
            field="Idempotency-Key",
        )
    return session.get(Submission, found.resource_id)


def create_submission(
    session: Session,
    *,
    settings: CoordinatorSettings,
    user: User,
    request: SubmissionRequest,
    idempotency_key: str | None = None,
) -> tuple[Submission, bool]:
    """Queue a submission for the scheduler; returns it and whether it is a replay.

    The user's row is locked first (PostgreSQL), so quota checks and idempotency keys of
    one user are serialised across coordinator replicas.
    """
    session.execute(select(User.id).where(User.id == user.id).with_for_update())
    if idempotency_key is not None:
        replay = find_replay(session, user=user, key=idempotency_key, request=request)
        if replay is not None:
            return replay, True
    submission_checks.check_quota(session, settings=settings, user=user)
    owned = get_learner(session, user=user, learner_id=request.learner_id)
    stream = resolve_stream(settings, request.stream)
    if request.stream_version is not None and request.stream_version != stream.manifest.version:
        raise InvalidInputError(
            f"The 'stream_version' of stream {request.stream!r} must be "
            f"{stream.manifest.version!r} (the version this coordinator serves). Got "
            f"{request.stream_version!r} instead.",
            field="stream_version",
        )
    if request.phase not in PHASES:
        raise InvalidInputError(
            f"The 'phase' must be one of {', '.join(PHASES)}. Got {request.phase!r} instead.", field="phase"
        )
    if request.visibility not in VISIBILITIES:
        raise InvalidInputError(
            f"The 'visibility' must be one of {', '.join(VISIBILITIES)}. Got {request.visibility!r} instead.",
            field="visibility",
        )
    if request.code_url is not None:
        check_code_url(request.code_url)
    tasks = stream.manifest.tasks_of_phase(request.phase)
    if not tasks:
        raise InvalidInputError(f"Stream {request.stream!r} has no {request.phase} tasks.", field="phase")
    budget = submission_checks.check_budget(request.budget, settings=settings)
    submission_checks.check_ruleset(request.ruleset)
    try:
        size = stored_image_size(
            stream.manifest,
            settings_size=settings.image_size,
            settings_explicit="image_size" in settings.model_fields_set,
            override=request.image_size,
        )
    except Exception as exc:  # noqa: BLE001 - the check's own message names the range
        raise InvalidInputError(f"The 'image_size' is not valid: {exc}", field="image_size") from None
    version = ensure_stream_version(session, manifest=stream.manifest)
    if request.phase == quotas.META_TEST:
        submission_checks.check_meta_test_quota(
            session, settings=settings, user=user, learner=owned.learner, version=version
        )
        submission_checks.check_ruleset_quota(session, settings=settings, user=user, ruleset=request.ruleset)
    try:
        submission = records.create_submission(
            session,
            learner=owned.learner,
            stream_version=version,
            phase=request.phase,
            budget=budget,
            image_size=size,
            first_order=tasks[0].order,
            status="queued",
            visibility=request.visibility,
            ruleset=request.ruleset,
        )
    except BudgetError as exc:  # the budget breaks its ruleset's rules: the field is the budget's
        raise InvalidInputError(str(exc), field=f"budget.{exc.field}") from None
    submission.pinned = request.pinned
    submission.code_url = request.code_url
    session.add(ScheduledSubmission(submission_id=submission.id, user_id=user.id))
    if idempotency_key is not None:
        session.add(
            IdempotencyKey(
                user_id=user.id,
                scope=CREATE_SCOPE,
                key=idempotency_key,
                request_sha256=request.sha256(),
                resource_id=submission.id,
            )
        )
    records.add_event(
        session,
        submission_id=submission.id,
        kind="submission.queued",
        payload={
            "user": user.name,
            "backend": settings.backend,
            "learner": owned.learner.name,
            "tasks": len(tasks),
            "visibility": request.visibility,
        },
    )
    session.flush()
    return submission, False


__all__ = ["CREATE_SCOPE", "SubmissionRequest", "create_submission", "find_replay"]
