"""Per-user quotas and the service's limits: submissions, request sizes, tokens, write rate,
search caps, and who may read the leaderboard (one group of
:class:`~services.coordinator.common.config.CoordinatorSettings`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from services.coordinator.common.validation import parse_rate, split_list


class LimitSettings(BaseModel):
    """Quotas and limits (per user; a user row may override the quotas)."""

    quota_concurrent: int = Field(default=2, ge=0, le=10_000)
    quota_daily: int = Field(default=20, ge=0, le=1_000_000)
    meta_test_quota: int = Field(
        default=3,
        ge=0,
        le=1_000_000,
        description="Meta-test submissions one user may make of one learner on one stream "
        "version within NEVIS_META_TEST_QUOTA_DAYS (0: none); one that never started a task "
        "(refused, or cancelled or failed before any ran) does not count. Meta-train is "
        "unlimited here; local `nevis run` is never limited.",
    )
    meta_test_quota_days: float = Field(
        default=30.0,
        gt=0,
        le=3660,
        description="The window of NEVIS_META_TEST_QUOTA, in days: a counted meta-test "
        "submission stops counting this long after it was created.",
    )
    meta_test_ruleset_quota: int = Field(
        default=10,
        ge=0,
        le=1_000_000,
        description="Meta-test submissions one user may make under one ruleset (any learner, any "
        "stream) within NEVIS_META_TEST_RULESET_QUOTA_DAYS (0: none); counted as "
        "NEVIS_META_TEST_QUOTA counts. Meta-train is not limited.",
    )
    meta_test_ruleset_quota_days: float = Field(
        default=7.0, gt=0, le=3660, description="The window of NEVIS_META_TEST_RULESET_QUOTA, in days."
    )
    retired_streams: str = Field(
        default="",
        max_length=10_000,
        description="Retired stream versions (comma-separated name@version) whose test images may "
        "be public: their meta-test prediction-job logs are returned to owners (withheld otherwise).",
    )
    bundle_max_bytes: int = Field(default=50 * 1024 * 1024, ge=1024, le=2 * 1024**3)
    max_json_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest request body outside uploads (JSON); larger ones are a 413.",
    )
    token_default_days: int = Field(
        default=90,
        ge=1,
        le=366,
        description="Lifetime of an API token minted without an expiry (API expires_at, CLI --expires-in-days).",
    )
    max_tokens_per_user: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="Live (unrevoked, unexpired) API tokens one user may hold; minting another "
        "is a 409 naming this cap.",
    )
    write_rate: str = Field(
        default="120/minute;2000/hour",
        max_length=200,
        description="Writes (POST, PUT, PATCH, DELETE) one user may make, per replica, e.g. "
        "'120/minute;2000/hour' (without a valid token: one client address); more are a 429 "
        "with Retry-After.",
    )
    dashboard_public: bool = Field(
        default=True,
        description="The leaderboard and dashboard are readable without a token "
        "(false: every page and the leaderboard API need one).",
    )
    leaderboard_code: Literal["any", "public"] = Field(
        default="any",
        description="What the leaderboard ranks by default: every row (any), or only rows "
        "whose code is public (public: a baseline, or a code_url given; docs/isolation.md, 'Public data'). "
        "Readers may ask for the other with ?code=.",
    )
    max_trials: int = Field(default=64, ge=1, le=10_000)
    max_steps: int = Field(default=1_000_000, ge=1, le=10_000_000)

    @field_validator("write_rate")
    @classmethod
    def _check_write_rate(cls, value: str) -> str:
        parse_rate(value)
        return value

    @property
    def retired_stream_versions(self) -> frozenset[tuple[str, str]]:
        """NEVIS_RETIRED_STREAMS as (name, version) pairs."""
        return frozenset(tuple(item.split("@", 1)) for item in split_list(self.retired_streams) if "@" in item)


__all__ = ["LimitSettings"]
