"""BHPO: the independent baseline with a Bayesian search over the paper's seven choices.

NEVIS'22's BHPO trains each task from scratch like ``indep`` but searches, sequentially
with a Gaussian process and the upper-confidence-bound acquisition, over the learning rate,
label smoothing, learning-rate schedule, batch size, architecture, random crop and flip.
This learner declares that space (every key is one :class:`~workers.learners.indep.
TrialOptions` honours); the search itself is the ``gp_ucb`` strategy of the trainer's
search registry, which a BHPO run uses unless it asks for another (``preferred_search``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workers.learners.indep import IndepLearner
from workers.learners.protocol import PAPER_SEARCH_SPACE, Choice, SearchDomain

BHPO_SEARCH_SPACE: Mapping[str, SearchDomain] = {
    **PAPER_SEARCH_SPACE,
    "schedule": Choice(("cosine", "piecewise")),
    "batch_size": Choice((16, 32, 64, 128, 256)),
    "architecture": Choice(("vgg", "resnet34")),
    "random_crop": Choice((True, False)),
    "flip": Choice((True, False)),
}
"""The seven hyper-parameters BHPO searches (NEVIS'22, Section 5)."""


class BhpoLearner(IndepLearner):
    """``indep`` whose trials also pick schedule, batch size, architecture, crop and flip."""

    name = "bhpo"
    preferred_search = "gp_ucb"

    def __init__(self, model: str = "resnet34", **options: Any) -> None:
        super().__init__(model, **options)

    def search_space(self) -> Mapping[str, SearchDomain]:
        return BHPO_SEARCH_SPACE


__all__ = ["BHPO_SEARCH_SPACE", "BhpoLearner"]
