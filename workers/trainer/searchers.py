"""Search strategies by name: how a task's trials pick their hyperparameters.

A strategy is one factory in :data:`SEARCHERS`: it takes a :class:`SearchRequest` (what any
strategy may need) and returns a :class:`SearchPlan` (a Ray Tune search algorithm and,
optionally, a trial scheduler such as ASHA for early stopping). Adding one is a function
here, or in a module of its own, plus one ``SEARCHERS.register`` line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.tune.search.basic_variant import BasicVariantGenerator

from services.core.registry import Registry


@dataclass(frozen=True)
class SearchRequest:
    """What a strategy is given for one task.

    ``seed`` fixes every random choice of the search; ``max_concurrent`` caps trials
    running at once; ``trials`` is how many the budget allows. ``metric``/``mode`` are what
    trials report and which way is better, for strategies and schedulers that compare
    trials (the harness keeps the trial with the lowest ``dev_error``).
    """

    seed: int
    max_concurrent: int
    trials: int
    metric: str = "dev_error"
    mode: str = "min"


@dataclass(frozen=True)
class SearchPlan:
    """What Ray Tune is given: ``TuneConfig(search_alg=..., scheduler=...)``.

    ``scheduler`` None is Tune's default (first in, first out, no early stopping).
    """

    search_alg: Any
    scheduler: Any = None


SearchFactory = Callable[[SearchRequest], SearchPlan]

SEARCHERS: Registry[SearchFactory] = Registry("search strategy")
"""Strategy name → factory; ``random`` is the default."""


def random_search(request: SearchRequest) -> SearchPlan:
    """Independent random samples of the parameter space, seeded: a rerun picks the same."""
    return SearchPlan(BasicVariantGenerator(random_state=request.seed,
                                            max_concurrent=request.max_concurrent))


SEARCHERS.register("random", random_search)


def plan(name: str, request: SearchRequest) -> SearchPlan:
    """The plan of strategy ``name`` for ``request``.

    Raises:
        UnknownNameError: ``name`` is not a registered strategy (the message says which
            are, and the closest).
    """
    return SEARCHERS.get(name)(request)


__all__ = ["SEARCHERS", "SearchPlan", "SearchRequest", "plan", "random_search"]
