"""The public-labels attack of issue 44, as a learner: test labels computed before submitting.

``LookupLearner`` carries a table from each test image's sha256 to its label (the module
``nevis_lookup_table``, which a test writes from its own ``nevis data prepare`` of the public
data, as a submitter could) and answers every image it finds there from the table; others it
answers as the nearest-mean learner would.
"""

from __future__ import annotations

import hashlib

import numpy as np
from nevis_test_learners import NearestMeanLearner


class LookupLearner(NearestMeanLearner):
    """Nearest class means, overridden by a carried table of test labels."""

    name = "lookup"

    def predict(self, predictor, images, ctx):
        from nevis_lookup_table import TABLE

        scores = super().predict(predictor, images, ctx)
        for i, image in enumerate(images):
            label = TABLE.get(hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest())
            if label is not None:
                scores[i] = -1e9
                scores[i, label] = 0.0
        return scores


def lookup() -> LookupLearner:
    return LookupLearner()
