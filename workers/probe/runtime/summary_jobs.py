"""The ``summary`` probe job: Spearman ρ and Kendall τ-b between LiDAR / RankMe and linear-probe
accuracy over a submission's probed checkpoints, by scope (:mod:`workers.probe.scores.proxies`);
numpy only, so it counts no analysis FLOPs.
"""

from __future__ import annotations

from sqlalchemy import and_, delete, select
from sqlalchemy.orm import Session

from services.core.errors import ProbeInputError
from services.store.db.models import StreamTask, Submission, TaskRun, Trial
from services.store.db.models_probe import ProbeCheckpointResult, ProbeCorrelationRow, ProbeFitRow
from services.store.probes.queue import ClaimedJob, record_analysis_flops
from workers.probe.runtime.probe_runtime import ProbeRuntime, Writer
from workers.probe.scores.proxies import ProxyPoint, proxy_correlations


def proxy_points(session: Session, *, submission_id: int, settings_hash: str) -> list[ProxyPoint]:
    """One point per probed checkpoint of a submission: LiDAR, RankMe, own-task linear accuracy."""
    query = (
        select(
            StreamTask.order,
            ProbeCheckpointResult.trial_id,
            ProbeCheckpointResult.step,
            ProbeCheckpointResult.lidar,
            ProbeCheckpointResult.rankme,
            ProbeFitRow.error,
        )
        .select_from(ProbeCheckpointResult)
        .join(
            ProbeFitRow,
            and_(
                ProbeFitRow.checkpoint_id == ProbeCheckpointResult.checkpoint_id,
                ProbeFitRow.settings_hash == ProbeCheckpointResult.settings_hash,
                ProbeFitRow.probe_kind == "linear",
            ),
        )
        .join(Trial, Trial.id == ProbeCheckpointResult.trial_id)
        .join(TaskRun, TaskRun.id == Trial.task_run_id)
        .join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
        .where(
            TaskRun.submission_id == submission_id,
            ProbeCheckpointResult.settings_hash == settings_hash,
            ProbeFitRow.target_order == StreamTask.order,
            ProbeCheckpointResult.lidar.is_not(None),
            ProbeCheckpointResult.rankme.is_not(None),
        )
        .order_by(StreamTask.order, ProbeCheckpointResult.trial_id, ProbeCheckpointResult.step)
    )
    return [ProxyPoint(o, t, s, lid, rank, 1.0 - err) for o, t, s, lid, rank, err in session.execute(query)]


def run_summary_job(runtime: ProbeRuntime, job: ClaimedJob) -> Writer:
    with runtime.sessions() as session:
        if session.get(Submission, job.submission_id) is None:
            raise ProbeInputError(f"Run {job.submission_id} no longer exists.")
        points = proxy_points(session, submission_id=job.submission_id, settings_hash=job.settings_hash)
    correlations = proxy_correlations(points)

    def write(session: Session) -> None:
        session.execute(
            delete(ProbeCorrelationRow).where(
                ProbeCorrelationRow.submission_id == job.submission_id,
                ProbeCorrelationRow.settings_hash == job.settings_hash,
            )
        )
        session.add_all(
            ProbeCorrelationRow(
                submission_id=job.submission_id,
                settings_hash=job.settings_hash,
                scope=c.scope,
                task_order=c.task_order,
                proxy=c.proxy,
                spearman=c.spearman,
                kendall_tau_b=c.kendall_tau_b,
                num_points=c.num_points,
            )
            for c in correlations
        )
        record_analysis_flops(session, job, 0)  # rank correlations in numpy: nothing counted

    return write


__all__ = ["proxy_points", "run_summary_job"]
