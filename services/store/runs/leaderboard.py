"""The leaderboard's read model: submissions of one stream version ranked by E, in SQL.

One query per page over one row per submission (:func:`services.store.runs.board_query.ranked_query`):
each submission's aggregate is kept in ``submission_scores`` as its results commit
(:mod:`services.store.runs.scores`), so a first read after a commit scans no results. E (mean error
over the phase's committed headline tasks), cFLOP (FLOPs of every committed task) and cFLOP (paper)
(their trials' training updates, as NEVIS'22 counts; NULL when a task was stored before FLOPs were
split by purpose), the cFLOP of the run that made a self-pretrained checkpoint (``pt_self``; shown
beside, never added to cFLOP nor the front), the harness-measured CPU seconds beside it, whether any
of cFLOP is the harness's CPU-time floor, and progress are aggregated by the database and paginated
there, so a page reads only the rows it shows. The front, the pickers and the kept seeds are read by
:mod:`services.store.runs.board_front`.

Every read takes the :class:`~services.store.runs.visibility.Viewer` it answers (default:
anonymous): private submissions it may not read are left out before ranking, so ranks,
totals and the seeds' spread are those of the rows that viewer sees.

Beside those, each row carries its performance-profile scores (given by the caller, computed
over every finished submission by :func:`services.store.runs.profiles.profile_scores`; a page
sorted by them is ordered in Python over the filtered rows' ids, then read as one page) and
whether its learner's code is public: a built-in baseline's is (this repository), any other's
only when its submitter gave ``code_url``. ``code="public"`` keeps only those rows (an operator
may make it the default ranking, ``NEVIS_LEADERBOARD_CODE``: docs/isolation.md, "Public data").
A row replayed by an operator carries its verification mark and its replays' ids
(:mod:`services.store.runs.verdicts`); replays are never rows (:mod:`services.store.runs.board_query`).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from services.core.seed_groups import SeedGroup, seed_group
from services.store.db.models import Learner, StreamVersion, Submission
from services.store.db.models_scores import SubmissionProfile, SubmissionScore
from services.store.runs.board_query import (
    RANKED_PHASE,
    CodeFilter,
    best_first,
    board_filters,
    headline_tasks,
    ranked_query,
    version_id,
)
from services.store.runs.verdicts import marks_of
from services.store.runs.visibility import ANONYMOUS, Viewer

SortKey = Literal["rank", "E", "cflop", "cflop_paper", "profile", "date", "learner", "tasks"]
SORT_KEYS: tuple[str, ...] = ("rank", "E", "cflop", "cflop_paper", "profile", "date", "learner", "tasks")
ProfileScores = Mapping[int, tuple[float, float | None]]
"""Submission id → (error-profile score, cFLOP-profile score or None), finished submissions only."""
# The sort keys that are metrics: their best-first order is their spec's direction.
_SORT_METRICS: Mapping[str, str] = {"rank": "E", "E": "E", "cflop": "cFLOP", "cflop_paper": "cFLOP"}


@dataclass(frozen=True)
class LeaderboardRow:
    """One submission as the leaderboard shows it."""

    rank: int | None  # by E among submissions that have one; ties share a rank
    submission_id: int
    learner: str
    owner: str | None  # None: a local run (`nevis run`), not submitted over the API
    baseline: bool
    phase: str
    status: str
    mean_error: float | None
    cflop: float
    tasks_done: int
    headline_tasks: int
    headline_done: int
    created_at: datetime
    finished_at: datetime | None
    runs_of_learner: int = 1  # finished runs of this learner here (seeds), this one included
    learner_e_std: float | None = None  # sample standard deviation of their E, when 2 or more
    visibility: str = "public"  # "private": shown only to its owner and admins
    cpu_seconds: float | None = None  # committed tasks' harness-measured CPU time; None: none measured
    flops_floored: bool = False  # a committed task was charged the harness's CPU-time floor
    cflop_paper: float | None = None  # NEVIS'22's count; None: a committed task was not split
    cflop_pretraining: float | None = None  # the self-pretrained checkpoint's own run: shown, not in cflop
    profile_score: float | None = None  # area under its error profile, 0-1; None: not finished (not profiled)
    cflop_profile_score: float | None = None  # the same for cFLOP to reach Indep; None: no Indep run, or not profiled
    code_url: str | None = None  # where its learner's code is public, as its submitter gave it
    code_public: bool = False  # a baseline, or a code_url given: False is marked "code not public"
    ruleset: str = "open"  # the rules it competed under (services.core.rulesets): each has its own board
    inconsistent: bool = False  # a task's answers jumped on shifted copies (workers/trainer/consistency.py): marked
    near_floor: bool = False  # a committed task's trial counted within NEVIS_NEAR_FLOOR_BAND × its floor: marked
    verification: str | None = None  # replayed with new seeds: pending, verified, not_reproduced, inconclusive
    verified_mark: str | None = None  # what the row shows: verified or not_reproduced (verdicts.LEGEND)
    replays: tuple[int, ...] = ()  # the replays it was judged by (never rows of their own)
    gpu_seconds: float | None = None  # committed tasks' GPU time (NVML); None: none measured, gpu_note says why
    gpu_note: str | None = None
    energy_kwh: float | None = None  # RAPL's, or the estimate energy_source names (docs/running.md)
    energy_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LeaderboardPage:
    stream: str
    version: str
    phase: str
    rows: tuple[LeaderboardRow, ...]
    total: int
    limit: int
    offset: int


def leaderboard(
    session: Session,
    *,
    stream: str,
    version: str,
    sort: SortKey = "rank",
    descending: bool = False,
    limit: int = 50,
    offset: int = 0,
    learner_prefix: str | None = None,
    since: datetime | None = None,
    baselines: bool | None = None,
    viewer: Viewer = ANONYMOUS,
    profiles: ProfileScores | Literal["kept"] | None = None,
    ruleset: str | None = None,
    code: CodeFilter = "any",
) -> LeaderboardPage:
    """One page of the meta-test leaderboard of ``stream``/``version``, as ``viewer`` sees it,
    with ``profiles``' scores on its rows (``"kept"``: an anonymous reader's, as the commits kept
    them, read for the page's rows only). ``sort="profile"`` orders by the error-profile score,
    best (highest) first, ``descending`` worst first; rows without one come last either way.
    ``ruleset`` keeps the rows of one ruleset (each has its own board; None: every row);
    ``code="public"`` only rows whose code is public (ranks are among those rows)."""
    kept = profiles == "kept"
    if kept:
        profiles = _kept_scores(session, stream, version) if sort == "profile" else None
    profiles = profiles or {}
    headline = headline_tasks(stream, version)
    filters = board_filters(
        stream=stream,
        version=version,
        learner_prefix=learner_prefix,
        since=since,
        baselines=baselines,
        viewer=viewer,
        ruleset=ruleset,
        code=code,
    )
    base = ranked_query(filters, headline).subquery()
    if sort == "profile":
        rows, total = _by_profile(session, base, profiles, descending=descending, limit=limit, offset=offset)
    else:
        column = {
            "rank": base.c.rank,
            "E": base.c.mean_error,
            "cflop": base.c.cflop,
            "cflop_paper": base.c.cflop_paper,
            "date": base.c.created_at,
            "learner": base.c.learner,
            "tasks": base.c.tasks_done,
        }[sort]
        if sort in _SORT_METRICS and sort != "rank":  # best first; descending: worst first
            order = best_first(column, _SORT_METRICS[sort], worst_first=descending)
        else:  # the rank is best first already
            order = column.desc() if descending else column.asc()
        keys = [column.is_(None), order]  # unranked rows last
        if sort == "rank":
            keys.append(best_first(base.c.cflop, "cFLOP"))  # equal E: the better cFLOP first
        rows = session.execute(
            select(base, func.count().over().label("total_rows"))  # the total in the same scan
            .order_by(*keys, base.c.submission_id)
            .limit(limit)
            .offset(offset)
        ).all()
        total = rows[0].total_rows if rows else session.scalar(select(func.count()).select_from(base)) or 0
    if kept and sort != "profile":
        profiles = _kept_scores(session, stream, version, [r.submission_id for r in rows])
    spread = _spread_by_group(session, filters, headline, [r.submission_id for r in rows])
    marks = marks_of(session, [r.submission_id for r in rows if r.verification is not None])  # none: no query
    return LeaderboardPage(
        stream=stream,
        version=version,
        phase=RANKED_PHASE,
        total=int(total),
        limit=limit,
        offset=offset,
        rows=tuple(
            LeaderboardRow(
                rank=r.rank,
                submission_id=r.submission_id,
                learner=r.learner,
                owner=r.owner,
                baseline=bool(r.baseline),
                phase=r.phase,
                status=r.status,
                mean_error=None if r.mean_error is None else float(r.mean_error),
                cflop=float(r.cflop or 0.0),
                tasks_done=int(r.tasks_done or 0),
                headline_tasks=int(r.headline_tasks or 0),
                headline_done=int(r.headline_done or 0),
                created_at=r.created_at,
                finished_at=r.finished_at,
                runs_of_learner=spread.get(r.submission_id, (1, None))[0],
                learner_e_std=spread.get(r.submission_id, (1, None))[1],
                visibility=r.visibility,
                cpu_seconds=None if r.cpu_seconds is None else float(r.cpu_seconds),
                flops_floored=bool(r.flops_floored),
                cflop_paper=None if r.cflop_paper is None else float(r.cflop_paper),
                cflop_pretraining=None if r.cflop_pretraining is None else float(r.cflop_pretraining),
                profile_score=profiles.get(r.submission_id, (None, None))[0],
                cflop_profile_score=profiles.get(r.submission_id, (None, None))[1],
                code_url=r.code_url,
                code_public=bool(r.baseline) or r.code_url is not None,
                ruleset=r.ruleset,
                inconsistent=bool(r.inconsistent),
                near_floor=bool(r.near_floor),
                **(marks[r.submission_id].row_fields() if r.submission_id in marks else {}),
                gpu_seconds=r.gpu_seconds,
                gpu_note=r.gpu_note,
                energy_kwh=r.energy_kwh,
                energy_source=r.energy_source,
            )
            for r in rows
        ),
    )


def _kept_scores(session: Session, stream: str, version: str, ids: list[int] | None = None) -> ProfileScores:
    """The kept profile scores (``submission_profiles``) of the version's submissions (or of ``ids``)."""
    query = (
        select(SubmissionProfile.submission_id, SubmissionProfile.error_score, SubmissionProfile.cflop_score)
        .join(Submission, Submission.id == SubmissionProfile.submission_id)
        .where(Submission.stream_version_id == version_id(stream, version))
    )
    if ids is not None:
        query = query.where(SubmissionProfile.submission_id.in_(ids))
    return {i: (error, cflop) for i, error, cflop in session.execute(query)}


