"""Submissions as the API sees them: create (idempotent, within quotas), list, cancel."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.coordinator.common.client_errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    QuotaExceededError,
)
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import check_code_url
from services.coordinator.crud import quotas
from services.coordinator.crud.learners import get_learner
from services.coordinator.crud.quotas import OPEN_STATUSES
from services.coordinator.streams import resolve_stream
from services.core import rulesets
from services.core.budget import RunBudget
from services.core.errors import BudgetError, UnknownNameError
from services.core.rulesets import DEFAULT_RULESET
from services.store.db.models import PHASES, VISIBILITIES, Event, Learner, StreamVersion, Submission
from services.store.db.models_coordinator import IdempotencyKey, ScheduledSubmission, TaskLease, User
from services.store.db.types import utcnow
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


@dataclass(frozen=True)
class SubmissionRow:
    """A submission with the coordinator's state and its owner."""

    submission: Submission
    schedule: ScheduledSubmission
    owner: User
    lease: TaskLease | None


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
    _check_quota(session, settings=settings, user=user)
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
    budget = check_budget(request.budget, settings=settings)
    _check_ruleset(request.ruleset)
    try:
        size = stored_image_size(
            stream.manifest,
            settings_size=settings.image_size,
            settings_explicit="image_size" in settings.model_fields_set,
            override=request.image_size,
        )
    except Exception as exc:  # the check's own message names the range  # noqa: BLE001
        raise InvalidInputError(f"The 'image_size' is not valid: {exc}", field="image_size") from None
    version = ensure_stream_version(session, manifest=stream.manifest)
    if request.phase == quotas.META_TEST:
        _check_meta_test_quota(session, settings=settings, user=user, learner=owned.learner, version=version)
        _check_ruleset_quota(session, settings=settings, user=user, ruleset=request.ruleset)
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


def check_budget(budget: RunBudget, *, settings: CoordinatorSettings) -> RunBudget:
    """``budget`` (already valid, see :class:`RunBudget`) within this coordinator's limits.

    Raises:
        InvalidInputError: naming ``budget.<key>``.
    """
    for key, limit in (("trials", settings.max_trials), ("steps", settings.max_steps)):
        if getattr(budget, key) > limit:
            raise InvalidInputError(
                f"The 'budget.{key}' must be at most {limit} on this coordinator "
                f"(NEVIS_MAX_{key.upper()}). Got {getattr(budget, key)} instead.",
                field=f"budget.{key}",
            )
    return budget


def _check_ruleset(name: str) -> None:
    """``name`` is a ruleset (:mod:`services.core.rulesets`).

    Raises:
        InvalidInputError: (field ``ruleset``) it is not, with the known names.
    """
    try:
        rulesets.ruleset(name)
    except UnknownNameError as exc:
        raise InvalidInputError(
            f"The 'ruleset' is not valid: {exc} Known: {', '.join(rulesets.known_rulesets())}.", field="ruleset"
        ) from None


def _check_ruleset_quota(session: Session, *, settings: CoordinatorSettings, user: User, ruleset: str) -> None:
    """Meta-test discipline (issue 50): at most NEVIS_META_TEST_RULESET_QUOTA counted meta-test
    submissions of one user under one ruleset per NEVIS_META_TEST_RULESET_QUOTA_DAYS, whatever
    the learner or stream; meta-train is not limited. Runs with the user's row locked."""
    now = utcnow()
    use = quotas.ruleset_use(session, settings=settings, user=user, ruleset=ruleset, now=now)
    if use.limit > 0 and use.next_allowed_at is None:
        return
    days = f"{use.window.total_seconds() / 86_400:g}"
    if use.limit == 0:
        raise QuotaExceededError(
            f"Meta-test submissions under ruleset {ruleset!r} are turned off on this coordinator "
            "(NEVIS_META_TEST_RULESET_QUOTA=0); develop on 'meta_train', which is not limited.",
            field="quota.meta_test_ruleset",
        )
    wait = quotas.retry_after_s(use.next_allowed_at, now=now)
    raise QuotaExceededError(
        f"User {user.name!r} has used {use.used} of {use.limit} meta-test submissions under ruleset "
        f"{ruleset!r} allowed per {days} days (NEVIS_META_TEST_RULESET_QUOTA, "
        f"NEVIS_META_TEST_RULESET_QUOTA_DAYS); the cap resets for one more at "
        f"{use.next_allowed_at.isoformat(timespec='seconds')} (in {wait} s). Develop on 'meta_train', "
        "which is not limited.",
        field="quota.meta_test_ruleset",
        retry_after_s=wait,
    )


