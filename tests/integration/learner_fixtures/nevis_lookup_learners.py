"""The public-labels attack of issue 44, as a learner: test labels computed before submitting.

``LookupLearner`` carries a table from each test image's sha256 to its label (the module
``nevis_lookup_table``, which a test writes from its own ``nevis data prepare`` of the public
data, as a submitter could) and answers every image it finds there from the table; others it
answers as the nearest-mean learner would. ``lookup_test_split`` / ``lookup_whole_dataset``
(``bench/adversaries.py``) answer *only* from their tables (``nevis_lookup_table_test``: the
public test split's labels; ``nevis_lookup_table_all``: every image of the dataset), every other
image with one fixed class, so their error shows what the table alone is worth.
"""

from __future__ import annotations

import hashlib
import importlib

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


class LookupOnly(NearestMeanLearner):
    """A carried table of labels and nothing else: what the table misses is answered class 0."""

    name = "lookup-only"
    table_module = "nevis_lookup_table_test"

    def predict(self, predictor, images, ctx):
        table = importlib.import_module(self.table_module).TABLE
        scores = np.zeros_like(super().predict(predictor, images, ctx))
        scores[:, 0] = 1.0
        for i, image in enumerate(images):
            label = table.get(hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest())
            if label is not None:
                scores[i] = 0.0
                scores[i, label] = 1.0
        return scores


class LookupWholeDataset(LookupOnly):
    name = "lookup-whole-dataset"
    table_module = "nevis_lookup_table_all"


def lookup() -> LookupLearner:
    return LookupLearner()


def lookup_test_split() -> LookupOnly:
    return LookupOnly()


def lookup_whole_dataset() -> LookupWholeDataset:
    return LookupWholeDataset()