def _by_profile(
    session: Session, base: Any, profiles: ProfileScores, *, descending: bool, limit: int, offset: int
) -> tuple[list[Any], int]:
    """One page of ``base`` ordered by error-profile score (the scores are not in SQL): every
    row's id, ordered here, then the page's rows in that order; and the total."""
    ids = list(session.scalars(select(base.c.submission_id)))
    sign = 1.0 if descending else -1.0
    ids.sort(key=lambda i: (i not in profiles, sign * profiles[i][0] if i in profiles else 0.0, i))
    wanted = ids[offset : offset + limit]
    found = {r.submission_id: r for r in session.execute(select(base).where(base.c.submission_id.in_(wanted)))}
    return [found[i] for i in wanted], len(ids)


@functools.lru_cache(maxsize=256)
def _stdev(values: tuple[float, ...]) -> float:
    """statistics.stdev (exact, and slow: a few hundred seeds take a millisecond), remembered:
    a learner's kept seeds change only when one of its runs finishes."""
    return statistics.stdev(values)


def _spread_by_group(
    session: Session, filters: list[Any], headline: Any, ids: list[int]
) -> dict[int, tuple[int, float | None]]:
    """Per row on the page: the finished runs here (among the board's rows) of its seed group
    (learner, budget, image size, options digest: :mod:`services.core.seed_groups`; runs of other
    configurations are never pooled) and the SD of their E; one query over the kept scores of the
    page's learners, not the ranked board again."""
    if not ids:
        return {}
    shown = aliased(Submission)
    learners = select(shown.learner_id).where(shown.id.in_(ids))
    page: dict[int, SeedGroup] = {}
    found: dict[SeedGroup, list[float]] = {}
    for i, learner, budget, size, error, done, complete in session.execute(
        select(
            Submission.id,
            Learner.name,
            Submission.budget,
            Submission.image_size,
            SubmissionScore.mean_error,
            SubmissionScore.headline_done,
            headline,
        )
        .select_from(Submission)
        .join(Learner, Learner.id == Submission.learner_id)
        .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
        .outerjoin(SubmissionScore, SubmissionScore.submission_id == Submission.id)
        .where(*filters, Submission.learner_id.in_(learners), headline > 0)
    ):
        group = seed_group(learner, budget or {}, size)
        if i in ids:
            page[i] = group
        if error is not None and done == complete:
            found.setdefault(group, []).append(float(error))
    return {
        i: (len(found[g]), _stdev(tuple(found[g])) if len(found[g]) > 1 else None)
        for i, g in page.items()
        if g in found
    }


__all__ = ["SORT_KEYS", "LeaderboardPage", "LeaderboardRow", "ProfileScores", "SortKey", "leaderboard"]
