"""Verification tables: replays of a finished public submission, and the mark they earn it.

A replay (``nevis verify ID --seeds N``, ``POST /v1/submissions/{id}/verify`` or the refresh
schedule's ``NEVIS_REFRESH_VERIFY_SEEDS``) is a new submission of the same learner row (so
the same bundle digest or image), stream version, phase, image size, ruleset and budget, with
only the budget's seed changed. Imported at the end of :mod:`services.store.db.models`
(revision ``0025``).

Contract:
- ``submission_replays`` names each replay's original; a replay is never a leaderboard row
  of its own (the boards leave every ``replay_id`` out) and never changes its original's
  numbers: only ``submission_verdicts`` is written for the original.
- ``submission_verdicts`` holds one row per original that was ever verified: ``pending``
  while a replay has not ended, then ``verified`` (every replay's E inside the original's
  fixed-benchmark interval, ``low``..``high``), ``not_reproduced`` (some replay's E outside it)
  or ``inconclusive`` (a replay ended without an E, or the original has no interval). A new
  verify request of the same original makes it ``pending`` again until its replays end.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Double, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from services.store.db.base import Base, created_column, named_check, one_of
from services.store.db.types import JSONDoc, UTCDateTime, utcnow

VERDICTS: tuple[str, ...] = ("pending", "verified", "not_reproduced", "inconclusive")
MARKS: tuple[str, ...] = ("verified", "not_reproduced")
"""The verdicts a leaderboard row shows as a mark (the others are only in the detail)."""


# One replay of an original submission: the seed it ran with and who asked for it.
class SubmissionReplay(Base):
    __tablename__ = "submission_replays"
    __table_args__ = (named_check("replay_id <> original_id", "not_itself"),)

    replay_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    original_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    seed: Mapped[int] = mapped_column(BigInteger)
    # What both ran: the learner's bundle sha256, image reference or entry point, as replayed.
    learner_digest: Mapped[str] = mapped_column(String(500))
    requested_by: Mapped[str | None] = mapped_column(String(100))  # the operator, or "refresh"
    request: Mapped[int] = mapped_column(Integer)  # which verify request of the original made it (1, 2, ...)
    created_at: Mapped[datetime] = created_column()


# The mark an original earned from its replays (one row per verified original).
class SubmissionVerdict(Base):
    __tablename__ = "submission_verdicts"
    __table_args__ = (named_check(one_of("verdict", VERDICTS), "verdict"),)

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    verdict: Mapped[str] = mapped_column(String(16), index=True)
    low: Mapped[float | None] = mapped_column(Double)  # the original's interval of E (fixed benchmark)
    high: Mapped[float | None] = mapped_column(Double)
    level: Mapped[float | None] = mapped_column(Double)
    replays: Mapped[list[Any]] = mapped_column(JSONDoc, default=list)  # [[replay id, E or null, status], ...]
    note: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The verify request it answers (bumped by each request), so a stale settle writes nothing.
    request: Mapped[int] = mapped_column(Integer, default=1)


__all__ = ["MARKS", "VERDICTS", "SubmissionReplay", "SubmissionVerdict"]
