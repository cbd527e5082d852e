"""Everything measured on ONE checkpoint, computed from its features (no database here).

Per checkpoint, each target task's features are extracted once and reused by every probe
kind and fold; the current task's features also give RankMe. LiDAR needs its own pass (q
augmented views of n clean images, themselves some of the probe examples). Every example is
held out from the backbone's training (dev and dev_test, :mod:`workers.probe.runtime.data`). The
pretext error ("m^P" of M3, METRICS.md §1's task error) and the held-out pretext loss (the
convergence index's curve) come from the learner's scores of the current task's probe
examples (the very examples the current task's target error is measured on), given by the same
pass as their features where the learner can (:mod:`workers.sandbox.joint_pass`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from services.core.errors import ProbeInputError
from services.core.metrics import task_error
from services.store.probes.settings import ProbeSettings
from workers.probe.fits.fit_common import FoldScores
from workers.probe.fits.probes import fit_probes
from workers.probe.runtime.data import PROBE_SPLITS, TaskSamples
from workers.probe.runtime.features import augmented_features, extract, extract_with_scores
from workers.probe.runtime.pretext import held_out_loss
from workers.probe.scores.probe_metrics import lidar_at_deltas, rankme


@dataclass(frozen=True)
class TargetFit:
    """One probe kind on one target task: held-out scores per fold."""

    target_order: int
    kind: str
    scores: FoldScores
    num_examples: int
    num_classes: int


@dataclass(frozen=True)
class TargetFeatures:
    """One target task's probe examples seen through one checkpoint: what its probes fit on."""

    features: np.ndarray
    labels: np.ndarray
    num_classes: int


@dataclass(frozen=True)
class CheckpointMeasures:
    """What a checkpoint job stores."""

    lidar: float
    rankme: float
    pretext_error: float
    feature_dim: int
    lidar_n: int
    lidar_q: int
    rankme_n: int
    fits: tuple[TargetFit, ...]
    details: dict[str, Any] = field(default_factory=dict)
    pretext_loss: float | None = None
    features: dict[int, TargetFeatures] = field(default_factory=dict)


HELD_OUT_SPLIT = "dev_test"
"""The probe examples no trial selection reads: dev selection scores trials on ``dev``, so a
trial's error on the ``dev_test`` examples is an unbiased score of a choice among trials
(``nevis study proxies``)."""


def pretext_measures(
    learner: Any, predictor: Any, current: TaskSamples, ctx: Any, *, scores: np.ndarray | None = None
) -> tuple[float, float, dict[str, Any]]:
    """The learner's own task error and held-out loss on the current task's probe examples
    (``scores``: its predictions of them, where the features' pass already gave them), and
    its error on the :data:`HELD_OUT_SPLIT` examples among them alone (what selection did not
    use: ``heldout_error``, None where the sample holds none, and ``heldout_examples``)."""
    try:
        if scores is None:
            scores = np.asarray(learner.predict(predictor, current.probe_images, ctx))
        scores = np.asarray(scores)
        held = current.probe_splits == HELD_OUT_SPLIT if len(current.probe_splits) else np.zeros(0, dtype=bool)
        count = int(held.sum())
        heldout = {
            "heldout_split": HELD_OUT_SPLIT,
            "heldout_examples": count,
            "heldout_error": float(task_error(scores[held], current.probe_labels[held], current.kind))
            if count
            else None,
        }
        return (
            float(task_error(scores, current.probe_labels, current.kind)),
            held_out_loss(scores, current.probe_labels, current.kind),
            heldout,
        )
    except Exception as exc:
        raise ProbeInputError(
            f"predict() of learner {getattr(learner, 'name', '?')!r} failed on task "
            f"{current.order} for the pretext error: {type(exc).__name__}: {exc}"
        ) from exc


