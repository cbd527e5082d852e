"""Reading probe results back: one report per submission, for the CLI and the HTTP API.

Every figure comes from stored rows (``probe_*`` tables), so what is printed or served is
what the database holds. :func:`load_probe_report` picks the settings most recently used
for the submission unless a settings hash is given; :meth:`ProbeReport.to_dict` is
JSON-safe (infinite values as "inf").

The analysis FLOPs (what probing cost: ``probe_jobs.analysis_flops``) are reported apart,
per checkpoint, per task and in total (:class:`AnalysisFlopsReport`); they are never part of
the submission's cFLOP, which only :mod:`services.store.runs` computes, from task results.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.store.db import jsonfloats
from services.store.db.models import StreamTask, Submission, TaskResult, TaskRun, Trial
from services.store.db.models_probe import (
    MISMATCH_SCALARS,
    ProbeCheckpointResult,
    ProbeCorrelationRow,
    ProbeFitRow,
    ProbeJob,
    ProbeMismatchRow,
    ProbeSettingsRow,
)
from services.store.probes.queue_plans import status_counts
from services.store.probes.trial_ranks import AcrossTrials, across_trials

# Across trials (final checkpoints) is the headline; within trajectories (checkpoints) next;
# pooled mixes tasks: shown last, never a headline.
SCOPE_ORDER = {"trials": 0, "trials_mean": 1, "task": 2, "task_mean": 3, "pooled": 4}
PER_TASK_SCOPES = ("trials", "task")


@dataclass(frozen=True)
class CheckpointReport:
    """One probed checkpoint: label-free ranks, pretext error, own-task linear accuracy."""

    task_order: int
    trial_id: int
    trial_index: int
    best_trial: bool
    step: int
    lidar: float | None
    rankme: float | None
    pretext_error: float | None
    linear_accuracy: float | None
    lidar_n: int
    lidar_q: int
    augmentation: str | None
    analysis_flops: float | None = None  # its checkpoint job's learner passes (not in cFLOP)
    lidar_sweep: dict[str, float] | None = None  # δ → LiDAR (same δ mode): its δ-sensitivity
    lidar_delta_mode: str | None = None  # "relative" or "absolute"; None: stored before it existed


@dataclass(frozen=True)
class MismatchReport:
    """The mismatch scores of one trial on one target task with one probe kind."""

    task_order: int
    trial_id: int
    trial_index: int
    best_trial: bool
    target_order: int
    probe_kind: str
    conv_step: int
    converged: bool
    num_checkpoints: int
    scores: dict[str, float]
    spreads: dict[str, Any]
    curves: dict[str, Any]


@dataclass(frozen=True)
class CorrelationReport:
    scope: str
    task_order: int
    proxy: str
    spearman: float | None
    kendall_tau_b: float | None
    num_points: int


@dataclass(frozen=True)
class TaskAnalysisFlops:
    """What probing one task cost: its checkpoint jobs' learner passes and its trial jobs'
    probe fits, summed over its done jobs that have a figure (None where none has one)."""

    task_order: int
    total: float | None
    learner_passes: float | None
    probe_fits: float | None
    metered_jobs: int
    unmetered_jobs: int  # done before analysis FLOPs were counted: no figure, none guessed


@dataclass(frozen=True)
class AnalysisFlopsReport:
    """The analysis FLOPs of a submission's probes (the same sums over every task, plus the
    run's summary job): the harness's own compute, reported apart; ``in_cflop`` is always
    False, as they are never added to cFLOP or any leaderboard figure."""

    total: float | None = None
    learner_passes: float | None = None
    probe_fits: float | None = None
    by_task: tuple[TaskAnalysisFlops, ...] = ()
    unmetered_jobs: int = 0
    in_cflop: bool = False


@dataclass(frozen=True)
class ProbeReport:
    """Everything stored about the probes of one submission under one settings hash."""

    submission_id: int
    settings_hash: str | None
    settings: dict[str, Any] | None
    jobs: dict[str, int]
    failures: tuple[tuple[str, str], ...]
    checkpoints: tuple[CheckpointReport, ...]
    mismatch: tuple[MismatchReport, ...]
    correlations: tuple[CorrelationReport, ...]
    analysis_flops: AnalysisFlopsReport = field(default_factory=AnalysisFlopsReport)
    across_trials: tuple[AcrossTrials, ...] = ()  # per task: n, ρ, permutation p, bootstrap interval

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (non-finite floats as strings)."""
        return jsonfloats.encode_tree(asdict(self))


