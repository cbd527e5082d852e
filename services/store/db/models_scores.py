"""The leaderboard's summary table: one row per submission with results, kept with them.

Aggregating every committed result on each leaderboard read cost 0.3–3 s at 106,000 results,
and under a stream of commits every read is a first read. ``submission_scores`` holds, per
submission, the aggregate a leaderboard row shows, so a read scans one row per submission.
Imported at the end of :mod:`services.store.db.models` (revision ``0017``).

Contract:
- A row equals the aggregate of the submission's ``task_results`` (see
  :mod:`services.store.runs.scores`), and is rewritten from them in the transaction that
  commits a result (:func:`services.store.runs.records.commit_task`); a submission without
  results has no row. Revision 0017 back-fills it for results stored before.
- ``mean_error`` and ``headline_done`` count the results of the submission's own phase's tasks
  (its headline tasks); the rest count every committed task.
- Deleting a submission deletes its row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Double, ForeignKey, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from services.store.db.base import Base, non_negative
from services.store.db.types import JSONDoc


# The aggregate of one submission's committed results, as its leaderboard row shows it.
class SubmissionScore(Base):
    __tablename__ = "submission_scores"
    __table_args__ = non_negative("tasks_done", "headline_done", "floored_tasks", "cflop", "cflop_paper", "cpu_seconds")

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    tasks_done: Mapped[int] = mapped_column(Integer)  # committed tasks
    cflop: Mapped[float] = mapped_column(Double)  # their FLOPs
    cflop_paper: Mapped[float | None] = mapped_column(Double)  # NEVIS'22's count; NULL: a task was not split
    cpu_seconds: Mapped[float | None] = mapped_column(Double)  # harness-measured; NULL: none measured
    floored_tasks: Mapped[int] = mapped_column(Integer)  # tasks charged the harness's CPU-time floor
    # tasks the meta-test consistency check marked (workers/trainer/consistency.py)
    inconsistent_tasks: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # tasks a trial of which counted within NEVIS_NEAR_FLOOR_BAND × its floor (revision 0024)
    near_floor_tasks: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # the committed tasks' GPU time and energy (revision 0027; services/store/runs/gpu_energy.py)
    gpu_seconds: Mapped[float | None] = mapped_column(Double)  # NULL: no GPU measured (gpu_note says why)
    gpu_note: Mapped[str | None] = mapped_column(Text)
    energy_kwh: Mapped[float | None] = mapped_column(Double)
    energy_source: Mapped[str | None] = mapped_column(String(16))  # rapl or estimate, +nvml
    headline_done: Mapped[int] = mapped_column(Integer)  # committed tasks of the submission's phase
    mean_error: Mapped[float | None] = mapped_column(Double)  # E over those; NULL: none yet


# What a leaderboard row shows beside its E, kept per submission so a render computes nothing
# (revision 0019; services/store/runs/board_summaries.py writes both tables).
class SubmissionInterval(Base):
    """The committed headline attempts E's bootstrap interval is over, rewritten in the commit's
    transaction, and the interval over exactly them once the run's end computed it (else NULL)."""

    __tablename__ = "submission_intervals"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    attempts: Mapped[list[Any]] = mapped_column(JSONDoc)  # [[order, attempt], ...] by order
    interval: Mapped[dict[str, Any] | None] = mapped_column(JSONDoc)  # interval_cache's document; NULL: not kept


class SubmissionProfile(Base):
    """A finished public meta-test submission's performance-profile scores among every finished
    public one of its stream version (what an anonymous reader sees), rewritten for the whole
    version in the transaction that finishes one (or changes a finished one's results)."""

    __tablename__ = "submission_profiles"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    error_score: Mapped[float] = mapped_column(Double)
    cflop_score: Mapped[float | None] = mapped_column(Double)  # NULL: no Indep run to compare with
    error_curve: Mapped[list[float] | None] = mapped_column(JSONDoc)  # kept for the best few (the board's figure)


class LearnerSeeds(Base):
    """A learner's finished public meta-test runs of one stream version (its seeds): their E and
    creation times, by submission id, rewritten in the transaction that finishes one (revision 0020)."""

    __tablename__ = "learner_seeds"

    stream_version_id: Mapped[int] = mapped_column(
        ForeignKey("stream_versions.id", ondelete="CASCADE"), primary_key=True
    )
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True)
    errors: Mapped[list[float]] = mapped_column(JSONDoc)
    created: Mapped[list[str]] = mapped_column(JSONDoc)  # each run's created_at (ISO 8601), in the same order


__all__ = ["LearnerSeeds", "SubmissionInterval", "SubmissionProfile", "SubmissionScore"]
