"""Performance profiles of a stream version's finished meta-test submissions, read from
their task results (services/core/profiles.py defines them; nothing runs learner code).

The submissions are those of the Pareto front's read (:func:`front_points`): finished
meta-test runs ``viewer`` may read, every headline task scored. The cFLOP profile's target
is, per task, the median error of the finished runs of the built-in ``indep`` learner (seeds;
:data:`REFERENCE_ENTRYPOINTS`) on the same stream version plus a stated tolerance
(:func:`services.core.profiles.indep_target`); without an Indep run, that profile is absent.
:func:`floor_table` shows how the error profile's scores move with its floor.

The leaderboard shows each row's scores and sorts by them (:func:`profile_scores`). A score
depends on every finished submission, so it is computed over all of them when one finishes:
for anonymous readers in the transaction that finishes it, kept in ``submission_profiles``
(:mod:`services.store.runs.board_summaries`), so a render reads one row per submission and
computes nothing. A reader who may see private submissions gets the scores of what they see,
computed here and kept per process under a digest of those submissions' (id, E, cFLOP) points
(profiles change only when a submission finishes, or a finished one's results change its E).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.profiles import (
    ERROR_FLOOR,
    SENSITIVITY_FLOORS,
    TAU_MAX,
    Profile,
    cflop_to_target_profile,
    error_profile,
    floor_sensitivity,
    indep_target,
)
from services.store.db.models import Learner, StreamTask, StreamVersion, Submission, TaskResult
from services.store.db.models_scores import SubmissionProfile
from services.store.runs.board_front import FrontPoint, front_points
from services.store.runs.board_query import RANKED_PHASE
from services.store.runs.details import INDEP_NAME
from services.store.runs.leaderboard import ProfileScores
from services.store.runs.visibility import ANONYMOUS, Viewer

REFERENCE_ENTRYPOINTS = (INDEP_NAME, "indep_resnet34")
"""The built-in Indep (and its old alias): the paper's reference, ResNet-34 trained per task."""


@dataclass(frozen=True)
class ProfileRow:
    """One submission's place in the profiles."""

    submission_id: int
    learner: str
    baseline: bool
    error_score: float
    cflop_score: float | None  # None: no Indep run to compare with
    error_curve: list[float]  # ρ(τ) at ``ProfileSet.taus``
    cflop_curve: list[float] | None


@dataclass(frozen=True)
class ProfileSet:
    """Both profiles of a stream version, rows sorted by error score (best first)."""

    stream: str
    version: str
    taus: list[float]
    tau_max: float
    tasks: int
    reference: str | None  # the cFLOP profile's reference learner, None when absent
    reference_runs: int
    rows: list[ProfileRow]


