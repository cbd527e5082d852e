"""The uncertainty a leaderboard shows beside each E: the run's interval on this benchmark (the
tasks kept, test examples resampled) and, for a configuration with several complete runs here
(seeds: the same learner, budget, image size and options digest, :mod:`services.core.seed_groups`),
the mean, SD and Student t interval of their E (:func:`services.core.uncertainty.over_seeds`).

Kept apart from the leaderboard's query, and cheap, because a leaderboard is read often and
rendered again after every commit: two queries for the page's rows (their kept summary rows,
``submission_intervals``: the committed attempts, rewritten as each commits, and the interval
the run's end computed over them; and the E of every run of their learners). A row whose
interval is not kept there reads the object store's copy
(:mod:`services.store.runs.interval_cache`: a run's page or ``nevis results`` keep it as they
read it) once per process; a finished run without any is computed here once (then kept), one
without predictions is remembered as such, and a live one says why it has none yet, so no
render resamples twice. The spread over seeds reads the kept
per-submission scores (:mod:`services.store.runs.scores`) of the page's learners in one query,
never the results: under a stream of commits every read renders again.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.core.seed_groups import SeedGroup, seed_group
from services.core.uncertainty import RESAMPLES, SEED, SeedSummary, over_seeds
from services.store.db.models import Learner, StreamTask, StreamVersion, Submission
from services.store.db.models_scores import SubmissionInterval, SubmissionScore
from services.store.objects import ObjectStore
from services.store.runs.interval_cache import from_document, interval_key, is_current, load_interval
from services.store.runs.leaderboard import LeaderboardPage, LeaderboardRow
from services.store.runs.predictions import predictions_key
from services.store.runs.uncertainty import RunInterval, run_interval_of
from services.store.runs.verdicts import not_a_replay
from services.store.runs.visibility import ANONYMOUS, Viewer, visible_to

LIVE = ("queued", "running")


@dataclass(frozen=True)
class RowUncertainty:
    interval: RunInterval
    seeds: SeedSummary | None  # None: fewer than two complete runs of the row's seed group here


def board_uncertainty(
    session: Session, store: ObjectStore, page: LeaderboardPage, viewer: Viewer = ANONYMOUS
) -> dict[int, RowUncertainty]:
    """Submission id → its interval and its learner's spread over seeds, for the page's rows."""
    if not page.rows:
        return {}
    version_id = session.scalar(
        select(StreamVersion.id).where(StreamVersion.name == page.stream, StreamVersion.version == page.version)
    )
    ids = [row.submission_id for row in page.rows]
    kept = {
        submission_id: ([(int(o), int(a)) for o, a in attempts], interval)
        for submission_id, attempts, interval in session.execute(
            select(SubmissionInterval.submission_id, SubmissionInterval.attempts, SubmissionInterval.interval).where(
                SubmissionInterval.submission_id.in_(ids)
            )
        )
    }
    seeds = _seeds(session, version_id, page.rows, page.phase, viewer)
    found = {}
    for row in page.rows:
        attempts, interval = kept.get(row.submission_id, ([], None))
        found[row.submission_id] = RowUncertainty(
            _interval(session, store, row, attempts, interval), seeds.get(row.submission_id)
        )
    return found


def _interval(
    session: Session, store: ObjectStore, row: LeaderboardRow, attempts: list[tuple[int, int]], document: dict | None
) -> RunInterval:
    """The row's kept interval; a finished run's is computed once if it has predictions, and a
    finished run without them (committed before they were kept) is remembered as such."""
    orders = tuple(o for o, _ in attempts)
    if not orders:
        return RunInterval(row.submission_id, row.mean_error, None, orders, "no committed task")
    if document is not None and is_current(document):  # kept as the run ended, over exactly these attempts
        return RunInterval(row.submission_id, row.mean_error, from_document(document), orders)
    key = interval_key(row.submission_id, attempts, resamples=RESAMPLES, seed=SEED)
    remembered = _FINISHED.get((str(getattr(store, "url", id(store))), key))
    if remembered is not None:
        return remembered
    kept = load_interval(store, key)
    if kept is not None:
        return _remember(store, key, RunInterval(row.submission_id, row.mean_error, kept, orders))
    if row.status in LIVE:
        return RunInterval(row.submission_id, row.mean_error, None, orders, "computed as the run ends (or on its page)")
    if store.exists(predictions_key(row.submission_id, *attempts[0])):
        return run_interval_of(session, store, submission_id=row.submission_id)
    return _remember(
        store,
        key,
        RunInterval(
            row.submission_id,
            row.mean_error,
            None,
            orders,
            "no stored test predictions (tasks committed before predictions were kept have none)",
        ),
    )


def _remember(store: ObjectStore, key: str, result: RunInterval) -> RunInterval:
    """Keep what a key's attempts gave in this process: the key names them, so it never changes."""
    if len(_FINISHED) < _FINISHED_SIZE:
        _FINISHED[(str(getattr(store, "url", id(store))), key)] = result
    return result


_FINISHED: dict[tuple[str, str], RunInterval] = {}
_FINISHED_SIZE = 100_000


@functools.lru_cache(maxsize=256)
def _over_seeds(values: tuple[float, ...]) -> SeedSummary:
    """over_seeds, remembered: a learner's kept seeds change only when one of its runs finishes."""
    return over_seeds(values)


def _seeds(
    session: Session, version_id: int | None, rows: tuple[LeaderboardRow, ...], phase: str, viewer: Viewer
) -> dict[int, SeedSummary]:
    """Per page row, the spread of E over the complete runs here of its seed group (learner,
    budget, image size, options digest: :mod:`services.core.seed_groups`) that ``viewer`` may
    read, where the group has two or more; never pooled across configurations."""
    headline = (
        session.scalar(
            select(func.count())
            .select_from(StreamTask)
            .where(StreamTask.stream_version_id == version_id, StreamTask.phase == phase)
        )
        or 0
    )
    if not headline or not rows:
        return {}
    learners = {row.learner for row in rows}
    complete = session.execute(
        select(Learner.name, Submission.budget, Submission.image_size, SubmissionScore.mean_error)
        .join(Submission, Submission.learner_id == Learner.id)
        .join(SubmissionScore, SubmissionScore.submission_id == Submission.id)
        .where(
            Learner.name.in_(learners),
            Submission.stream_version_id == version_id,
            Submission.phase == phase,
            SubmissionScore.headline_done == headline,
            SubmissionScore.mean_error.is_not(None),
            visible_to(viewer),
            not_a_replay(),
        )
        .order_by(Submission.id)
    ).all()
    errors: dict[SeedGroup, list[float]] = defaultdict(list)
    for learner, budget, image_size, mean in complete:
        errors[seed_group(learner, budget or {}, image_size)].append(float(mean))
    groups = {
        i: seed_group(learner, budget or {}, image_size)
        for i, learner, budget, image_size in session.execute(
            select(Submission.id, Learner.name, Submission.budget, Submission.image_size)
            .join(Learner, Learner.id == Submission.learner_id)
            .where(Submission.id.in_([row.submission_id for row in rows]))
        )
    }
    return {i: _over_seeds(tuple(errors[group])) for i, group in groups.items() if len(errors.get(group, ())) > 1}


__all__ = ["RowUncertainty", "board_uncertainty"]
