"""Per-user quotas, counted from the submissions table: what is enforced is what is shown.

Why one module: the checks that refuse a submission (:func:`create_submission
<services.coordinator.crud.submission_create.create_submission>`) and the report a user or an
operator reads (``GET /v1/users/me/quota``, ``nevis users quota``) must count the same rows,
or the report would promise a submission the check refuses.

The quotas:

- concurrent: queued or running submissions at once (``NEVIS_QUOTA_CONCURRENT``, or the
  user's ``max_concurrent``);
- daily: submissions created in the last 24 hours (``NEVIS_QUOTA_DAILY``, or the user's
  ``max_per_day``);
- meta-test hygiene (issue 9): meta-test submissions of one learner on one stream version
  created in the last ``NEVIS_META_TEST_QUOTA_DAYS`` (``NEVIS_META_TEST_QUOTA``). A
  submission counts once it may evaluate: while it is queued or running, and for good once a
  task of it ran (a task run exists), whatever its end. One that ended failed or cancelled
  before any task ran never evaluated on the test split and does not count. A ``stopped``
  one (its own FLOP or wall-time cap ended it) always counts, like a succeeded one: it is
  stopped only by a committed task, so it has evaluated on the test split. Meta-train
  submissions, and local ``nevis run`` runs (no owner), are not limited.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, exists, func, or_, select
from sqlalchemy.orm import Session

from services.coordinator.common.config import CoordinatorSettings
from services.store.db.models import Learner, StreamVersion, Submission, TaskRun
from services.store.db.models_coordinator import ScheduledSubmission, User
from services.store.db.types import utcnow

OPEN_STATUSES = ("queued", "running")
META_TEST = "meta_test"
DAY = timedelta(days=1)
ENDED_UNSTARTED = ("failed", "cancelled")
"""Statuses of a submission that may have ended before evaluating (then it does not count).
Not ``stopped``: a cap stops a run only once a committed task reached it, so it evaluated."""


@dataclass(frozen=True)
class Limits:
    """The quotas that apply to one user (its own overrides, else the coordinator's)."""

    concurrent: int
    daily: int
    meta_test: int
    meta_test_window: timedelta

    @property
    def meta_test_days(self) -> float:
        return self.meta_test_window.total_seconds() / 86_400


@dataclass(frozen=True)
class WindowUse:
    """Counted submissions of a windowed quota: how many, the limit, and when the next is
    allowed (None: one is allowed now, or never while the limit is 0)."""

    used: int
    limit: int
    window: timedelta
    next_allowed_at: datetime | None


@dataclass(frozen=True)
class MetaTestUse:
    """A user's counted meta-test submissions of one learner on one stream version."""

    learner_id: int
    learner: str
    stream: str
    version: str
    use: WindowUse


@dataclass(frozen=True)
class QuotaReport:
    """Every quota of a user, as the checks count them now."""

    user: str
    limits: Limits
    open_submissions: int
    daily: WindowUse
    meta_test: tuple[MetaTestUse, ...]
    by_ruleset: Mapping[str, WindowUse] = field(default_factory=dict)  # meta-test use per ruleset


def limits_of(settings: CoordinatorSettings, user: User) -> Limits:
    """The quotas of ``user``: its row's overrides, else the coordinator's settings."""
    return Limits(
        concurrent=user.max_concurrent if user.max_concurrent is not None else settings.quota_concurrent,
        daily=user.max_per_day if user.max_per_day is not None else settings.quota_daily,
        meta_test=settings.meta_test_quota,
        meta_test_window=timedelta(days=settings.meta_test_quota_days),
    )


def open_count(session: Session, *, user: User) -> int:
    """The user's queued or running submissions."""
    return (
        session.scalar(
            select(func.count())
            .select_from(ScheduledSubmission)
            .join(Submission, Submission.id == ScheduledSubmission.submission_id)
            .where(ScheduledSubmission.user_id == user.id, Submission.status.in_(OPEN_STATUSES))
        )
        or 0
    )


def daily_times(session: Session, *, user: User, now: datetime) -> list[datetime]:
    """When the user's submissions of the last 24 hours were created, oldest first."""
    return list(
        session.scalars(
            select(ScheduledSubmission.created_at)
            .where(ScheduledSubmission.user_id == user.id, ScheduledSubmission.created_at > now - DAY)
            .order_by(ScheduledSubmission.created_at)
        )
    )


def counts_for_meta_test() -> ColumnElement[bool]:
    """SQL: a meta-test submission that counts: not one that ended (failed, cancelled)
    before any of its tasks ran."""
    started = exists().where(TaskRun.submission_id == Submission.id)
    return and_(Submission.phase == META_TEST, or_(Submission.status.not_in(ENDED_UNSTARTED), started))


def meta_test_times(
    session: Session, *, user: User, learner_id: int, stream_version_id: int, window: timedelta, now: datetime
) -> list[datetime]:
    """When the user's counted meta-test submissions of this learner on this stream version
    within ``window`` were created, oldest first."""
    return list(
        session.scalars(
            select(Submission.created_at)
            .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
            .where(
                ScheduledSubmission.user_id == user.id,
                Submission.learner_id == learner_id,
                Submission.stream_version_id == stream_version_id,
                Submission.created_at > now - window,
                counts_for_meta_test(),
            )
            .order_by(Submission.created_at)
        )
    )


def ruleset_use(
    session: Session, *, settings: CoordinatorSettings, user: User, ruleset: str, now: datetime
) -> WindowUse:
    """The user's counted meta-test submissions under ``ruleset`` (any learner, any stream)
    within NEVIS_META_TEST_RULESET_QUOTA_DAYS, against NEVIS_META_TEST_RULESET_QUOTA."""
    window = timedelta(days=settings.meta_test_ruleset_quota_days)
    times = list(
        session.scalars(
            select(Submission.created_at)
            .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
            .where(
                ScheduledSubmission.user_id == user.id,
                Submission.ruleset == ruleset,
                Submission.created_at > now - window,
                counts_for_meta_test(),
            )
            .order_by(Submission.created_at)
        )
    )
    return window_use(times, limit=settings.meta_test_ruleset_quota, window=window)


def ruleset_uses(session: Session, *, settings: CoordinatorSettings, user: User, now: datetime) -> dict[str, WindowUse]:
    """:func:`ruleset_use` of every ruleset the user has a counted meta-test submission under in the window."""
    window = timedelta(days=settings.meta_test_ruleset_quota_days)
    names = session.scalars(
        select(Submission.ruleset)
        .distinct()
        .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
        .where(ScheduledSubmission.user_id == user.id, Submission.created_at > now - window, counts_for_meta_test())
    )
    return {name: ruleset_use(session, settings=settings, user=user, ruleset=name, now=now) for name in sorted(names)}


def window_use(times: Sequence[datetime], *, limit: int, window: timedelta) -> WindowUse:
    """The use of a windowed quota from the creation times it counts (oldest first): when
    full, the next is allowed once the oldest leaves the window."""
    full = limit > 0 and len(times) >= limit
    # Over the limit (it was lowered): wait until enough leave for one more.
    leaving = times[len(times) - limit] if full else None
    return WindowUse(
        used=len(times), limit=limit, window=window, next_allowed_at=leaving + window if leaving is not None else None
    )


def retry_after_s(next_allowed_at: datetime | None, *, now: datetime) -> int | None:
    """Whole seconds until ``next_allowed_at`` (at least 1), for ``Retry-After``."""
    if next_allowed_at is None:
        return None
    return max(1, math.ceil((next_allowed_at - now).total_seconds()))


def meta_test_uses(session: Session, *, user: User, limits: Limits, now: datetime) -> tuple[MetaTestUse, ...]:
    """The user's counted meta-test submissions within the window, per learner and stream
    version (only pairs with at least one), by learner name then stream."""
    rows = session.execute(
        select(Learner.id, Learner.name, StreamVersion.name, StreamVersion.version, Submission.created_at)
        .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
        .join(Learner, Learner.id == Submission.learner_id)
        .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
        .where(
            ScheduledSubmission.user_id == user.id,
            Submission.created_at > now - limits.meta_test_window,
            counts_for_meta_test(),
        )
        .order_by(Learner.name, StreamVersion.name, StreamVersion.version, Submission.created_at)
    ).all()
    grouped: dict[tuple[int, str, str, str], list[datetime]] = {}
    for learner_id, learner, stream, version, created in rows:
        grouped.setdefault((learner_id, learner, stream, version), []).append(created)
    return tuple(
        MetaTestUse(
            learner_id=key[0],
            learner=key[1],
            stream=key[2],
            version=key[3],
            use=window_use(times, limit=limits.meta_test, window=limits.meta_test_window),
        )
        for key, times in grouped.items()
    )


def quota_report(session: Session, *, settings: CoordinatorSettings, user: User) -> QuotaReport:
    """Every quota of ``user`` and how much of each it has used, counted as the checks do."""
    now, limits = utcnow(), limits_of(settings, user)
    return QuotaReport(
        user=user.name,
        limits=limits,
        open_submissions=open_count(session, user=user),
        daily=window_use(daily_times(session, user=user, now=now), limit=limits.daily, window=DAY),
        meta_test=meta_test_uses(session, user=user, limits=limits, now=now),
        by_ruleset=ruleset_uses(session, settings=settings, user=user, now=now),
    )


__all__ = [
    "DAY",
    "ENDED_UNSTARTED",
    "META_TEST",
    "OPEN_STATUSES",
    "Limits",
    "MetaTestUse",
    "QuotaReport",
    "WindowUse",
    "counts_for_meta_test",
    "daily_times",
    "limits_of",
    "meta_test_times",
    "meta_test_uses",
    "open_count",
    "quota_report",
    "retry_after_s",
    "ruleset_use",
    "ruleset_uses",
    "window_use",
]
