"""Benchmark refresh tables: one refresh per stream version, the runs it queued, its snapshot.

A stream gets a new version when its manifest changes (meta-test years move forward, a
dataset is fixed). A *refresh* re-runs the baselines and the submissions their owners pinned
on that version, so the new leaderboard has its references. These rows are what makes a
refresh traceable and idempotent. Imported at the end of :mod:`services.store.db.models`
(revision ``0009``).

Contract:
- ``refreshes`` holds at most one row per stream version (``stream_version_id`` is unique,
  and a stream version is unique per (name, version)): running a refresh twice for the same
  version finds the row and queues nothing.
- ``refresh_runs`` names every submission a refresh queued, whether it re-runs a baseline or
  a pinned submission (``source_submission_id``: the pinned one it copies).
- ``snapshot`` is the version's leaderboard (ranked rows per phase, as an anonymous reader
  sees it) taken once every run of the refresh has ended; it is never rewritten, so it stays
  readable whatever runs later on this or another version.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from services.store.db.base import Base, created_column, named_check, one_of
from services.store.db.models_streams import StreamVersion
from services.store.db.types import JSONDoc, UTCDateTime

REFRESH_TRIGGERS: tuple[str, ...] = ("schedule", "admin", "cli")
# running: its runs are queued or in flight; finished: they all ended and the snapshot is taken.
REFRESH_STATUSES: tuple[str, ...] = ("running", "finished")
REFRESH_RUN_KINDS: tuple[str, ...] = ("baseline", "pinned")


# One refresh of one stream version: who started it, when, and the leaderboard it left.
class Refresh(Base):
    __tablename__ = "refreshes"
    __table_args__ = (
        UniqueConstraint("stream_version_id"),
        named_check(one_of("trigger", REFRESH_TRIGGERS), "trigger"),
        named_check(one_of("status", REFRESH_STATUSES), "status"),
        named_check("(status = 'finished') = (finished_at IS NOT NULL)", "finished_at_set"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    stream_version_id: Mapped[int] = mapped_column(ForeignKey("stream_versions.id", ondelete="RESTRICT"))
    trigger: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="running", server_default="running")
    requested_by: Mapped[str | None] = mapped_column(String(100))  # the admin, for trigger admin
    started_at: Mapped[datetime] = created_column()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    snapshot: Mapped[dict[str, Any] | None] = mapped_column(JSONDoc)
    note: Mapped[str | None] = mapped_column(Text)  # e.g. a baseline that could not be queued

    stream_version: Mapped[StreamVersion] = relationship()
    runs: Mapped[list[RefreshRun]] = relationship(
        back_populates="refresh", order_by="RefreshRun.submission_id", passive_deletes=True
    )


# A submission a refresh queued: a baseline, or the copy of a pinned submission.
class RefreshRun(Base):
    __tablename__ = "refresh_runs"
    __table_args__ = (named_check(one_of("kind", REFRESH_RUN_KINDS), "kind"),)

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    refresh_id: Mapped[int] = mapped_column(ForeignKey("refreshes.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    source_submission_id: Mapped[int | None] = mapped_column(ForeignKey("submissions.id", ondelete="SET NULL"))

    refresh: Mapped[Refresh] = relationship(back_populates="runs")


__all__ = ["REFRESH_RUN_KINDS", "REFRESH_STATUSES", "REFRESH_TRIGGERS", "Refresh", "RefreshRun"]
