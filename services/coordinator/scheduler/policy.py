"""Decisions of the scheduler, as small objects that return enums.

- :class:`LeasePolicy` judges one lease at one instant: keep it, or expire it and why.
- :class:`RetryPolicy` says whether a failed launch is retried (and after what back-off)
  or ends the submission; :func:`retry_policy` builds it from the settings, for the
  scheduler and the worker alike, and :func:`launch_retry_policy` the budget of launches
  the backend refused (an outage), which spend no attempt of the task.

Neither touches a database or a cluster, so every branch is a unit test.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.coordinator.common.config import CoordinatorSettings


class Verdict(enum.Enum):
    KEEP = "keep"
    EXPIRE = "expire"


class ExpiryKind(enum.Enum):
    NOT_STARTED = "not_started"  # launched, but the worker never reported in
    HEARTBEAT = "heartbeat"  # the worker stopped sending heartbeats
    DEADLINE = "deadline"  # the task ran past its deadline
    JOB_ENDED = "job_ended"  # the backend says the job ended, the worker never reported


@dataclass(frozen=True)
class LeaseView:
    """The parts of a lease a judgement needs."""

    status: str
    heartbeat_at: datetime
    deadline_at: datetime


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    kind: ExpiryKind | None = None
    reason: str = ""


@dataclass(frozen=True)
class LeasePolicy:
    """When an active lease is dead.

    A lease that is ``launching`` or ``launched`` must start before its deadline (the start
    timeout); a ``running`` one must heartbeat within ``heartbeat_timeout_s`` and finish
    before its deadline (the task deadline).
    """

    heartbeat_timeout_s: float

    def judge(self, lease: LeaseView, now: datetime) -> Judgement:
        if lease.status in ("launching", "launched"):
            if now >= lease.deadline_at:
                return Judgement(
                    Verdict.EXPIRE,
                    ExpiryKind.NOT_STARTED,
                    f"the task did not start by {lease.deadline_at.isoformat()} (NEVIS_START_TIMEOUT_S)",
                )
            return Judgement(Verdict.KEEP)
        if lease.status != "running":
            return Judgement(Verdict.KEEP)
        if now >= lease.deadline_at:
            return Judgement(
                Verdict.EXPIRE,
                ExpiryKind.DEADLINE,
                f"the task ran past its deadline {lease.deadline_at.isoformat()} (NEVIS_TASK_DEADLINE_S)",
            )
        silent = (now - lease.heartbeat_at).total_seconds()
        if silent > self.heartbeat_timeout_s:
            return Judgement(
                Verdict.EXPIRE,
                ExpiryKind.HEARTBEAT,
                f"no heartbeat for {silent:.0f} s (NEVIS_HEARTBEAT_TIMEOUT_S="
                f"{self.heartbeat_timeout_s:g}); the worker died or lost the "
                "database",
            )
        return Judgement(Verdict.KEEP)


class RetryAction(enum.Enum):
    RETRY = "retry"
    FAIL = "fail"


@dataclass(frozen=True)
class RetryDecision:
    action: RetryAction
    delay_s: float = 0.0


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential back-off: base, 2·base, 4·base, ... up to a cap."""

    max_attempts: int
    backoff_base_s: float
    backoff_max_s: float

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(
                f"The 'max_attempts' of RetryPolicy must be an int in [1, inf). Got {self.max_attempts!r} instead."
            )
        if not 0 <= self.backoff_base_s <= self.backoff_max_s:
            raise ValueError(
                "The back-off of RetryPolicy must satisfy 0 <= backoff_base_s <= backoff_max_s. "
                f"Got {self.backoff_base_s} and {self.backoff_max_s} instead."
            )

    def decide(self, *, attempt: int, retryable: bool = True) -> RetryDecision:
        """What to do after attempt number ``attempt`` (1-based) of a task failed."""
        if not retryable or attempt >= self.max_attempts:
            return RetryDecision(RetryAction.FAIL)
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        return RetryDecision(RetryAction.RETRY, delay)


def retry_policy(settings: CoordinatorSettings) -> RetryPolicy:
    """The policy of ``NEVIS_MAX_ATTEMPTS``, ``NEVIS_BACKOFF_BASE_S`` and ``NEVIS_BACKOFF_MAX_S``."""
    return RetryPolicy(settings.max_attempts, settings.backoff_base_s, settings.backoff_max_s)


def launch_retry_policy(settings: CoordinatorSettings) -> RetryPolicy:
    """The launch budget: ``NEVIS_MAX_LAUNCH_FAILURES`` consecutive refused launches of a
    task, backing off like retries (``NEVIS_BACKOFF_BASE_S`` doubling up to
    ``NEVIS_BACKOFF_MAX_S``); its "attempts" are launch tries, not attempts of the task."""
    return RetryPolicy(settings.max_launch_failures, settings.backoff_base_s, settings.backoff_max_s)


__all__ = [
    "ExpiryKind",
    "Judgement",
    "LeasePolicy",
    "LeaseView",
    "RetryAction",
    "RetryDecision",
    "RetryPolicy",
    "Verdict",
    "launch_retry_policy",
    "retry_policy",
]
