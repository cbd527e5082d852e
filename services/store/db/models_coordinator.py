"""Coordinator tables: users, API tokens, ownership, idempotency keys, scheduling state.

Imported at the end of :mod:`services.store.db.models`, so every table shares one
metadata and one Alembic history (revision ``0002``).

Contract:
- An API token is stored only as the sha256 of its secret; the secret is shown once. A token
  minted through the API points at the token that minted it (``parent_token_id``).
- Every submission the coordinator accepts has one ``scheduled_submissions`` row (owner,
  back-off, cancellation) and every launch of a task one ``task_leases`` row.
- At most one lease per submission is active (``launching``, ``launched``, ``running``):
  a partial unique index makes a second concurrent launch impossible whatever the code
  does, and ``(submission_id, task_order, attempt)`` is unique among leases that are
  attempts, so a launch is never repeated under the same attempt number. A lease the
  backend could not launch ends ``launch_failed``: it keeps the attempt number the launch
  would have had, and the next launch takes that number again (a failed launch spends
  the launch budget, ``NEVIS_MAX_LAUNCH_FAILURES``, not the task's attempts).
- An ``Idempotency-Key`` is unique per (user, scope) and remembers a hash of the request.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from services.store.db.base import Base, created_column, named_check, one_of, sha256_check
from services.store.db.types import UTCDateTime

ROLES: tuple[str, ...] = ("admin", "submitter")
LEASE_STATUSES: tuple[str, ...] = (
    "launching",
    "launched",
    "running",
    "succeeded",
    "failed",
    "expired",
    "cancelled",
    "launch_failed",
)
# A submission has at most one lease in one of these (the causal order, enforced by an index).
ACTIVE_LEASE_STATUSES: tuple[str, ...] = ("launching", "launched", "running")
# A lease whose backend refused the launch: the task never ran, so it is no attempt.
NOT_AN_ATTEMPT = "launch_failed"


# A person or service that calls the API; quotas of None fall back to the settings.
class User(Base):
    __tablename__ = "users"
    __table_args__ = (
        named_check(one_of("role", ROLES), "role"),
        named_check("max_concurrent IS NULL OR max_concurrent >= 0", "max_concurrent_non_negative"),
        named_check("max_per_day IS NULL OR max_per_day >= 0", "max_per_day_non_negative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    max_concurrent: Mapped[int | None] = mapped_column(Integer)
    max_per_day: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = created_column()
    # Set by an admin: the user's tokens are revoked and it gets no new ones until cleared.
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


# A bearer token of a user, kept as the sha256 of its secret (high-entropy, so no KDF needed).
class ApiToken(Base):
    __tablename__ = "api_tokens"
    __table_args__ = (sha256_check("token_sha256"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(String(100))
    token_prefix: Mapped[str] = mapped_column(String(16))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = created_column()
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The token whose request minted this one (revision 0012): revoking a token revokes every
    # token minted from it, down the chain. None: minted by the CLI, or before 0012.
    parent_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"), index=True)


# Who registered a learner (and the size of its uploaded bundle, if any).
class LearnerOwner(Base):
    __tablename__ = "learner_owners"
    __table_args__ = (
        named_check("bundle_size_bytes IS NULL OR bundle_size_bytes >= 0", "bundle_size_bytes_non_negative"),
        named_check("image_size_bytes IS NULL OR image_size_bytes >= 0", "image_size_bytes_non_negative"),
    )

    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="RESTRICT"), index=True)
    bundle_size_bytes: Mapped[int | None] = mapped_column(Integer)
    # What a registered image unpacked to at registration (NULL: not read there; migration 0026).
    image_size_bytes: Mapped[int | None] = mapped_column(BigInteger)


# The coordinator's view of a submission: owner, back-off and cancellation.
class ScheduledSubmission(Base):
    __tablename__ = "scheduled_submissions"
    __table_args__ = (Index(None, "next_launch_at"),)

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="RESTRICT"), index=True)
    # The lease in flight; the row lock on this row is what schedulers claim.
    active_lease_id: Mapped[int | None] = mapped_column(Integer)
    next_launch_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_launch_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = created_column()


# One launch of one task of a submission; heartbeats and deadlines let the reaper act.
class TaskLease(Base):
    __tablename__ = "task_leases"
    __table_args__ = (
        named_check(one_of("status", LEASE_STATUSES), "status"),
        named_check("task_order >= 1", "task_order_positive"),
        named_check("attempt >= 1", "attempt_positive"),
        Index(None, "status", "deadline_at"),
        Index(
            "uq_task_leases_one_active",
            "submission_id",
            unique=True,
            sqlite_where=text(one_of("status", ACTIVE_LEASE_STATUSES)),
            postgresql_where=text(one_of("status", ACTIVE_LEASE_STATUSES)),
        ),
        Index(
            "uq_task_leases_attempt",
            "submission_id",
            "task_order",
            "attempt",
            unique=True,
            sqlite_where=text(f"status <> '{NOT_AN_ATTEMPT}'"),
            postgresql_where=text(f"status <> '{NOT_AN_ATTEMPT}'"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    task_order: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    backend: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str] = mapped_column(String(100))
    job_id: Mapped[str | None] = mapped_column(String(200))
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime())
    deadline_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()


# A replayable request: the same key and body give the same resource, another body a 409.
class IdempotencyKey(Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("user_id", "scope", "key"), sha256_check("request_sha256"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(String(100))
    key: Mapped[str] = mapped_column(String(200))
    request_sha256: Mapped[str] = mapped_column(String(64))
    resource_id: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = created_column()


__all__ = [
    "ACTIVE_LEASE_STATUSES",
    "LEASE_STATUSES",
    "NOT_AN_ATTEMPT",
    "ROLES",
    "ApiToken",
    "IdempotencyKey",
    "LearnerOwner",
    "ScheduledSubmission",
    "TaskLease",
    "User",
]
