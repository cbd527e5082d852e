"""The ``checkpoint`` probe job: load the checkpoint in the learner's host, extract features once
per target task (stored for the trial job), LiDAR, RankMe and the held-out pretext error and loss;
the learner's passes are its analysis FLOPs (:mod:`workers.probe.runtime.context`).
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.core.errors import ProbeInputError
from services.store.db import jsonfloats
from services.store.db.models import Checkpoint
from services.store.db.models_probe import ProbeCheckpointResult, ProbeFitRow
from services.store.probes.queue import ClaimedJob, record_analysis_flops
from services.store.probes.queue_plans import load_settings
from services.store.probes.settings import ProbeSettings
from services.store.probes.sql import upsert
from workers.probe.runtime.context import AnalysisFlops, ProbeContext
from workers.probe.runtime.features import load_checkpoint_bytes, load_predictor
from workers.probe.runtime.fresh_start import fresh_features
from workers.probe.runtime.measure import CheckpointMeasures, measure_checkpoint
from workers.probe.runtime.probe_runtime import ProbeRuntime, Writer
from workers.probe.runtime.trial_fits import features_key, save_features


def target_orders(manifest_orders: list[int], current: int, settings: ProbeSettings) -> list[int]:
    """The current task first, then (mode "earlier") the earlier tasks, most recent first.

    Examples:
        >>> target_orders([1, 2, 3, 4], 3, ProbeSettings())
        [3, 2, 1]
        >>> target_orders([1, 2, 3, 4], 3, ProbeSettings(max_earlier=1))
        [3, 2]
    """
    if settings.targets == "current":
        return [current]
    earlier = sorted((o for o in manifest_orders if o < current), reverse=True)
    if settings.max_earlier is not None:
        earlier = earlier[: settings.max_earlier]
    return [current, *earlier]


def run_checkpoint_job(runtime: ProbeRuntime, job: ClaimedJob) -> Writer:
    with runtime.sessions() as session:
        settings = load_settings(session, job.settings_hash)
        ckpt = session.get(Checkpoint, job.checkpoint_id)
        if ckpt is None:
            raise ProbeInputError(f"Checkpoint {job.checkpoint_id} no longer exists in the database.")
        trial = ckpt.trial
        run = trial.task_run
        submission = run.submission
        spec, size, order = submission.learner.entrypoint, submission.image_size, run.stream_task.order
        bundle = submission.learner.bundle_key, submission.learner.bundle_sha256
        learner = runtime.learner(spec, bundle=bundle if bundle[0] else None, image=submission.learner.image_ref)
        manifest = runtime.tasks.manifest(submission.stream_version)
        row = dict(
            checkpoint_id=ckpt.id, object_key=ckpt.object_key, sha256=ckpt.sha256, trial_id=trial.id, step=ckpt.step
        )
        first_step = session.scalar(select(func.min(Checkpoint.step)).where(Checkpoint.trial_id == trial.id))
        trial_seed = int(trial.seed)  # the fresh start is the network this trial would have built
    data = load_checkpoint_bytes(runtime.store, **row)
    orders = [t.order for t in manifest.tasks]
    sample = dict(image_size=size, max_examples=settings.max_examples, lidar_n=settings.lidar_n, seed=settings.seed)
    targets = [runtime.tasks.samples(manifest, o, **sample) for o in target_orders(orders, order, settings)]
    current = targets[0]
    ctx = ProbeContext(seed=settings.seed)  # counts the learner's passes: the analysis FLOPs
    try:
        predictor = load_predictor(learner, data, current.info, ctx, checkpoint_id=row["checkpoint_id"])
        measures = measure_checkpoint(
            learner, predictor, current=current, targets=targets, settings=settings, ctx=ctx, fit=False
        )
        fresh = None
        if settings.ofm_fresh_start and row["step"] == first_step:  # OFM's untrained start
            fresh, measures.details["ofm_start"] = fresh_features(learner, predictor, targets, ctx, seed=trial_seed)
    finally:
        ctx.close()
    spent = ctx.flops
    save_features(runtime.store, features_key(job.settings_hash, row["checkpoint_id"]), measures.features, fresh=fresh)

    def write(session: Session) -> None:
        write_checkpoint_measures(
            session,
            checkpoint_id=row["checkpoint_id"],
            trial_id=row["trial_id"],
            step=row["step"],
            settings_hash=job.settings_hash,
            measures=measures,
            analysis_flops=spent,
        )
        record_analysis_flops(session, job, spent.total)

    return write


def write_checkpoint_measures(
    session: Session,
    *,
    checkpoint_id: int,
    trial_id: int,
    step: int,
    settings_hash: str,
    measures: CheckpointMeasures,
    analysis_flops: AnalysisFlops | None = None,
) -> None:
    """Upsert a checkpoint's ranks and probe fits; ``analysis_flops`` (what the learner's
    passes cost, split by provenance) goes into ``details``."""
    details = dict(measures.details)
    if analysis_flops is not None:
        details["analysis_flops"] = analysis_flops.to_dict()
    upsert(
        session,
        ProbeCheckpointResult.__table__,
        [
            {
                "checkpoint_id": checkpoint_id,
                "trial_id": trial_id,
                "settings_hash": settings_hash,
                "step": step,
                "lidar": measures.lidar,
                "rankme": measures.rankme,
                "pretext_error": measures.pretext_error,
                "feature_dim": measures.feature_dim,
                "lidar_n": measures.lidar_n,
                "lidar_q": measures.lidar_q,
                "rankme_n": measures.rankme_n,
                "details": jsonfloats.encode_tree(details),
            }
        ],
        conflict=["checkpoint_id", "settings_hash"],
    )
    upsert(
        session,
        ProbeFitRow.__table__,
        [
            {
                "checkpoint_id": checkpoint_id,
                "trial_id": trial_id,
                "settings_hash": settings_hash,
                "step": step,
                "target_order": fit.target_order,
                "probe_kind": fit.kind,
                "loss": fit.scores.loss,
                "error": fit.scores.error,
                "fold_losses": jsonfloats.encode(fit.scores.losses.tolist()),
                "fold_errors": jsonfloats.encode(fit.scores.errors.tolist()),
                "folds": len(fit.scores.losses),
                "num_examples": fit.num_examples,
                "num_classes": fit.num_classes,
            }
            for fit in measures.fits
        ],
        conflict=["checkpoint_id", "settings_hash", "target_order", "probe_kind"],
    )


__all__ = ["run_checkpoint_job", "target_orders", "write_checkpoint_measures"]
