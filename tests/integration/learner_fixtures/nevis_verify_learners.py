"""A learner for the verified-rows tests (issue 50), importable by Ray workers as ``module:factory``.

``Settled``: the nearest-mean learner with no search space, so its trials do not depend on the
run's seed and a replay reproduces its E. While the file ``nevis_verify_random`` lies on its
import path (a test writes it into the session's learner folder), its predictions are draws of
``os.urandom`` instead: the same code, made non-deterministic on purpose, whose replays do not
reproduce the E it had before.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from nevis_test_learners import NearestMeanLearner

RANDOM_FLAG = "nevis_verify_random"


def _random_now() -> bool:
    return any(os.path.isfile(os.path.join(folder or ".", RANDOM_FLAG)) for folder in sys.path)


class Settled(NearestMeanLearner):
    name = "verify-settled"

    def search_space(self):
        return {}

    def train(self, view, state, config, ctx):
        return super().train(view, state, {"shrink": 0.0}, ctx)

    def predict(self, predictor, images, ctx):
        scores = super().predict(predictor, images, ctx)
        if _random_now():
            noise = np.frombuffer(os.urandom(4 * scores.size), dtype=np.uint32).reshape(scores.shape)
            return noise.astype(np.float64)
        return scores


def settled() -> Settled:
    return Settled()