def task_matrix(session: Session, submission_ids: list[int]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(headline task orders, errors, FLOPs) of ``submission_ids``: two (submissions, tasks)
    matrices in the order given, NaN where a submission has no result on a task."""
    rows = session.execute(
        select(TaskResult.submission_id, StreamTask.order, TaskResult.error, TaskResult.flops)
        .join(StreamTask, StreamTask.id == TaskResult.stream_task_id)
        .where(TaskResult.submission_id.in_(submission_ids), StreamTask.phase == RANKED_PHASE)
    ).all()
    orders = sorted({order for _, order, _, _ in rows})
    column = {order: j for j, order in enumerate(orders)}
    row_of = {sid: i for i, sid in enumerate(submission_ids)}
    errors = np.full((len(submission_ids), len(orders)), np.nan)
    flops = np.full_like(errors, np.nan)
    for sid, order, error, flop in rows:
        errors[row_of[sid], column[order]] = error
        flops[row_of[sid], column[order]] = flop
    return orders, errors, flops


def performance_profiles(
    session: Session,
    *,
    stream: str,
    version: str,
    viewer: Viewer = ANONYMOUS,
    tau_max: float = TAU_MAX,
    ruleset: str | None = None,
) -> ProfileSet:
    """The error and cFLOP profiles of every finished meta-test submission ``viewer`` may read
    (of ``ruleset`` only, if given: the profiles within one ruleset's board)."""
    points = front_points(session, stream=stream, version=version, viewer=viewer, ruleset=ruleset)
    return profiles_of(session, points, stream=stream, version=version, tau_max=tau_max)


def profiles_of(
    session: Session, points: Sequence[FrontPoint], *, stream: str, version: str, tau_max: float
) -> ProfileSet:
    """The profiles of these finished submissions (``points``, as :func:`front_points` reads them)."""
    ids = [p.submission_id for p in points]
    orders, errors, flops = task_matrix(session, ids)
    by_error = error_profile(errors, tau_max=tau_max)
    entrypoints = dict(
        session.execute(
            select(Submission.id, Learner.entrypoint)
            .join(Learner, Learner.id == Submission.learner_id)
            .where(Submission.id.in_(ids))
        ).all()
    )
    reference_rows = [i for i, p in enumerate(points) if entrypoints.get(p.submission_id) in REFERENCE_ENTRYPOINTS]
    by_cflop: Profile | None = None
    if reference_rows:
        target = indep_target(errors[reference_rows]) if orders else np.zeros(0)
        by_cflop = cflop_to_target_profile(errors, flops, target, tau_max=tau_max)
    rows = [
        ProfileRow(
            submission_id=p.submission_id,
            learner=p.learner,
            baseline=p.baseline,
            error_score=float(by_error.scores[i]),
            cflop_score=None if by_cflop is None else float(by_cflop.scores[i]),
            error_curve=[round(float(v), 6) for v in by_error.fractions[i]],
            cflop_curve=None if by_cflop is None else [round(float(v), 6) for v in by_cflop.fractions[i]],
        )
        for i, p in enumerate(points)
    ]
    rows.sort(key=lambda r: (-r.error_score, r.submission_id))
    return ProfileSet(
        stream=stream,
        version=version,
        taus=[round(float(t), 6) for t in by_error.taus],
        tau_max=tau_max,
        tasks=len(orders),
        reference=INDEP_NAME if by_cflop is not None else None,
        reference_runs=len(reference_rows),
        rows=rows,
    )


SCORES_KEPT = 32  # score sets kept per process (stream versions × readers with private rows)
BEST_CURVES = 12  # error curves kept with them, for the leaderboard's figure: the best by score


@dataclass(frozen=True)
class KeptProfiles:
    """What the leaderboard shows of the profiles: every finished submission's scores, and the
    error curves of the :data:`BEST_CURVES` best."""

    scores: ProfileScores
    taus: list[float]
    best: list[tuple[int, str, list[float]]]  # (submission id, learner, ρ(τ) at taus), best first


_kept: OrderedDict[tuple, KeptProfiles] = OrderedDict()
_kept_lock = threading.Lock()


def profile_scores(
    session: Session, *, stream: str, version: str, viewer: Viewer = ANONYMOUS, ruleset: str | None = None
) -> ProfileScores:
    """Submission id → (error score, cFLOP score or None) of every finished meta-test submission
    ``viewer`` may read, as :func:`performance_profiles` computes them within its ruleset (each
    ruleset's board is profiled on its own; ``ruleset``: that board's rows only); kept per process
    under a digest of the finished submissions' points (see the module's docstring)."""
    if viewer == ANONYMOUS:  # the kept rows (each scored within its ruleset), without the curves
        query = (
            select(SubmissionProfile.submission_id, SubmissionProfile.error_score, SubmissionProfile.cflop_score)
            .join(Submission, Submission.id == SubmissionProfile.submission_id)
            .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
            .where(StreamVersion.name == stream, StreamVersion.version == version)
        )
        if ruleset is not None:
            query = query.where(Submission.ruleset == ruleset)
        return {i: (error, cflop) for i, error, cflop in session.execute(query)}
    return kept_profiles(session, stream=stream, version=version, viewer=viewer, ruleset=ruleset).scores


def kept_profiles(
    session: Session, *, stream: str, version: str, viewer: Viewer = ANONYMOUS, ruleset: str | None = None
) -> KeptProfiles:
    """The scores of :func:`profile_scores` and the best submissions' error curves, kept alike
    (within ``ruleset``; None: every finished submission, as one population)."""
    if viewer == ANONYMOUS:
        return _kept_public(session, stream=stream, version=version, ruleset=ruleset)
    points = front_points(session, stream=stream, version=version, viewer=viewer, ruleset=ruleset)
    digest = hashlib.sha256(repr([(p.submission_id, p.mean_error, p.cflop) for p in points]).encode()).hexdigest()
    key = (str(session.get_bind().url), stream, version, viewer, ruleset, digest)
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key]
    found = profiles_of(session, points, stream=stream, version=version, tau_max=TAU_MAX)
    kept = KeptProfiles(
        scores={r.submission_id: (r.error_score, r.cflop_score) for r in found.rows},
        taus=found.taus,
        best=[(r.submission_id, r.learner, r.error_curve) for r in found.rows[:BEST_CURVES]],
    )
    with _kept_lock:
        _kept[key] = kept
        while len(_kept) > SCORES_KEPT:
            _kept.popitem(last=False)
    return kept


def _kept_public(session: Session, *, stream: str, version: str, ruleset: str | None = None) -> KeptProfiles:
    """What an anonymous reader sees of the profiles, as the commits kept them (each submission
    scored within its ruleset: :func:`services.store.runs.board_summaries.keep_profiles`)."""
    query = (
        select(
            SubmissionProfile.submission_id,
            SubmissionProfile.error_score,
            SubmissionProfile.cflop_score,
            SubmissionProfile.error_curve,
            Learner.name.label("learner"),
        )
        .join(Submission, Submission.id == SubmissionProfile.submission_id)
        .join(Learner, Learner.id == Submission.learner_id)
        .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
        .where(StreamVersion.name == stream, StreamVersion.version == version)
    )
    if ruleset is not None:
        query = query.where(Submission.ruleset == ruleset)
    rows = sorted(session.execute(query).all(), key=lambda r: (-r.error_score, r.submission_id))
    return KeptProfiles(
        scores={r.submission_id: (r.error_score, r.cflop_score) for r in rows},
        taus=list(TAUS),
        best=[
            (r.submission_id, r.learner, list(r.error_curve)) for r in rows[:BEST_CURVES] if r.error_curve is not None
        ],
    )


@dataclass(frozen=True)
class FloorRow:
    """One submission's error-profile score, and its rank by it, at each floor."""

    submission_id: int
    learner: str
    scores: list[float]  # at ``floors``, in order
    ranks: list[int]  # 1: the best score at that floor (ties share the better rank)


def floor_table(
    session: Session, *, stream: str, version: str, viewer: Viewer = ANONYMOUS, ruleset: str | None = None
) -> tuple[list[float], list[FloorRow]]:
    """The floors of :data:`~services.core.profiles.SENSITIVITY_FLOORS` and every finished
    submission's error-profile score and rank at each (rows by the score at the floor in use)."""
    points = front_points(session, stream=stream, version=version, viewer=viewer, ruleset=ruleset)
    _, errors, _ = task_matrix(session, [p.submission_id for p in points])
    by_floor = floor_sensitivity(errors)
    floors = list(SENSITIVITY_FLOORS)
    ranks = {f: 1 + (scores[None, :] > scores[:, None]).sum(axis=1) for f, scores in by_floor.items()}
    rows = [
        FloorRow(
            p.submission_id,
            p.learner,
            [round(float(by_floor[f][i]), 6) for f in floors],
            [int(ranks[f][i]) for f in floors],
        )
        for i, p in enumerate(points)
    ]
    used = floors.index(ERROR_FLOOR)
    rows.sort(key=lambda r: (-r.scores[used], r.submission_id))
    return floors, rows


TAUS = [round(float(t), 6) for t in error_profile(np.zeros((0, 0))).taus]
"""The τ grid every profile is drawn on (it depends on no data)."""


__all__ = [
    "BEST_CURVES",
    "REFERENCE_ENTRYPOINTS",
    "SCORES_KEPT",
    "FloorRow",
    "KeptProfiles",
    "ProfileRow",
    "ProfileSet",
    "kept_profiles",
    "performance_profiles",
    "floor_table",
    "profile_scores",
    "profiles_of",
    "task_matrix",
]
