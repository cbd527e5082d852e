"""The uncertainty a leaderboard page shows beside each E: the run's bootstrap interval
(:func:`services.store.runs.uncertainty.run_interval`, kept in the object store once computed)
and, for a learner with several complete runs here (seeds), the mean, SD and Student t interval
of their E (:func:`services.core.uncertainty.over_seeds`). Kept apart from the leaderboard's
query so the ranked page stays one SQL scan; this reads only the rows on the page."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.uncertainty import SeedSummary, over_seeds
from services.store.db.models import Learner, StreamVersion, Submission
from services.store.objects import ObjectStore
from services.store.runs.leaderboard import LeaderboardPage
from services.store.runs.summary import load_summary
from services.store.runs.uncertainty import RunInterval, headline_rows, run_interval
from services.store.runs.visibility import ANONYMOUS, Viewer, visible_to


@dataclass(frozen=True)
class RowUncertainty:
    interval: RunInterval
    seeds: SeedSummary | None  # None: fewer than two complete runs of the learner here


def board_uncertainty(session: Session, store: ObjectStore, page: LeaderboardPage,
                      viewer: Viewer = ANONYMOUS) -> dict[int, RowUncertainty]:
    """Submission id → its interval and its learner's spread over seeds, for the page's rows."""
    version_id = session.scalar(select(StreamVersion.id).where(
        StreamVersion.name == page.stream, StreamVersion.version == page.version))
    summaries = {row.submission_id: load_summary(session, submission_id=row.submission_id) for row in page.rows}
    seeds = {learner: _seeds(session, version_id, learner, page.phase, viewer)
             for learner in {row.learner for row in page.rows}}
    return {row.submission_id: RowUncertainty(run_interval(session, store, summary=summaries[row.submission_id]),
                                               seeds[row.learner])
            for row in page.rows}


def _seeds(session: Session, version_id: int | None, learner: str, phase: str, viewer: Viewer) -> SeedSummary | None:
    """The spread of E over the learner's complete runs on the stream version ``viewer`` may read."""
    ids = session.scalars(
        select(Submission.id).join(Learner, Learner.id == Submission.learner_id)
        .where(Learner.name == learner, Submission.stream_version_id == version_id, Submission.phase == phase,
               visible_to(viewer))).all()
    errors = []
    for submission_id in ids:
        summary = load_summary(session, submission_id=submission_id)
        if summary.mean_error is not None and len(headline_rows(summary)) == summary.headline_tasks:
            errors.append(summary.mean_error)
    return over_seeds(errors) if len(errors) > 1 else None


__all__ = ["RowUncertainty", "board_uncertainty"]
