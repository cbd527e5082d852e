"""A freshly initialised network of a predictor's architecture: OFM's untrained start.

Stuhr & Brauer measure a representation from s_0, the untrained network. A transfer learner's
first checkpoint (FT-prev, FT-d, MT, PT, PT+FT) is the transferred network, already trained,
so the objective-function mismatch's starting point would be a trained one and OFM would hit
its infinite special case (x_0 = min x) whenever fine-tuning never beat it. The probe pool
asks for this network at a trial's first checkpoint; it runs where the predictor lives (the
learner host), like :mod:`workers.sandbox.views`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from workers.learners.indep import IndepLearner, IndepPredictor
from workers.learners.models import FeatureView, build_model

FRESH_HOOK = "fresh_predictor"  # optional learner method: (predictor, *, seed) -> predictor | None


def starts_fresh(learner: Any) -> bool:
    """Whether the learner's trials start from an untrained network (``indep``, BHPO): a
    built-in baseline that does not override the network a trial starts from."""
    return type(learner)._initial_predictor is IndepLearner._initial_predictor  # noqa: SLF001


def fresh_predictor(learner: Any, predictor: Any, *, seed: int) -> tuple[Any | None, str]:
    """A fresh network of ``predictor``'s architecture, or None where step 0 already is one.

    In order: the learner's own ``fresh_predictor(predictor, *, seed)`` hook (None: its step 0
    is untrained); for the built-in baselines' predictors, the same network built anew
    (``build_model``: the learner's own initialisation) with ``torch`` seeded by ``seed``, on
    the predictor's device, in eval mode, unless the learner starts every trial fresh. Given
    the trial's own seed this is the network the trial built before transferring into it
    (``IndepLearner.train`` seeds torch, then builds it first), so where nothing was
    transferred (FT-prev's first task) it equals the first checkpoint;
    otherwise None (a learner of another kind: its first checkpoint stays the start).
    """
    hook = getattr(learner, FRESH_HOOK, None)
    if callable(hook):
        fresh = hook(predictor, seed=seed)
        return fresh, f"learner.{FRESH_HOOK}" if fresh is not None else f"learner.{FRESH_HOOK}: none"
    if not (isinstance(learner, IndepLearner) and isinstance(predictor, IndepPredictor)):
        return None, "none: not a built-in baseline's predictor (its first checkpoint is the start)"
    if starts_fresh(learner):
        return None, "none: the first checkpoint is already an untrained network"
    device = next(predictor.model.parameters()).device
    torch.manual_seed(seed)
    model = build_model(predictor.model_config).to(device).eval()
    fresh = replace(predictor, model=model, feature_view=FeatureView(model))
    return fresh, f"fresh {predictor.model_config.name} (the learner's initialisation, seed {seed})"


__all__ = ["FRESH_HOOK", "fresh_predictor", "starts_fresh"]
