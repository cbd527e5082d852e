"""Search strategies and trial schedulers by name: how a task's trials pick their
hyperparameters, and whether trials that trail are stopped early.

A strategy is one factory in :data:`SEARCHERS`, a scheduler one in :data:`SCHEDULERS`: each
takes a :class:`SearchRequest` (what any of them may need); :func:`plan` returns both as a
:class:`SearchPlan` for ``tune.TuneConfig``. Adding one is a function here, or in a module
of its own, plus one ``register`` line in :mod:`services.core.strategies`, where every name
is declared once (the budget refuses unknown names from there before anything runs).

Strategies:

- ``random``: independent seeded samples; the trial index is grid-searched, so Tune makes
  the ``trials`` trials from one sample of the grid.
- ``gp_ucb``: sequential Gaussian-process search with the upper-confidence-bound acquisition
  (:mod:`workers.trainer.gp_search`), one trial at a time. A ``Searcher`` cannot take the
  harness's ``grid_search`` over ``trial_index``, so :class:`HarnessKeys` numbers its
  suggestions instead (see there) and Tune samples ``trials`` times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from ray.tune.search import ConcurrencyLimiter, Searcher
from ray.tune.search.basic_variant import BasicVariantGenerator

from services.core.strategies import SCHEDULERS, SEARCHERS
from workers.trainer.early_stopping import DEFAULT_ETA, DEFAULT_RUNGS, StoppingRule, rung_steps
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, learner_config

ASHA_REDUCTION_FACTOR = DEFAULT_ETA
"""ASHA keeps the best third of the trials at each rung."""

ASHA_RUNGS = DEFAULT_RUNGS
"""Rungs below the full budget: at ``steps / 3**2`` and ``steps / 3`` steps."""


@dataclass(frozen=True)
class SearchRequest:
    """What a strategy or scheduler is given for one task.

    ``seed`` fixes every random choice of the search; ``max_concurrent`` caps trials
    running at once; ``trials`` is how many the budget allows; ``steps`` is the optimisation
    steps of one trial (the time scale of an early-stopping scheduler). ``metric``/``mode``
    are what trials report and which way is better, for strategies and schedulers that
    compare trials (the harness keeps the trial with the lowest ``dev_error``).
    """

    seed: int
    max_concurrent: int
    trials: int
    steps: int
    metric: str = "dev_error"
    mode: str = "min"


@dataclass(frozen=True)
class SearchPlan:
    """What Ray Tune is given: ``TuneConfig(search_alg=..., scheduler=..., num_samples=...)``.

    ``scheduler`` None is Tune's default (first in, first out): trials run in learner hosts
    and report to Tune once, so early stopping is the harness's (:data:`SCHEDULERS`).
    ``num_samples`` is how many times Tune samples the parameter space: 1 where the space's
    grid over ``trial_index`` makes the trials, ``trials`` for a ``Searcher``.
    ``variants_seed`` is the seed of a ``BasicVariantGenerator``, so that a loop outside Tune
    (:mod:`workers.trainer.trial_loop`) draws the same samples.
    """

    search_alg: Any
    scheduler: Any = None
    num_samples: int = 1
    variants_seed: int | None = None


SearchFactory = Callable[[SearchRequest], SearchPlan]
SchedulerFactory = Callable[[SearchRequest], StoppingRule]


def trial_seed(seed: int, index: int) -> int:
    """The learner seed of trial ``index`` of a searcher-driven task: fixed by both."""
    return int(np.random.default_rng((seed, index)).integers(0, 2**31 - 1))


class HarnessKeys(Searcher):
    """Adds the harness's keys to every suggestion of ``searcher``.

    ``trial_index`` is the number of suggestions made before (so 0..trials-1, in the order
    Tune starts the trials, each once: a ``None`` from a concurrency limit is not counted);
    ``trial_seed`` is :func:`trial_seed` of the search seed and that index. The searcher
    never sees these keys: they are removed from the space it is given. After ``trials``
    suggestions it answers ``FINISHED``.
    """

    def __init__(self, searcher: Searcher, *, seed: int, trials: int) -> None:
        super().__init__(metric=searcher.metric, mode=searcher.mode)
        self.searcher = searcher
        self._seed = seed
        self._trials = trials
        self._count = 0

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return self.searcher.set_search_properties(metric, mode, learner_config(config), **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._count >= self._trials:
            return Searcher.FINISHED
        config = self.searcher.suggest(trial_id)
        if config is None or config == Searcher.FINISHED:
            return config
        index, self._count = self._count, self._count + 1
        return {**config, TRIAL_INDEX: index, TRIAL_SEED: trial_seed(self._seed, index)}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def get_state(self) -> dict[str, Any]:
        # A wrapper's own state, as Tune's SearchGenerator saves the chain: each wrapper
        # (found through ``.searcher``) by get_state, the innermost searcher by save.
        return {k: v for k, v in self.__dict__.items() if k != "searcher"}

    def set_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def random_search(request: SearchRequest) -> SearchPlan:
    """Independent random samples of the parameter space, seeded: a rerun picks the same."""
    return SearchPlan(
        BasicVariantGenerator(random_state=request.seed, max_concurrent=request.max_concurrent),
        variants_seed=request.seed,
    )


def gp_ucb_search(request: SearchRequest) -> SearchPlan:
    """Sequential GP-UCB, seeded: one trial at a time, each suggestion fitted to every
    earlier result (``max_concurrent`` is not used)."""
    # bayes_opt and scikit-learn's GP cost a second to import: only runs that use them pay.
    from workers.trainer.gp_search import GpUcbSearch  # noqa: PLC0415

    gp = GpUcbSearch(metric=request.metric, mode=request.mode, seed=request.seed)
    searcher = HarnessKeys(ConcurrencyLimiter(gp, max_concurrent=1), seed=request.seed, trials=request.trials)
    return SearchPlan(searcher, num_samples=request.trials)


def fifo(request: SearchRequest) -> StoppingRule:
    """Every trial runs to its end."""
    return StoppingRule()


def asha(request: SearchRequest) -> StoppingRule:
    """Asynchronous successive halving on dev error, decided by harness code at rungs
    ``steps / 9`` and ``steps / 3`` (:mod:`workers.trainer.early_stopping`): trials run in
    learner hosts, which score the dev split at each rung and ask the task's harness actor
    whether to go on; those outside the best third so far stop, keeping what they spent.
    (Ray Tune's own ASHA cannot act there: a trial reports to Tune once, at its end.)"""
    return StoppingRule(
        rung_steps(request.steps, eta=ASHA_REDUCTION_FACTOR, rungs=ASHA_RUNGS), eta=ASHA_REDUCTION_FACTOR
    )


def plan(name: str, request: SearchRequest, *, scheduler: str = "fifo") -> SearchPlan:
    """The plan of strategy ``name`` with trial scheduler ``scheduler`` for ``request``.

    Raises:
        UnknownNameError: ``name`` is not a registered strategy, or ``scheduler`` not a
            registered scheduler (the message says which are, and the closest).
    """
    search_plan = SEARCHERS.get(name)(request)
    SCHEDULERS.get(scheduler)  # an unknown name fails here, before Tune starts
    return SearchPlan(search_plan.search_alg, None, search_plan.num_samples, search_plan.variants_seed)


def stopping_rule(scheduler: str, steps: int) -> StoppingRule:
    """The harness's early-stopping rule of trial scheduler ``scheduler`` for ``steps``-step trials."""
    return SCHEDULERS.get(scheduler)(SearchRequest(seed=0, max_concurrent=1, trials=1, steps=steps))


__all__ = [
    "ASHA_REDUCTION_FACTOR",
    "ASHA_RUNGS",
    "SCHEDULERS",
    "SEARCHERS",
    "HarnessKeys",
    "SearchPlan",
    "SearchRequest",
    "asha",
    "fifo",
    "gp_ucb_search",
    "plan",
    "random_search",
    "stopping_rule",
    "trial_seed",
]