def latest_settings_hash(session: Session, *, submission_id: int) -> str | None:
    """The settings hash of the submission's most recently queued probe job, if any."""
    return session.scalar(
        select(ProbeJob.settings_hash)
        .where(ProbeJob.submission_id == submission_id)
        .order_by(ProbeJob.id.desc())
        .limit(1)
    )


def _trials(session: Session, submission_id: int) -> dict[int, tuple[int, int, bool]]:
    """trial id → (task order, trial index, is the committed best trial)."""
    best = set(session.scalars(select(TaskResult.best_trial_id).where(TaskResult.submission_id == submission_id)))
    rows = session.execute(
        select(Trial.id, StreamTask.order, Trial.trial_index)
        .join(TaskRun, TaskRun.id == Trial.task_run_id)
        .join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
        .where(TaskRun.submission_id == submission_id)
    )
    return {tid: (order, index, tid in best) for tid, order, index in rows}


def analysis_flops_report(
    session: Session, *, submission_id: int, settings_hash: str, task_order: int | None = None
) -> AnalysisFlopsReport:
    """Sum the done jobs' analysis FLOPs per task (one task's only, if ``task_order``); the
    run's summary job (task 0) counts in the total only."""
    query = (
        select(
            ProbeJob.task_order,
            ProbeJob.kind,
            func.count(),
            func.count(ProbeJob.analysis_flops),
            func.coalesce(func.sum(ProbeJob.analysis_flops), 0.0),
        )
        .where(
            ProbeJob.submission_id == submission_id, ProbeJob.settings_hash == settings_hash, ProbeJob.status == "done"
        )
        .group_by(ProbeJob.task_order, ProbeJob.kind)
    )
    if task_order is not None:
        query = query.where(ProbeJob.task_order == task_order)
    sums: dict[tuple[int, str], float] = {}
    metered: dict[int, int] = {}
    unmetered: dict[int, int] = {}
    for order, kind, done, known, flops in session.execute(query):
        sums[(order, kind)] = float(flops)
        metered[order] = metered.get(order, 0) + int(known)
        unmetered[order] = unmetered.get(order, 0) + int(done) - int(known)

    def total(orders: list[int], kinds: tuple[str, ...]) -> float | None:
        if not any(metered[o] for o in orders):
            return None
        return sum(sums.get((o, kind), 0.0) for o in orders for kind in kinds)

    tasks = sorted(o for o in metered if o >= 1)
    return AnalysisFlopsReport(
        total=total(list(metered), ("checkpoint", "trial", "summary")),
        learner_passes=total(tasks, ("checkpoint",)),
        probe_fits=total(tasks, ("trial",)),
        by_task=tuple(
            TaskAnalysisFlops(
                o,
                total([o], ("checkpoint", "trial")),
                total([o], ("checkpoint",)),
                total([o], ("trial",)),
                metered[o],
                unmetered[o],
            )
            for o in tasks
        ),
        unmetered_jobs=sum(unmetered.values()),
    )


