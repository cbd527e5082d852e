"""The checks a new submission passes beyond its types: the budget within this coordinator's
caps, a known ruleset, and the quotas (concurrent, daily, meta-test per learner and stream
version, meta-test per ruleset), each refusal naming its field and when to try again. The
quota checks run with the user's row locked (:func:`~services.coordinator.crud.submission_create.create_submission`)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from services.coordinator.common.client_errors import InvalidInputError, QuotaExceededError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.crud import quotas
from services.core import rulesets
from services.core.budget import RunBudget
from services.core.errors import UnknownNameError
from services.store.db.models import Learner, StreamVersion
from services.store.db.models_coordinator import User
from services.store.db.types import utcnow


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


def check_ruleset(name: str) -> None:
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


def check_ruleset_quota(session: Session, *, settings: CoordinatorSettings, user: User, ruleset: str) -> None:
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


def check_quota(session: Session, *, settings: CoordinatorSettings, user: User) -> None:
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


def check_meta_test_quota(
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


__all__ = ["check_budget", "check_meta_test_quota", "check_quota", "check_ruleset", "check_ruleset_quota"]
