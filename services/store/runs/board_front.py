"""What the leaderboard shows beside its page, read over the same rows (:mod:`services.store.runs.board_query`):
the Pareto front's points (METRICS.md §1: every finished submission's two numbers, two floats a
row), the stream versions and rulesets a viewer may pick, and the seeds the commits kept.

Every read takes the :class:`~services.store.runs.visibility.Viewer` it answers (default:
anonymous): private submissions it may not read are left out, so the front is that of the rows
that viewer sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.core.metrics import pareto_front
from services.store.db.models import Learner, StreamVersion, Submission
from services.store.db.models_scores import LearnerSeeds
from services.store.runs.board_query import CodeFilter, board_filters, headline_tasks, ranked_query
from services.store.runs.visibility import ANONYMOUS, Viewer, visible_to


@dataclass(frozen=True)
class FrontPoint:
    submission_id: int
    learner: str
    baseline: bool
    mean_error: float
    cflop: float
    on_front: bool


def stream_versions(session: Session, viewer: Viewer = ANONYMOUS) -> list[tuple[str, str]]:
    """(name, version) of every stream version that has submissions ``viewer`` may read,
    newest first."""
    rows = session.execute(
        select(StreamVersion.name, StreamVersion.version, func.max(Submission.created_at))
        .join(Submission, Submission.stream_version_id == StreamVersion.id)
        .where(visible_to(viewer))
        .group_by(StreamVersion.name, StreamVersion.version)
        .order_by(func.max(Submission.created_at).desc())
    ).all()
    return [(name, version) for name, version, _ in rows]


def kept_seeds(
    session: Session, *, stream_version_id: Any, learners: set[str], since: datetime | None = None
) -> dict[str, list[float]]:
    """Learner name → E of its finished public runs on the version (``stream_version_id``: an id
    or a scalar subquery; ``since``: only those created since then), as the commits kept them
    (:func:`services.store.runs.board_summaries.keep_seeds`)."""
    if not learners:
        return {}
    found = {}
    for name, errors, created in session.execute(
        select(Learner.name, LearnerSeeds.errors, LearnerSeeds.created)
        .join(Learner, Learner.id == LearnerSeeds.learner_id)
        .where(LearnerSeeds.stream_version_id == stream_version_id, Learner.name.in_(learners))
    ):
        values = [
            float(e)
            for e, c in zip(errors, created, strict=True)
            if since is None or datetime.fromisoformat(c) >= since
        ]
        if values:
            found[name] = values
    return found


def front_points(
    session: Session,
    *,
    stream: str,
    version: str,
    learner_prefix: str | None = None,
    since: datetime | None = None,
    viewer: Viewer = ANONYMOUS,
    ruleset: str | None = None,
    code: CodeFilter = "any",
) -> list[FrontPoint]:
    """Every finished meta-test submission ``viewer`` may read (all headline tasks scored; of
    ``ruleset`` only, if given) as a (cFLOP, E) point, with whether it is on the Pareto front
    of those points."""
    base = ranked_query(
        board_filters(
            stream=stream,
            version=version,
            learner_prefix=learner_prefix,
            since=since,
            baselines=None,
            viewer=viewer,
            ruleset=ruleset,
            code=code,
        ),
        headline_tasks(stream, version),
    ).subquery()
    rows = session.execute(
        select(base.c.submission_id, base.c.learner, base.c.baseline, base.c.mean_error, base.c.cflop)
        .where(base.c.headline_done == base.c.headline_tasks, base.c.headline_tasks > 0)
        .order_by(base.c.submission_id)
    ).all()
    flags = pareto_front([(float(r.cflop), float(r.mean_error)) for r in rows])
    return [
        FrontPoint(r.submission_id, r.learner, bool(r.baseline), float(r.mean_error), float(r.cflop), flag)
        for r, flag in zip(rows, flags, strict=True)
    ]


def rulesets_of(session: Session, *, stream: str, version: str, viewer: Viewer = ANONYMOUS) -> list[str]:
    """The rulesets of the meta-test submissions ``viewer`` may read on ``stream``/``version``
    (each has its own board), ``open`` first, then by name."""
    found = session.scalars(
        select(Submission.ruleset)
        .distinct()
        .join(Learner, Learner.id == Submission.learner_id)
        .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
        .where(
            *board_filters(
                stream=stream, version=version, learner_prefix=None, since=None, baselines=None, viewer=viewer
            )
        )
    )
    return sorted(set(found), key=lambda name: (name != "open", name))


__all__ = ["FrontPoint", "front_points", "kept_seeds", "rulesets_of", "stream_versions"]
