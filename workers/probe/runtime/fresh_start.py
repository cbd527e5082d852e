"""OFM's untrained start for learners whose first checkpoint is already trained.

Stuhr & Brauer measure the target loss from s_0, the untrained network. A transfer learner's
first checkpoint is the network it transferred, so its curve starts low and OFM's normaliser
x_0 − min x is small or zero (its infinite special case). At a trial's first checkpoint the
checkpoint job asks the learner host for a fresh network of the same architecture
(``workers/sandbox/fresh.py``, which only the host imports: harness code never imports a
learner; none where trials start untrained), extracts every target's
features through it, and stores them with the checkpoint's own; the trial job fits the probes
on them with the rest and scores OFM from their held-out loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from workers.probe.runtime.data import TaskSamples
from workers.probe.runtime.features import extract
from workers.probe.runtime.measure import TargetFeatures
from workers.sandbox.learner_calls import SandboxedLearner

FRESH_HOOK = "fresh_predictor"  # the learner hook workers/sandbox/fresh.py calls in the host
FRESH_STEP = -1  # where the fresh network's fits sit among a trial's steps (never a checkpoint's)


def fresh_features(
    learner: Any, predictor: Any, targets: Sequence[TaskSamples], ctx: Any, *, seed: int
) -> tuple[dict[int, TargetFeatures] | None, str]:
    """Every target's features through a fresh network of ``predictor``'s architecture, or
    None where there is none (the learner's first checkpoint already is untrained); and what
    the network was. A sandboxed learner builds it in its host (and lets it go after)."""
    hosted = isinstance(learner, SandboxedLearner)
    if hosted:
        fresh, source = learner.fresh_predictor(predictor, seed=seed, ctx=ctx)
    else:  # a learner object in this process (tests, tools): only its own hook
        hook = getattr(learner, FRESH_HOOK, None)
        fresh = hook(predictor, seed=seed) if callable(hook) else None
        source = f"learner.{FRESH_HOOK}" if fresh is not None else "none: no fresh network offered"
    if fresh is None:
        return None, source
    try:
        return {
            t.order: TargetFeatures(extract(learner, fresh, t.probe_images, ctx), t.probe_labels, t.num_classes)
            for t in targets
        }, source
    finally:
        if hosted:
            learner.release(fresh)


def start_losses(fits: Sequence[Any]) -> dict[tuple[int, str], np.ndarray]:
    """(target, probe kind) → the fresh network's held-out loss per fold, from the fits at
    :data:`FRESH_STEP`."""
    return {
        (f.target_order, f.kind): np.asarray(f.scores.losses, dtype=np.float64) for f in fits if f.step == FRESH_STEP
    }


__all__ = ["FRESH_HOOK", "FRESH_STEP", "fresh_features", "start_losses"]
