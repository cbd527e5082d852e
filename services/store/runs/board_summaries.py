"""What a leaderboard row shows beside its scores, kept per submission as results commit.

Each render used to compute every row's bootstrap-interval key from its committed attempts
(about a hundred results a row) and every row's performance-profile score (over every finished
submission's results: 80–100 ms at 1,000 submissions), and under a stream of commits every
read renders again. So the transaction that commits a result (through
:func:`services.store.runs.scores.rescore`) also keeps:

- ``submission_intervals``: the submission's committed headline attempts, which name its E
  interval (:func:`services.store.runs.interval_cache.interval_key`); the interval itself is
  cleared when they change and written when the run's end computes it
  (:func:`keep_board_interval`);
- ``submission_profiles``: when the commit leaves a public meta-test submission finished (all
  headline tasks scored), the profile scores of every finished public submission of its stream
  version within its ruleset (each ruleset's board is profiled on its own, issue 50), as
  :func:`services.store.runs.profiles.performance_profiles` computes them for an anonymous
  reader, rewritten for the whole version (one submission's finish moves every
  score). Refreshes of a version are serialized on its row, so the last one sees every finish;
- ``learner_seeds``: then, the E of every finished public run of that submission's learner on
  the version and when each was created. No render reads it since issue 47: a row's spread over
  seeds is its seed group's (learner, budget, image size, options digest), which a per-learner
  row cannot give, so :mod:`services.store.runs.leaderboard` and
  :mod:`services.store.runs.board_uncertainty` group the kept ``submission_scores`` instead; the
  table awaits a migration that drops it.

Readers who may see private submissions still compute their own profiles and seeds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from services.core.profiles import TAU_MAX
from services.core.uncertainty import ErrorInterval
from services.store.db.models import StreamTask, StreamVersion, Submission, TaskResult, TaskRun
from services.store.db.models_scores import LearnerSeeds, SubmissionInterval, SubmissionProfile, SubmissionScore
from services.store.runs.board_front import front_points, rulesets_of
from services.store.runs.board_query import RANKED_PHASE
from services.store.runs.interval_cache import as_document
from services.store.runs.profiles import BEST_CURVES, profiles_of


def keep_attempts(session: Session, *, submission_ids: Sequence[int]) -> None:
    """Rewrite these submissions' committed headline attempts (in the caller's transaction,
    their rows locked by it); a submission whose attempts changed loses its kept interval."""
    found: dict[int, list[list[int]]] = defaultdict(list)
    for submission_id, order, attempt in session.execute(
        select(TaskResult.submission_id, StreamTask.order, TaskRun.attempt)
        .join(Submission, Submission.id == TaskResult.submission_id)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(TaskRun, TaskRun.id == TaskResult.task_run_id)
        .where(TaskResult.submission_id.in_(list(submission_ids)), StreamTask.phase == Submission.phase)
        .order_by(TaskResult.submission_id, StreamTask.order)
    ):
        found[submission_id].append([order, attempt])
    kept = {
        row.submission_id: row
        for row in session.scalars(
            select(SubmissionInterval).where(SubmissionInterval.submission_id.in_(list(submission_ids)))
        )
    }
    for submission_id in submission_ids:
        attempts = found.get(submission_id, [])
        row = kept.get(submission_id)
        if row is None and attempts:
            session.add(SubmissionInterval(submission_id=submission_id, attempts=attempts, interval=None))
        elif row is not None and [list(a) for a in row.attempts] != attempts:
            row.attempts, row.interval = attempts, None
    session.flush()


def finished_runs(session: Session, *, submission_ids: Sequence[int]) -> set[tuple[int, int]]:
    """(stream version, learner) of the public meta-test submissions among these that are finished now."""
    headline = (
        select(func.count(StreamTask.id))
        .where(StreamTask.stream_version_id == Submission.stream_version_id, StreamTask.phase == Submission.phase)
        .correlate(Submission)
        .scalar_subquery()
    )
    return {
        (version_id, learner_id)
        for version_id, learner_id in session.execute(
            select(Submission.stream_version_id, Submission.learner_id)
            .join(SubmissionScore, SubmissionScore.submission_id == Submission.id)
            .where(
                Submission.id.in_(list(submission_ids)),
                Submission.phase == RANKED_PHASE,
                Submission.visibility == "public",
                SubmissionScore.headline_done == headline,
                SubmissionScore.headline_done > 0,
            )
            .distinct()
        )
    }


def keep_finished(session: Session, runs: set[tuple[int, int]]) -> None:
    """After commits that left these (version, learner) runs finished: each version's profile
    scores, then each learner's seeds (under the version's lock the profiles take)."""
    for version_id in sorted({v for v, _ in runs}):
        keep_profiles(session, stream_version_id=version_id)
        for learner_id in sorted(learner for v, learner in runs if v == version_id):
            keep_seeds(session, stream_version_id=version_id, learner_id=learner_id)


def keep_seeds(session: Session, *, stream_version_id: int, learner_id: int) -> None:
    """Rewrite the E (and creation time) of every finished public meta-test run of this learner
    on this version."""
    headline = (
        session.scalar(
            select(func.count(StreamTask.id)).where(
                StreamTask.stream_version_id == stream_version_id, StreamTask.phase == RANKED_PHASE
            )
        )
        or 0
    )
    runs = session.execute(
        select(SubmissionScore.mean_error, Submission.created_at)
        .join(Submission, Submission.id == SubmissionScore.submission_id)
        .where(
            Submission.stream_version_id == stream_version_id,
            Submission.learner_id == learner_id,
            Submission.phase == RANKED_PHASE,
            Submission.visibility == "public",
            SubmissionScore.headline_done == headline,
            SubmissionScore.mean_error.is_not(None),
        )
        .order_by(Submission.id)
    ).all()
    session.execute(
        delete(LearnerSeeds).where(
            LearnerSeeds.stream_version_id == stream_version_id, LearnerSeeds.learner_id == learner_id
        )
    )
    if runs:
        session.add(
            LearnerSeeds(
                stream_version_id=stream_version_id,
                learner_id=learner_id,
                errors=[float(e) for e, _ in runs],
                created=[c.isoformat() for _, c in runs],
            )
        )
        session.flush()


def keep_profiles(session: Session, *, stream_version_id: int) -> None:
    """Rewrite the profile scores of every finished public meta-test submission of this version
    (in the caller's transaction), after waiting for any other refresh of it to commit."""
    version = session.execute(
        select(StreamVersion).where(StreamVersion.id == stream_version_id).with_for_update(key_share=True)
    ).scalar_one()  # FOR NO KEY UPDATE: refreshes queue
    kept = []
    for ruleset in rulesets_of(session, stream=version.name, version=version.version):  # each board on its own
        points = front_points(session, stream=version.name, version=version.version, ruleset=ruleset)  # anonymous
        found = profiles_of(session, points, stream=version.name, version=version.version, tau_max=TAU_MAX)
        kept += [
            {
                "submission_id": r.submission_id,
                "error_score": r.error_score,
                "cflop_score": r.cflop_score,
                "error_curve": r.error_curve if rank < BEST_CURVES else None,
            }
            for rank, r in enumerate(found.rows)  # best first: the ruleset's best few keep their curves
        ]
    session.execute(
        delete(SubmissionProfile).where(
            SubmissionProfile.submission_id.in_(
                select(Submission.id).where(Submission.stream_version_id == stream_version_id)
            )
        )
    )
    if kept:
        session.execute(insert(SubmissionProfile), kept)


def keep_board_interval(
    session: Session, *, submission_id: int, result: ErrorInterval, attempts: Sequence[tuple[int, int]]
) -> None:
    """Keep a run's computed interval on its row, if the row still names these attempts."""
    row = session.get(SubmissionInterval, submission_id)
    if row is not None and [list(a) for a in row.attempts] == [list(a) for a in attempts]:
        row.interval = as_document(result)


__all__ = ["finished_runs", "keep_attempts", "keep_board_interval", "keep_finished", "keep_profiles", "keep_seeds"]
