"""Per-submission scores kept beside the results: what a leaderboard row aggregates, stored.

The leaderboard ranks hundreds of submissions of thousands of results each; summing them on
every read took 0.3–3 s, and under a stream of commits every read is a first read. So the
transaction that commits a result also rewrites its submission's row of ``submission_scores``
from that submission's results (:func:`rescore`): at most a stream's length of rows, read by
index, and the row is exactly the aggregate of what is committed, whatever path (a retry, a
failed or stopped run, a resume) led there. :func:`aggregate` is that aggregate, the one
definition the summary, its back-fill (revision 0017) and its tests share. The same rescore
keeps the rest of a leaderboard row (its interval's attempts, the version's profile scores when
a submission finishes: :mod:`services.store.runs.board_summaries`), so a render computes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import Select, case, delete, func, insert, select
from sqlalchemy.orm import Session

from services.store.db.models import StreamTask, Submission, TaskResult
from services.store.db.models_scores import SubmissionScore
from services.store.runs.board_summaries import finished_runs, keep_attempts, keep_finished
from services.store.runs.gpu_energy import gpu_energy_columns

COLUMNS: tuple[str, ...] = (
    "submission_id",
    "tasks_done",
    "cflop",
    "cflop_paper",
    "cpu_seconds",
    "floored_tasks",
    "headline_done",
    "mean_error",
    "inconsistent_tasks",
    "near_floor_tasks",
    "gpu_seconds",
    "gpu_note",
    "energy_kwh",
    "energy_source",
)
"""The columns of ``submission_scores``, in the order :func:`aggregate` selects them."""
CHUNK = 500
"""Submissions rescored per statement (SQLite's bound parameters are limited)."""


def aggregate(submission_ids: Sequence[int] | None = None) -> Select:
    """The scores of the given submissions (every one with results: None), computed from
    their ``task_results`` now, one row each in :data:`COLUMNS` order."""
    headline = StreamTask.phase == Submission.phase  # the submission's own phase's tasks
    query = (
        select(
            TaskResult.submission_id.label("submission_id"),
            func.count(TaskResult.id).label("tasks_done"),
            func.sum(TaskResult.flops).label("cflop"),
            case(
                (func.count(TaskResult.flops_paper) == func.count(TaskResult.id), func.sum(TaskResult.flops_paper)),
                else_=None,
            ).label("cflop_paper"),  # COUNT(column) skips NULLs: every task split, or NULL
            func.sum(TaskResult.cpu_seconds).label("cpu_seconds"),  # SUM skips NULLs; all NULL: NULL
            func.sum(case((TaskResult.flops_floored, 1), else_=0)).label("floored_tasks"),
            func.count(case((headline, TaskResult.id))).label("headline_done"),
            func.avg(case((headline, TaskResult.error))).label("mean_error"),
            func.sum(case((TaskResult.inconsistent, 1), else_=0)).label("inconsistent_tasks"),
            func.sum(case((TaskResult.flops_near_floor, 1), else_=0)).label("near_floor_tasks"),
            *gpu_energy_columns(),
        )
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .join(Submission, Submission.id == TaskResult.submission_id)
        .group_by(TaskResult.submission_id)
    )
    if submission_ids is not None:
        query = query.where(TaskResult.submission_id.in_(list(submission_ids)))
    return query


def rescore(session: Session, *, submission_ids: Iterable[int]) -> None:
    """Rewrite the scores of these submissions from their results, in the caller's transaction.

    Each submission's row is locked first (``FOR NO KEY UPDATE`` on PostgreSQL, the lock its
    commit's own UPDATE takes; SQLite serializes writers anyway): a concurrent commit to the
    same submission waits for this transaction, then re-reads its results, committed ones
    included, so the last writer's row is the aggregate of everything committed.
    """
    ids = sorted(set(submission_ids))
    session.flush()  # the caller's new results are in the aggregate
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        session.execute(
            select(Submission.id)
            .where(Submission.id.in_(chunk))
            .order_by(Submission.id)
            .with_for_update(key_share=True)
        )
        session.execute(delete(SubmissionScore).where(SubmissionScore.submission_id.in_(chunk)))
        session.execute(insert(SubmissionScore).from_select(list(COLUMNS), aggregate(chunk)))
        keep_attempts(session, submission_ids=chunk)
    finished: set[tuple[int, int]] = set()
    for start in range(0, len(ids), CHUNK):
        finished |= finished_runs(session, submission_ids=ids[start : start + CHUNK])
    keep_finished(session, finished)  # a finished run moves every profile score of its version, and its learner's seeds


__all__ = ["COLUMNS", "aggregate", "rescore"]
