"""Running one claimed probe job: read what it needs, compute, and hand back a writer.

Each ``run_*`` function reads from the database in a short session, computes without
holding any transaction, and returns a *writer*: a function that writes the results (as
upserts) into a session. The worker calls the writer in the same transaction that marks
the job done (:func:`services.store.probes.queue.complete`), so results and completion commit
together or not at all.

Job kinds:
- ``checkpoint``: load the checkpoint, extract features once per target task (stored for
  the trial job), LiDAR, RankMe and the held-out pretext error and loss.
- ``trial``: every probe kind with k folds on every target, batched over the trial's
  checkpoints (:mod:`workers.probe.runtime.trial_fits`), then the mismatch scores of each (target,
  probe kind) over the checkpoints (convergence index on the held-out pretext loss).
- ``summary``: Spearman ρ and Kendall τ-b between LiDAR / RankMe and linear-probe accuracy.

Every writer also records the job's *analysis FLOPs* on its ``probe_jobs`` row: for a
checkpoint job the learner's passes (loading, ``features``, ``predict``, augmentation),
metered in its learner host (:mod:`workers.probe.runtime.context`); for a trial job the probe fits
(:mod:`workers.probe.fits.fit_flops`); a summary job counts none (numpy only). They are the
harness's analysis, kept apart: nothing here touches a submission's FLOPs or cFLOP.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import and_, delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from services.core.errors import ProbeInputError
from services.store.db import jsonfloats
from services.store.db.models import Checkpoint, StreamTask, Submission, TaskRun, Trial
from services.store.db.models_probe import ProbeCheckpointResult, ProbeCorrelationRow, ProbeFitRow, ProbeMismatchRow
from services.store.objects import ObjectStore
from services.store.probes.queue import ClaimedJob, load_settings, record_analysis_flops
from services.store.probes.settings import ProbeSettings
from services.store.probes.sql import upsert
from workers.probe.fits.fit_flops import counting
from workers.probe.runtime.context import AnalysisFlops, ProbeContext
from workers.probe.runtime.data import TaskCache
from workers.probe.runtime.features import load_checkpoint_bytes, load_predictor
from workers.probe.runtime.fresh_start import FRESH_STEP, fresh_features, start_losses
from workers.probe.runtime.measure import CheckpointMeasures, measure_checkpoint
from workers.probe.runtime.pretext import loss_at_checkpoints, read_training_curve
from workers.probe.runtime.trial_fits import features_key, fit_trial, load_features, save_features
from workers.probe.scores.proxies import ProxyPoint, proxy_correlations
from workers.probe.scores.trial_scores import trial_mismatch
from workers.sandbox.bundles import DEFAULT_MAX_UNPACKED_BYTES, unpack_stored_bundle
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.images import ImageLimits, unpack_image
from workers.sandbox.learner_calls import SandboxedLearner

Writer = Callable[[Session], None]


class ProbeRuntime:
    """What a worker keeps between jobs: database sessions, the store, caches, and one warm
    learner host per learner (the probe pool calls learner code only through a host, in its
    sandbox; this process holds the database credentials and never imports a learner)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        store: ObjectStore,
        *,
        sandbox: str = "auto",
        import_paths: tuple[str, ...] = (),
        threads: int = 1,
        bundles_dir: Path | None = None,
        bundle_max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
        images_dir: Path | None = None,
    ) -> None:
        self.sessions = sessions
        self.store = store
        self.tasks = TaskCache(store)
        self.sandbox, self.import_paths, self.threads = sandbox, import_paths, threads
        self.bundles_dir, self.bundle_max_unpacked_bytes = bundles_dir, bundle_max_unpacked_bytes
        self.images_dir = images_dir
        self._learners: dict[tuple[str, str | None], SandboxedLearner] = {}

    def learner(
        self, spec: str, *, bundle: tuple[str, str] | None = None, image: str | None = None
    ) -> SandboxedLearner:
        """A warm host of learner ``spec``; ``bundle`` is its uploaded bundle's (key, sha256),
        ``image`` its registered image (pinned by digest), unpacked here once and shown
        read-only to the host, as the worker harness does."""
        cache_key = (spec, bundle[1] if bundle else image)
        known = self._learners.get(cache_key)
        if known is not None and known.host.alive:
            return known
        try:
            paths = self.import_paths
            if bundle is not None:
                if self.bundles_dir is None:
                    raise ProbeInputError(
                        "this probe worker has no folder to unpack learner bundles "
                        "into (give it the service's NEVIS_DATA_DIR)"
                    )
                root = unpack_stored_bundle(
                    self.store,
                    key=bundle[0],
                    sha256=bundle[1],
                    root=self.bundles_dir,
                    max_unpacked_bytes=self.bundle_max_unpacked_bytes,
                )
                paths = (str(root), *paths)
            elif image is not None and self.images_dir is not None:
                paths = (*unpack_image(image, cache=self.images_dir, limits=ImageLimits()).import_paths, *paths)
            host = LearnerHost(HostSpec(spec, paths, self.sandbox, self.threads))
        except Exception as exc:
            raise ProbeInputError(f"Cannot load learner {spec!r} to probe it: {exc}") from exc
        self._learners[cache_key] = SandboxedLearner(host)
        return self._learners[cache_key]

    def close(self) -> None:
        """Stop the learner hosts."""
        for learner in self._learners.values():
            learner.host.close()
        self._learners.clear()


def run_job(runtime: ProbeRuntime, job: ClaimedJob) -> Writer:
    """Compute ``job`` and return its writer (see the module docstring)."""
    runners = {"checkpoint": run_checkpoint_job, "trial": run_trial_job, "summary": run_summary_job}
    return runners[job.kind](runtime, job)


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


