"""The ``trial`` probe job: every probe kind with k folds on every target, batched over the
trial's checkpoints (:mod:`workers.probe.runtime.trial_fits`), then the mismatch scores of each
(target, probe kind) over the checkpoints (convergence index on the held-out pretext loss); the
probe fits are its analysis FLOPs (:mod:`workers.probe.fits.fit_flops`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from services.store.db import jsonfloats
from services.store.db.models_probe import ProbeCheckpointResult, ProbeFitRow, ProbeMismatchRow
from services.store.probes.queue import ClaimedJob, record_analysis_flops
from services.store.probes.queue_plans import load_settings
from services.store.probes.sql import upsert
from workers.probe.fits.fit_flops import counting
from workers.probe.runtime.fresh_start import FRESH_STEP, start_losses
from workers.probe.runtime.pretext import loss_at_checkpoints, read_training_curve
from workers.probe.runtime.probe_runtime import ProbeRuntime, Writer
from workers.probe.runtime.trial_fits import features_key, fit_trial, load_features
from workers.probe.scores.trial_scores import trial_mismatch


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


__all__ = ["current_only_mm3", "fit_row", "pretext_loss_at", "run_trial_job"]
