"""Submissions as the API sees them once made: read one, list, cancel, say where the code is
public, pin for refreshes, read the events (creating one is
:mod:`~services.coordinator.crud.submission_create`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.coordinator.common.client_errors import ConflictError, NotFoundError
from services.coordinator.common.validation import check_code_url
from services.coordinator.crud.quotas import OPEN_STATUSES
from services.store.db.models import Event, Submission
from services.store.db.models_coordinator import ScheduledSubmission, TaskLease, User
from services.store.db.types import utcnow
from services.store.runs import records


@dataclass(frozen=True)
class SubmissionRow:
    """A submission with the coordinator's state and its owner."""

    submission: Submission
    schedule: ScheduledSubmission
    owner: User
    lease: TaskLease | None


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
    "OPEN_STATUSES",
    "SubmissionRow",
    "cancel_submission",
    "get_submission",
    "list_events",
    "list_submissions",
    "pin_submission",
    "set_code_url",
]
