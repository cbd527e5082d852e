"""Features and scores of the same images from one pass, where the learner can give both.

The probe pool needs, at every checkpoint, the current task's features (its probes, RankMe)
AND the learner's scores on the very same images (the pretext error and held-out loss): two
passes through the backbone, unless the learner offers the optional
``features_and_predict(predictor, images, ctx) -> (features, scores)``, which the ``indep``
baselines do (the head applied to the features, one backbone pass: the probe's analysis
FLOPs drop by that pass too). Any other learner is asked twice, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

JOINT_HOOK = "features_and_predict"  # optional learner method


def features_and_scores(learner: Any, predictor: Any, images: np.ndarray, ctx: Any) -> tuple[Any, Any]:
    """``(learner.features(...), learner.predict(...))`` of ``images``, in one pass if it can."""
    joint = getattr(learner, JOINT_HOOK, None)
    if callable(joint):
        return joint(predictor, images, ctx)
    return learner.features(predictor, images, ctx), learner.predict(predictor, images, ctx)


__all__ = ["JOINT_HOOK", "features_and_scores"]