def load_probe_report(
    session: Session, *, submission_id: int, settings_hash: str | None = None, task_order: int | None = None
) -> ProbeReport:
    """The probe report of a submission (see the module docstring).

    Raises:
        NevisError: No such submission.
    """
    if session.get(Submission, submission_id) is None:
        raise NevisError(f"No run with id {submission_id} in this database.")
    settings_hash = settings_hash or latest_settings_hash(session, submission_id=submission_id)
    if settings_hash is None:
        return ProbeReport(submission_id, None, None, {}, (), (), (), ())
    settings_row = session.get(ProbeSettingsRow, settings_hash)
    trials = _trials(session, submission_id)
    wanted = [t for t, (order, _, _) in trials.items() if task_order in (None, order)]
    accuracy = dict(
        session.execute(
            select(ProbeFitRow.checkpoint_id, 1.0 - ProbeFitRow.error)
            .join(Trial, Trial.id == ProbeFitRow.trial_id)
            .join(TaskRun, TaskRun.id == Trial.task_run_id)
            .join(
                StreamTask, and_(StreamTask.id == TaskRun.stream_task_id, StreamTask.order == ProbeFitRow.target_order)
            )
            .where(
                ProbeFitRow.trial_id.in_(wanted),
                ProbeFitRow.settings_hash == settings_hash,
                ProbeFitRow.probe_kind == "linear",
            )
        ).all()
    )
    spent = dict(
        session.execute(
            select(ProbeJob.checkpoint_id, ProbeJob.analysis_flops).where(
                ProbeJob.trial_id.in_(wanted),
                ProbeJob.settings_hash == settings_hash,
                ProbeJob.kind == "checkpoint",
                ProbeJob.status == "done",
            )
        ).all()
    )
    checkpoints = []
    for row in session.scalars(
        select(ProbeCheckpointResult).where(
            ProbeCheckpointResult.trial_id.in_(wanted), ProbeCheckpointResult.settings_hash == settings_hash
        )
    ):
        order, index, best = trials[row.trial_id]
        checkpoints.append(
            CheckpointReport(
                order,
                row.trial_id,
                index,
                best,
                row.step,
                row.lidar,
                row.rankme,
                row.pretext_error,
                accuracy.get(row.checkpoint_id),
                row.lidar_n,
                row.lidar_q,
                (row.details or {}).get("augmentation"),
                spent.get(row.checkpoint_id),
                (row.details or {}).get("lidar_sweep"),
                (row.details or {}).get("lidar_delta_mode"),
            )
        )
    mismatch = []
    for row in session.scalars(
        select(ProbeMismatchRow).where(
            ProbeMismatchRow.trial_id.in_(wanted), ProbeMismatchRow.settings_hash == settings_hash
        )
    ):
        order, index, best = trials[row.trial_id]
        mismatch.append(
            MismatchReport(
                order,
                row.trial_id,
                index,
                best,
                row.target_order,
                row.probe_kind,
                row.conv_step,
                bool(row.converged),
                row.num_checkpoints,
                {k: getattr(row, k) for k in MISMATCH_SCALARS},
                _decoded(row.spreads),
                _decoded(row.curves),
            )
        )
    correlations = [
        CorrelationReport(r.scope, r.task_order, r.proxy, r.spearman, r.kendall_tau_b, r.num_points)
        for r in session.scalars(
            select(ProbeCorrelationRow)
            .where(
                ProbeCorrelationRow.submission_id == submission_id, ProbeCorrelationRow.settings_hash == settings_hash
            )
            # across trials first (the headline), within trajectories next, pooled (tasks mixed) last
            .order_by(
                case(SCOPE_ORDER, value=ProbeCorrelationRow.scope, else_=len(SCOPE_ORDER)),
                ProbeCorrelationRow.task_order,
                ProbeCorrelationRow.proxy,
            )
        )
        if task_order is None or r.scope not in PER_TASK_SCOPES or r.task_order == task_order
    ]
    failures = tuple(
        session.execute(
            select(ProbeJob.job_key, ProbeJob.error)
            .where(
                ProbeJob.submission_id == submission_id,
                ProbeJob.settings_hash == settings_hash,
                ProbeJob.status == "failed",
            )
            .order_by(ProbeJob.id)
        ).all()
    )
    return ProbeReport(
        submission_id=submission_id,
        settings_hash=settings_hash,
        settings=settings_row.settings if settings_row else None,
        jobs=dict(status_counts(session, submission_id=submission_id, settings_hash=settings_hash)),
        failures=tuple((k, e or "") for k, e in failures),
        checkpoints=tuple(sorted(checkpoints, key=lambda c: (c.task_order, c.trial_index, c.step))),
        mismatch=tuple(
            sorted(
                mismatch,
                key=lambda m: (
                    m.task_order,
                    m.trial_index,
                    m.target_order != m.task_order,
                    -m.target_order,
                    m.probe_kind,
                ),
            )
        ),
        correlations=tuple(correlations),
        analysis_flops=analysis_flops_report(
            session, submission_id=submission_id, settings_hash=settings_hash, task_order=task_order
        ),
        across_trials=across_trials(checkpoints),
    )


def _decoded(doc: Any) -> Any:
    """JSON documents back with real floats ("inf" → inf) in every list and value."""
    if isinstance(doc, dict):
        return {k: _decoded(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_decoded(v) for v in doc]
    if isinstance(doc, str) and doc in ("inf", "-inf", "nan"):
        return jsonfloats.decode_value(doc)
    return doc


__all__ = [
    "AnalysisFlopsReport",
    "CheckpointReport",
    "CorrelationReport",
    "MismatchReport",
    "ProbeReport",
    "PER_TASK_SCOPES",
    "SCOPE_ORDER",
    "TaskAnalysisFlops",
    "analysis_flops_report",
    "latest_settings_hash",
    "load_probe_report",
]
