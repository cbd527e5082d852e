"""Probe fits batched over a trial's checkpoints, and the features handed from checkpoint jobs.

A checkpoint job extracts each target task's features once (shared by the probes, RankMe and,
for the current task, the pretext error's examples) and stores them in the object store
(:func:`save_features`, one ``.npz`` per checkpoint and settings, with the labels). The
trial job reads back every checkpoint's features (:func:`load_features`) and fits each
(target, probe kind) for ALL its checkpoints as one batched problem
(:func:`~workers.probe.fits.probes.fit_probes_batched`): the examples are the same at every
checkpoint, only the features differ, so G checkpoints × k folds are one batch (one batch per
feature shape, should a learner's representation change size). The stored
features stay in the store (a re-fit with other probe settings needs no backbone pass).
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from services.core.errors import ObjectNotFoundError
from services.store.objects import ObjectStore
from services.store.probes.object_keys import features_key
from services.store.probes.settings import ProbeSettings
from workers.probe.fits.fit_common import FoldScores
from workers.probe.fits.probes import fit_probes_batched
from workers.probe.runtime.measure import TargetFeatures


def save_features(
    store: ObjectStore,
    key: str,
    features: Mapping[int, TargetFeatures],
    *,
    fresh: Mapping[int, TargetFeatures] | None = None,
) -> None:
    """Store each target's features, labels and class count in one ``.npz``; ``fresh``: the
    same targets seen through a fresh network of the architecture (OFM's start, at a trial's
    first checkpoint), kept in the same object so it lives and goes with it."""
    arrays: dict[str, np.ndarray] = {}
    for prefix, group in (("", features), ("f", fresh or {})):
        for order, target in group.items():
            arrays[f"{prefix}x{order}"] = np.asarray(target.features, dtype=np.float32)
            arrays[f"{prefix}y{order}"] = np.asarray(target.labels)
            arrays[f"{prefix}c{order}"] = np.asarray(target.num_classes, dtype=np.int64)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    store.put_bytes(key, buffer.getvalue())


def load_features(store: ObjectStore, key: str, *, fresh: bool = False) -> dict[int, TargetFeatures] | None:
    """The features :func:`save_features` stored under ``key`` (with ``fresh``, the fresh
    network's); None if there are none."""
    try:
        data = store.get_bytes(key)
    except ObjectNotFoundError:
        return None
    prefix = "f" if fresh else ""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        orders = sorted(int(name[len(prefix) + 1 :]) for name in npz.files if name.startswith(f"{prefix}x"))
        if fresh and not orders:
            return None
        return {
            o: TargetFeatures(npz[f"{prefix}x{o}"], npz[f"{prefix}y{o}"], int(npz[f"{prefix}c{o}"])) for o in orders
        }


@dataclass(frozen=True)
class CheckpointFit:
    """One probe kind on one target at one checkpoint: held-out scores per fold."""

    step: int
    target_order: int
    kind: str
    scores: FoldScores
    num_examples: int
    num_classes: int


def fit_trial(features: Mapping[int, Mapping[int, TargetFeatures]], settings: ProbeSettings) -> list[CheckpointFit]:
    """Every probe kind on every target at every checkpoint, one batched fit per target.

    Args:
        features: ``{step: {target order: TargetFeatures}}`` of one trial.
        settings: Folds, kinds and probe hyper-parameters.
    """
    by_target: dict[int, list[tuple[int, TargetFeatures]]] = defaultdict(list)
    for step in sorted(features):
        for order, target in features[step].items():
            by_target[order].append((step, target))
    out: list[CheckpointFit] = []
    for order in sorted(by_target):
        # One batch per feature shape: a learner's representation may change size in training.
        batches: dict[tuple[int, ...], list[tuple[int, TargetFeatures]]] = defaultdict(list)
        for step, target in by_target[order]:
            batches[tuple(target.features.shape)].append((step, target))
        for points in batches.values():
            first = points[0][1]
            stacked = np.stack([t.features for _, t in points])
            fits = fit_probes_batched(stacked, first.labels, num_classes=first.num_classes, settings=settings)
            for (step, target), scores in zip(points, fits):
                out += [
                    CheckpointFit(step, order, kind, s, len(target.labels), target.num_classes)
                    for kind, s in scores.items()
                ]
    return sorted(out, key=lambda f: (f.target_order, f.step, settings.kinds.index(f.kind)))


__all__ = ["CheckpointFit", "features_key", "fit_trial", "load_features", "save_features"]
