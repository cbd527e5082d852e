"""The board's SQL, shared by the leaderboard's page and its front: which submissions a board ranks
(:func:`board_filters`), and one row per submission with its kept aggregate and its rank by E
(:func:`ranked_query`).

Only meta-test submissions are ranked (:data:`RANKED_PHASE`, issue 9 "meta-test hygiene"):
meta-train runs are development runs, tuned freely, and ranking them would make a
leaderboard of tuning; there is no parameter to rank another phase. The order of a metric is its
spec's direction (:func:`best_first`), never written here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Select, case, func, select

from services.core.metric_specs import metric_spec
from services.store.db.models import Learner, StreamTask, StreamVersion, Submission
from services.store.db.models_coordinator import ScheduledSubmission, User
from services.store.db.models_scores import SubmissionScore
from services.store.db.models_verify import SubmissionVerdict
from services.store.runs.verdicts import not_a_replay
from services.store.runs.visibility import Viewer, visible_to

CodeFilter = Literal["any", "public"]
"""Which rows a board ranks by where their code is: all of them, or only those whose code is public."""
CODE_FILTERS: tuple[str, ...] = ("any", "public")
RANKED_PHASE = "meta_test"
"""The one phase leaderboards and fronts rank."""


def is_baseline(entrypoint: Any) -> Any:
    """SQL: built-in learners (``indep``, ...; stored by their registry name, no
    ``module:factory`` colon) are the baselines."""
    return ~entrypoint.contains(":", autoescape=True)


def headline_tasks(stream: str, version: str) -> Any:
    """SQL: the ranked phase's tasks in this stream version (what a finished run has scored),
    an uncorrelated scalar subquery the database evaluates once, not per row."""
    return (
        select(func.count(StreamTask.id))
        .join(StreamVersion, StreamVersion.id == StreamTask.stream_version_id)
        .where(StreamVersion.name == stream, StreamVersion.version == version, StreamTask.phase == RANKED_PHASE)
        .scalar_subquery()
    )


def version_id(stream: str, version: str) -> Any:
    """SQL: the stream version's id, a scalar subquery."""
    return (
        select(StreamVersion.id).where(StreamVersion.name == stream, StreamVersion.version == version).scalar_subquery()
    )


def board_filters(
    *,
    stream: str,
    version: str,
    learner_prefix: str | None,
    since: datetime | None,
    baselines: bool | None,
    viewer: Viewer,
    ruleset: str | None = None,
    code: CodeFilter = "any",
) -> list[Any]:
    """The board's rows: WHERE clauses on submissions joined with their learner and stream version."""
    filters = [
        StreamVersion.name == stream,
        StreamVersion.version == version,
        Submission.phase == RANKED_PHASE,
        visible_to(viewer),
        not_a_replay(),  # a replay is judged against its original, never ranked (verification.py)
    ]
    if ruleset is not None:
        filters.append(Submission.ruleset == ruleset)
    if learner_prefix:
        filters.append(Learner.name.startswith(learner_prefix, autoescape=True))
    if since is not None:
        filters.append(Submission.created_at >= since)
    if baselines is not None:
        filters.append(is_baseline(Learner.entrypoint) if baselines else ~is_baseline(Learner.entrypoint))
    if code == "public":  # as a row's code_public says: a baseline, or a code_url given
        filters.append(is_baseline(Learner.entrypoint) | Submission.code_url.is_not(None))
    return filters


def best_first(column: Any, metric: str, *, worst_first: bool = False) -> Any:
    """SQL: ``column`` ordered best first by ``metric``'s spec (its direction), or worst first."""
    return column.desc() if metric_spec(metric).higher_is_better != worst_first else column.asc()


def ranked_query(filters: list[Any], headline: Any) -> Select:
    scored = SubmissionScore  # the aggregate of each submission's results, kept as they commit
    baseline = is_baseline(Learner.entrypoint)
    return (
        select(
            Submission.id.label("submission_id"),
            Learner.name.label("learner"),
            User.name.label("owner"),
            baseline.label("baseline"),
            Submission.phase.label("phase"),
            Submission.status.label("status"),
            scored.mean_error,
            func.coalesce(scored.cflop, 0.0).label("cflop"),
            scored.cpu_seconds,
            (func.coalesce(scored.floored_tasks, 0) > 0).label("flops_floored"),
            scored.cflop_paper,
            func.coalesce(scored.tasks_done, 0).label("tasks_done"),
            func.coalesce(scored.headline_done, 0).label("headline_done"),
            headline.label("headline_tasks"),  # one count, not a join of the tasks per row
            Submission.created_at.label("created_at"),
            Submission.finished_at.label("finished_at"),
            Submission.visibility.label("visibility"),
            Submission.cflop_pretraining.label("cflop_pretraining"),
            Submission.code_url.label("code_url"),
            Submission.ruleset.label("ruleset"),
            (func.coalesce(scored.inconsistent_tasks, 0) > 0).label("inconsistent"),
            SubmissionVerdict.verdict.label("verification"),  # replayed with new seeds (verification.py)
            (func.coalesce(scored.near_floor_tasks, 0) > 0).label("near_floor"),
            scored.gpu_seconds,
            scored.gpu_note,
            scored.energy_kwh,
            scored.energy_source,
            case(
                (
                    scored.mean_error.is_not(None),
                    func.rank().over(order_by=(scored.mean_error.is_(None), best_first(scored.mean_error, "E"))),
                ),
                else_=None,
            ).label("rank"),
        )
        .join(Learner, Learner.id == Submission.learner_id)
        .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
        .outerjoin(scored, scored.submission_id == Submission.id)
        .outerjoin(SubmissionVerdict, SubmissionVerdict.submission_id == Submission.id)
        .outerjoin(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
        .outerjoin(User, User.id == ScheduledSubmission.user_id)
        .where(*filters)
    )


__all__ = [
    "CODE_FILTERS",
    "RANKED_PHASE",
    "CodeFilter",
    "best_first",
    "board_filters",
    "headline_tasks",
    "is_baseline",
    "ranked_query",
    "version_id",
]
