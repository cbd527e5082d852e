"""Quota answers: the caller's concurrent, daily and meta-test use, counted as
POST /v1/submissions counts them (GET /v1/users/me/quota)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from services.coordinator.api.schemas import LearnerRef, StreamRef


class QuotaUseOut(BaseModel):
    """A windowed quota: submissions counted in the window, the limit, and when the next
    is allowed."""

    used: int
    limit: int
    window_days: float
    next_allowed_at: datetime | None = Field(
        description="When the next is allowed while the quota is used up (then a create is a "
        "429 with Retry-After); null: one is allowed now, or none at all when the limit is 0."
    )


class ConcurrentOut(BaseModel):
    used: int = Field(description="Queued or running submissions now.")
    limit: int


class MetaTestQuotaOut(BaseModel):
    """Counted meta-test submissions of one learner on one stream version."""

    learner: LearnerRef
    stream: StreamRef
    use: QuotaUseOut


class QuotaOut(BaseModel):
    """The caller's quotas, counted as POST /v1/submissions counts them."""

    user: str
    concurrent: ConcurrentOut
    daily: QuotaUseOut
    meta_test_limit: int = Field(
        description="Meta-test submissions allowed per learner and stream "
        "version in the window (NEVIS_META_TEST_QUOTA; 0: none)."
    )
    meta_test_window_days: float = Field(description="NEVIS_META_TEST_QUOTA_DAYS.")
    meta_test: list[MetaTestQuotaOut] = Field(
        description=(
            "Per learner and stream version with a counted meta-test submission in the window. One "
            "counts while it is queued or running, and once any of its tasks ran; one that failed or "
            "was cancelled before any task ran does not. Meta-train submissions are not limited."
        )
    )
    meta_test_by_ruleset: dict[str, QuotaUseOut] = Field(
        default_factory=dict,
        description=(
            "Per ruleset with a counted meta-test submission in NEVIS_META_TEST_RULESET_QUOTA_DAYS: its "
            "use of NEVIS_META_TEST_RULESET_QUOTA (any learner, any stream; docs/rules.md)."
        ),
    )


__all__ = ["ConcurrentOut", "MetaTestQuotaOut", "QuotaOut", "QuotaUseOut"]