def _check_quota(session: Session, *, settings: CoordinatorSettings, user: User) -> None:
    limits = quotas.limits_of(settings, user)
    open_count = quotas.open_count(session, user=user)
    if open_count >= limits.concurrent:
        raise QuotaExceededError(
            f"User {user.name!r} has {open_count} queued or running submissions, the most "
            f"allowed at once ({limits.concurrent}); wait for one to finish or cancel one.",
            field="quota.concurrent",
            retry_after_s=60,
        )
    now = utcnow()
    recent = quotas.daily_times(session, user=user, now=now)
    if len(recent) >= limits.daily:
        wait = (recent[0] + quotas.DAY - now).total_seconds() if recent else 86_400
        raise QuotaExceededError(
            f"User {user.name!r} made {len(recent)} submissions in the last 24 hours, the daily "
            f"quota ({limits.daily}); try again later.",
            field="quota.daily",
            retry_after_s=max(1, int(wait) + 1),
        )


def _check_meta_test_quota(
    session: Session, *, settings: CoordinatorSettings, user: User, learner: Learner, version: StreamVersion
) -> None:
    """Meta-test hygiene (issue 9): at most NEVIS_META_TEST_QUOTA counted meta-test
    submissions of one user, learner and stream version per NEVIS_META_TEST_QUOTA_DAYS (what
    counts: :mod:`services.coordinator.crud.quotas`). Runs with the user's row locked."""
    limits, now = quotas.limits_of(settings, user), utcnow()
    where = f"of learner {learner.name!r} (id {learner.id}) on stream {version.name!r} version {version.version!r}"
    if limits.meta_test == 0:
        raise QuotaExceededError(
            "Meta-test submissions are turned off on this coordinator (NEVIS_META_TEST_QUOTA=0); "
            f"submit {where} with phase 'meta_train' to develop it.",
            field="quota.meta_test",
        )
    times = quotas.meta_test_times(
        session, user=user, learner_id=learner.id, stream_version_id=version.id, window=limits.meta_test_window, now=now
    )
    use = quotas.window_use(times, limit=limits.meta_test, window=limits.meta_test_window)
    if use.next_allowed_at is None:
        return
    wait = quotas.retry_after_s(use.next_allowed_at, now=now)
    raise QuotaExceededError(
        f"User {user.name!r} has used {use.used} of {use.limit} meta-test submissions {where} "
        f"allowed per {limits.meta_test_days:g} days (NEVIS_META_TEST_QUOTA, "
        f"NEVIS_META_TEST_QUOTA_DAYS); the next is allowed at "
        f"{use.next_allowed_at.isoformat(timespec='seconds')} (in {wait} s). Tune on "
        "'meta_train', which is not limited; a submission cancelled before any task ran does "
        "not count.",
        field="quota.meta_test",
        retry_after_s=wait,
    )


def get_submission(session: Session, *, user: User, submission_id: int, for_update: bool = False) -> SubmissionRow:
    """A submission ``user`` may see: its own, or any for an admin (else not found)."""
    query = (
        select(Submission, ScheduledSubmission, User)
        .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
        .join(User, User.id == ScheduledSubmission.user_id)
        .where(Submission.id == submission_id)
    )
    if for_update:
        query = query.with_for_update(of=ScheduledSubmission)
    row = session.execute(query).first()
    if row is None or (user.role != "admin" and row[2].id != user.id):
        raise NotFoundError(f"No submission with id {submission_id} that you may see.", field="submission_id")
    lease = session.get(TaskLease, row[1].active_lease_id) if row[1].active_lease_id else None
    return SubmissionRow(row[0], row[1], row[2], lease)