def lidar_measures(views: np.ndarray, settings: ProbeSettings) -> tuple[float, dict[str, Any]]:
    """LiDAR at the settings' δ (relative or absolute, METRICS.md §3's formula either way),
    and what a reader needs beside it: the δ-sensitivity (LiDAR at each δ of the sweep, same
    mode), the scale a relative δ multiplied, and LiDAR at the absolute δ for comparison."""
    relative = settings.lidar_delta_mode == "relative"
    deltas = sorted({settings.lidar_delta, *settings.lidar_delta_sweep})
    values, scale = lidar_at_deltas(views, deltas, relative=relative, eps=settings.lidar_eps)
    absolute = (
        lidar_at_deltas(views, [settings.lidar_delta], relative=False, eps=settings.lidar_eps)[0]
        if relative
        else values
    )[settings.lidar_delta]
    return values[settings.lidar_delta], {
        "lidar_delta_mode": settings.lidar_delta_mode,
        "lidar_delta": settings.lidar_delta,
        "lidar_delta_scale": scale,
        "lidar_delta_used": settings.lidar_delta * (scale if relative and scale > 0 else 1.0),
        "lidar_sweep": {f"{d:g}": values[d] for d in deltas},
        "lidar_absolute_delta": absolute,
    }


def measure_checkpoint(
    learner: Any,
    predictor: Any,
    *,
    current: TaskSamples,
    targets: Sequence[TaskSamples],
    settings: ProbeSettings,
    ctx: Any,
    fit: bool = True,
) -> CheckpointMeasures:
    """Probe fits on every target, LiDAR, RankMe and the pretext error of one checkpoint.

    With ``fit=False`` the probes are not fitted here: each target's features are returned
    (``features``) for a fit batched over the trial's checkpoints
    (:mod:`workers.probe.runtime.trial_fits`), as the probe pool does.

    Args:
        learner: The learner (protocol object) that wrote the checkpoint.
        predictor: The loaded checkpoint.
        current: Samples of the checkpoint's own task.
        targets: Samples of the target tasks (the current one included, if probed).
        settings: Probe settings.
        ctx: A trial context for the learner's calls.
    """
    timings: dict[str, float] = {}
    fits: list[TargetFit] = []
    kept: dict[int, TargetFeatures] = {}
    current_features = current_scores = None
    started = time.perf_counter()
    for target in targets:
        t0 = time.perf_counter()
        if target.order == current.order:  # the pretext error's scores from the same pass
            feats, current_scores = extract_with_scores(
                learner, predictor, target.probe_images, ctx, task_order=current.order
            )
            current_features = feats
        else:
            feats = extract(learner, predictor, target.probe_images, ctx)
        timings[f"features_{target.order}"] = time.perf_counter() - t0
        kept[target.order] = TargetFeatures(feats, target.probe_labels, target.num_classes)
        if not fit:
            continue
        t0 = time.perf_counter()
        scores = fit_probes(feats, target.probe_labels, num_classes=target.num_classes, settings=settings)
        timings[f"probes_{target.order}"] = time.perf_counter() - t0
        fits += [TargetFit(target.order, kind, s, len(feats), target.num_classes) for kind, s in scores.items()]
    if current_features is None:
        current_features, current_scores = extract_with_scores(
            learner, predictor, current.probe_images, ctx, task_order=current.order
        )
    t0 = time.perf_counter()
    n, q = len(current.lidar_images), settings.lidar_q
    if n < 2:
        raise ProbeInputError(f"Task {current.order} has {n} held-out image(s); LiDAR needs at least 2.")
    views, source = augmented_features(
        learner, predictor, current.lidar_images, q, ctx, seed=settings.seed, originals=current.lidar_originals
    )
    lidar_value, lidar_details = lidar_measures(views.astype(np.float64), settings)
    timings["lidar"] = time.perf_counter() - t0
    rank_value = rankme(current_features.astype(np.float64), eps=settings.rankme_eps)
    t0 = time.perf_counter()
    error, loss, heldout = pretext_measures(learner, predictor, current, ctx, scores=current_scores)
    timings["pretext"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - started
    return CheckpointMeasures(
        lidar=lidar_value,
        rankme=rank_value,
        pretext_error=error,
        pretext_loss=loss,
        feature_dim=int(current_features.shape[1]),
        lidar_n=n,
        lidar_q=q,
        rankme_n=int(current_features.shape[0]),
        fits=tuple(fits),
        features={} if fit else kept,
        details={
            "augmentation": source,
            "seconds": timings,
            **lidar_details,
            "pretext_error_split": "+".join(PROBE_SPLITS),
            "pretext_loss": loss,
            "pretext_error_examples": len(current.probe_images),
            **heldout,
        },
    )


__all__ = [
    "HELD_OUT_SPLIT",
    "CheckpointMeasures",
    "TargetFeatures",
    "TargetFit",
    "lidar_measures",
    "measure_checkpoint",
    "pretext_measures",
]