# --- checkpoint jobs ----------------------------------------------------------------------


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


# --- trial jobs ---------------------------------------------------------------------------


def run_trial_job(runtime: ProbeRuntime, job: ClaimedJob) -> Writer:
    with runtime.sessions() as session:
        settings = load_settings(session, job.settings_hash)
        measured = session.execute(
            select(
                ProbeCheckpointResult.checkpoint_id,
                ProbeCheckpointResult.step,
                ProbeCheckpointResult.pretext_error,
                ProbeCheckpointResult.details,
            ).where(
                ProbeCheckpointResult.trial_id == job.trial_id, ProbeCheckpointResult.settings_hash == job.settings_hash
            )
        ).all()
        curve = read_training_curve(session, trial_id=job.trial_id)
    features = {}
    for checkpoint_id, step, _, _ in measured:
        stored = load_features(runtime.store, features_key(job.settings_hash, checkpoint_id))
        if stored is not None:  # a checkpoint measured before features were handed over
            features[step] = stored
    first = min(measured, key=lambda m: m[1], default=None)
    fresh = (
        None
        if first is None or not settings.ofm_fresh_start
        else load_features(runtime.store, features_key(job.settings_hash, first[0]), fresh=True)
    )
    start_source = str(((first[3] if first else None) or {}).get("ofm_start", ""))
    if fresh is not None:
        features[FRESH_STEP] = fresh
    with counting() as fit_flops:
        fits = fit_trial(features, settings)
    starts = start_losses(fits)
    fits = [f for f in fits if f.step != FRESH_STEP]
    ids = {step: checkpoint_id for checkpoint_id, step, _, _ in measured}
    fit_rows = [
        fit_row(f, checkpoint_id=ids[f.step], trial_id=job.trial_id, settings_hash=job.settings_hash) for f in fits
    ]
    pretext = {step: error for _, step, error, _ in measured if step in features}
    held_out = {step: jsonfloats.decode_value((details or {}).get("pretext_loss")) for _, step, _, details in measured}
    grouped: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for f in sorted(fits, key=lambda f: f.step):
        grouped[(f.target_order, f.kind)].append((f.step, f.scores.losses, f.scores.errors))
    rows = []
    for (target, kind), points in sorted(grouped.items()):
        if len(points) < 2:
            continue  # one checkpoint has no curve to mismatch
        steps = [p[0] for p in points]
        pretext_loss, source = pretext_loss_at(steps, held_out, curve)
        result = trial_mismatch(
            steps,
            np.array([p[1] for p in points]),
            np.array([p[2] for p in points]),
            [pretext[s] for s in steps],
            pretext_loss,
            settings=settings,
            loss_source=source,
            start_losses=starts.get((target, kind)),
            start_source=start_source,
        )
        scores, spreads, curves = current_only_mm3(result, current=target == job.task_order)
        rows.append(
            {
                "trial_id": job.trial_id,
                "settings_hash": job.settings_hash,
                "target_order": target,
                "probe_kind": kind,
                "conv_step": result.conv_step,
                "converged": result.converged,
                "num_checkpoints": len(steps),
                **scores,
                "spreads": jsonfloats.encode_tree(spreads),
                "curves": jsonfloats.encode_tree(curves),
            }
        )
    conflict = ["trial_id", "settings_hash", "target_order", "probe_kind"]

    def write(session: Session) -> None:
        upsert(
            session,
            ProbeFitRow.__table__,
            fit_rows,
            conflict=["checkpoint_id", "settings_hash", "target_order", "probe_kind"],
        )
        upsert(session, ProbeMismatchRow.__table__, rows, conflict=conflict)
        record_analysis_flops(session, job, fit_flops.flops)

    return write


def current_only_mm3(result: Any, *, current: bool) -> tuple[dict, dict, dict]:
    """The scores, spreads and curves to store: MM3 (and M3's curve) only where the target is
    the trial's own task. M3 subtracts the pretext error, the learner's error on its own
    task; on an earlier target it would compare two tasks' errors, which is no mismatch."""
    if current:
        return result.scores, result.spreads, result.curves
    return (
        {**result.scores, "mm3": None},
        {k: v for k, v in result.spreads.items() if k != "mm3"},
        {**result.curves, "m3": None},
    )


def fit_row(fit: Any, *, checkpoint_id: int, trial_id: int, settings_hash: str) -> dict[str, Any]:
    """The ``probe_fits`` row of one (checkpoint, target, kind) fit."""
    return {
        "checkpoint_id": checkpoint_id,
        "trial_id": trial_id,
        "settings_hash": settings_hash,
        "step": fit.step,
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


def pretext_loss_at(
    steps: list[int], held_out: dict[int, Any], curve: tuple[np.ndarray, np.ndarray] | None
) -> tuple[Any, str]:
    """The convergence curve and its source: the held-out pretext loss measured at each
    checkpoint; for results stored before it was measured, the training curve (see
    :mod:`workers.probe.runtime.pretext`)."""
    values = [held_out.get(s) for s in steps]
    if all(v is not None for v in values):
        return [float(v) for v in values], "held_out_loss"
    return (None if curve is None else loss_at_checkpoints(steps, *curve)), "training_curve"


# --- summary jobs -------------------------------------------------------------------------


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


__all__ = [
    "ProbeRuntime",
    "Writer",
    "current_only_mm3",
    "fit_row",
    "pretext_loss_at",
    "proxy_points",
    "run_checkpoint_job",
    "run_job",
    "run_summary_job",
    "run_trial_job",
    "target_orders",
    "write_checkpoint_measures",
]