def list_submissions(
    session: Session,
    *,
    user: User,
    limit: int,
    offset: int,
    status: str | None = None,
    learner_id: int | None = None,
    owner: str | None = None,
    phase: str | None = None,
) -> tuple[list[SubmissionRow], int]:
    """Submissions ``user`` may see, newest first, filtered, with the total count."""
    query = (
        select(Submission, ScheduledSubmission, User)
        .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
        .join(User, User.id == ScheduledSubmission.user_id)
    )
    if user.role != "admin":
        query = query.where(ScheduledSubmission.user_id == user.id)
    if owner is not None:
        query = query.where(User.name == owner)
    if status is not None:
        query = query.where(Submission.status == status)
    if learner_id is not None:
        query = query.where(Submission.learner_id == learner_id)
    if phase is not None:
        query = query.where(Submission.phase == phase)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.execute(query.order_by(Submission.id.desc()).limit(limit).offset(offset)).all()
    leases = {
        lease.id: lease
        for lease in session.scalars(
            select(TaskLease).where(TaskLease.id.in_([r[1].active_lease_id for r in rows if r[1].active_lease_id]))
        )
    }
    return [SubmissionRow(r[0], r[1], r[2], leases.get(r[1].active_lease_id)) for r in rows], total


def cancel_submission(session: Session, *, user: User, submission_id: int) -> SubmissionRow:
    """Cancel a queued or running submission; the scheduler stops its job.

    Raises:
        NotFoundError: not the caller's (and the caller is no admin).
        ConflictError: (field ``status``) it has finished already.
    """
    row = get_submission(session, user=user, submission_id=submission_id, for_update=True)
    submission = row.submission
    if submission.status not in OPEN_STATUSES:
        raise ConflictError(
            f"Submission {submission_id} is {submission.status}; only queued or running submissions can be cancelled.",
            field="status",
        )
    now = utcnow()
    submission.status, submission.finished_at = "cancelled", now
    submission.error = f"cancelled by {user.name}"
    row.schedule.cancel_requested_at = now
    records.add_event(session, submission_id=submission_id, kind="submission.cancelled", payload={"by": user.name})
    session.flush()
    return row


def set_code_url(session: Session, *, user: User, submission_id: int, code_url: str | None) -> SubmissionRow:
    """Say (or withdraw) where a submission's learner code is public: its owner's or an admin's
    call, at any time (code is often published after the run); logged as an event.

    Raises:
        InvalidInputError: not an https URL (see :func:`check_code_url`).
        NotFoundError: not the caller's (and the caller is no admin).
    """
    if code_url is not None:
        check_code_url(code_url)
    row = get_submission(session, user=user, submission_id=submission_id, for_update=True)
    if row.submission.code_url != code_url:
        row.submission.code_url = code_url
        records.add_event(
            session,
            submission_id=submission_id,
            kind="submission.code_url",
            payload={"by": user.name, "code_url": code_url},
        )
    session.flush()
    return row


def pin_submission(session: Session, *, user: User, submission_id: int, pinned: bool) -> SubmissionRow:
    """Pin (or unpin) a submission for benchmark refreshes: its owner's or an admin's call.

    Raises:
        NotFoundError: not the caller's (and the caller is no admin).
    """
    row = get_submission(session, user=user, submission_id=submission_id, for_update=True)
    if row.submission.pinned != pinned:
        row.submission.pinned = pinned
        records.add_event(
            session,
            submission_id=submission_id,
            kind="submission.pinned" if pinned else "submission.unpinned",
            payload={"by": user.name},
        )
    session.flush()
    return row


def list_events(session: Session, *, submission_id: int, after: int, limit: int) -> list[Event]:
    """A submission's events with id > ``after``, oldest first."""
    return list(
        session.scalars(
            select(Event).where(Event.submission_id == submission_id, Event.id > after).order_by(Event.id).limit(limit)
        )
    )


__all__ = [
    "CREATE_SCOPE",
    "OPEN_STATUSES",
    "SubmissionRequest",
    "SubmissionRow",
    "cancel_submission",
    "check_budget",
    "create_submission",
    "find_replay",
    "get_submission",
    "list_events",
    "list_submissions",
    "pin_submission",
    "set_code_url",
]
