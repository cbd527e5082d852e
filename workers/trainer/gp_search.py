"""GP-UCB: a seeded Gaussian-process search of a learner's space, as a Ray Tune ``Searcher``.

Why a searcher of our own: Ray 2.60's ``BayesOptSearch`` calls ``bayes_opt.UtilityFunction``,
which bayesian-optimization removed in 2.0, so it only runs on the unmaintained 1.x line. This
module drives the maintained line (``bayes_opt`` 3.x: its ``BayesianOptimization`` with the
``UpperConfidenceBound`` acquisition) through Tune's ``Searcher`` interface, and does what
``BayesOptSearch`` cannot: log-scaled and categorical domains, and failed trials.

Guarantees:

- **Declared types.** ``tune.loguniform`` is searched in natural-log space, ``tune.uniform``
  as it is, ``tune.choice`` of k values as a categorical over the indices 0..k-1 (bayes_opt's
  one-hot kernel: no order is assumed among the values). A choice of one value, or an
  interval of zero width, is a constant. The learner receives floats within the declared
  bounds and, for a choice, one of the declared values itself.
- **Every result counts.** Each suggestion fits the GP (Matern 5/2) anew to every completed
  trial and maximises the upper confidence bound (kappa 2.576, the library's default) of the
  metric, negated for ``mode="min"``. A trial whose result has no finite metric (a failed
  trial has no ``dev_error``, a crashed one no result) counts as the **worst value seen so
  far**, so the search moves away from where the learner fails; while no trial has
  succeeded, failures cannot be placed on the scale and the search keeps drawing at random.
  Duplicate points are registered once, with the mean of their values.
- **Seeded.** Suggestion n draws its randomness from ``RandomState([seed, n])``: the same
  results in the same order give the same suggestions. The first ``initial_points``
  suggestions (until that many trials have succeeded) are random draws, so that the GP is
  first fitted to more than one point.
- **Sequential use.** This class does not limit concurrency itself; the ``gp_ucb`` strategy
  (:mod:`workers.trainer.searchers`) runs it behind a ``ConcurrencyLimiter`` of 1 so that each
  suggestion sees the result of every earlier trial.

The state is a list of (point, value) pairs: it pickles, so Tune can save and restore it.
"""

from __future__ import annotations

import math
import pickle
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from bayes_opt import BayesianOptimization
from bayes_opt.acquisition import UpperConfidenceBound
from bayes_opt.parameter import CategoricalParameter
from ray.tune.search import Searcher
from ray.tune.search.sample import Categorical, Domain, Float, LogUniform, Quantized, Uniform
from threadpoolctl import threadpool_limits

UCB_KAPPA = 2.576
"""Exploration weight of the upper confidence bound (bayes_opt's default)."""

Point = dict[str, Any]  # one suggestion in the GP's coordinates


@dataclass(frozen=True)
class LogDimension:
    """A log-uniform float: the GP sees ``ln(value)``."""

    low: float
    high: float

    def bounds(self, name: str) -> tuple[float, float]:
        return math.log(self.low), math.log(self.high)

    def value(self, x: Any) -> float:
        return min(max(math.exp(float(x)), self.low), self.high)


@dataclass(frozen=True)
class LinearDimension:
    """A uniform float: the GP sees the value."""

    low: float
    high: float

    def bounds(self, name: str) -> tuple[float, float]:
        return self.low, self.high

    def value(self, x: Any) -> float:
        return min(max(float(x), self.low), self.high)


@dataclass(frozen=True)
class ChoiceDimension:
    """One of k >= 2 values: the GP sees the index, as a categorical."""

    values: tuple[Any, ...]

    def bounds(self, name: str) -> CategoricalParameter:
        return CategoricalParameter(name, tuple(range(len(self.values))))

    def value(self, x: Any) -> Any:
        return self.values[int(x)]


Dimension = LogDimension | LinearDimension | ChoiceDimension


def dimension(name: str, domain: Domain) -> Dimension | Any:
    """What the GP searches for one Tune domain, or the constant it reduces to.

    Raises:
        ValueError: a domain GP-UCB cannot search (quantized, integer, or a function).
    """
    if isinstance(domain, Categorical):
        values = tuple(domain.categories)
        return ChoiceDimension(values) if len(values) > 1 else values[0]
    sampler = domain.get_sampler() if isinstance(domain, Float) else None
    if isinstance(sampler, (LogUniform, Uniform)) and not isinstance(sampler, Quantized):
        low, high = float(domain.lower), float(domain.upper)
        if low == high:
            return low
        return LogDimension(low, high) if isinstance(sampler, LogUniform) else LinearDimension(low, high)
    raise ValueError(
        f"GP-UCB searches log-uniform, uniform and choice domains; "
        f"{name!r} is {type(domain).__name__} with {type(sampler).__name__} sampling."
    )


def split_space(config: Mapping[str, Any]) -> tuple[dict[str, Dimension], dict[str, Any]]:
    """The dimensions the GP searches and the constants, from a Tune parameter space.

    Plain (already resolved) values are left to Tune, which keeps them in every config.
    """
    dims: dict[str, Dimension] = {}
    constants: dict[str, Any] = {}
    for name, domain in config.items():
        if not isinstance(domain, Domain):
            continue
        found = dimension(name, domain)
        if isinstance(found, (LogDimension, LinearDimension, ChoiceDimension)):
            dims[name] = found
        else:
            constants[name] = found
    return dims, constants


class GpUcbSearch(Searcher):
    """Gaussian-process search with the upper-confidence-bound acquisition (see the module).

    Args:
        metric: The result key to optimise (``dev_error`` for the harness).
        mode: ``"min"`` or ``"max"``.
        seed: Fixes every random choice.
        initial_points: Random suggestions before the GP takes over.
    """

    def __init__(self, *, metric: str, mode: str, seed: int, initial_points: int = 2) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"The 'mode' parameter of GpUcbSearch must be 'min' or 'max'. Got {mode!r} instead.")
        if initial_points < 1:
            raise ValueError(
                f"The 'initial_points' parameter of GpUcbSearch must be an int in [1, inf). "
                f"Got {initial_points!r} instead."
            )
        super().__init__(metric=metric, mode=mode)
        self._seed = seed
        self._initial_points = initial_points
        self._dims: dict[str, Dimension] | None = None
        self._constants: dict[str, Any] = {}
        self._live: dict[str, Point] = {}
        self._observations: list[tuple[Point, float | None]] = []  # value None: no result
        self._suggested = 0

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        if self._dims is not None:
            return False
        self._dims, self._constants = split_space(config)
        self._metric, self._mode = metric or self._metric, mode or self._mode
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self._dims is None:
            raise RuntimeError("GpUcbSearch has no search space: Tune passes it through set_search_properties.")
        random_state = np.random.RandomState([self._seed, self._suggested])
        self._suggested += 1
        point = self._next_point(random_state) if self._dims else {}
        self._live[trial_id] = point
        return {**self._constants, **{name: dim.value(point[name]) for name, dim in self._dims.items()}}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        point = self._live.pop(trial_id, None)
        if point is None:
            return
        value = None if error or not result else result.get(self._metric)
        finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        self._observations.append((point, float(value) if finite else None))

    def get_state(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.set_state(pickle.load(f))

    def _next_point(self, random_state: np.random.RandomState) -> Point:
        optimizer = self._optimizer(random_state)
        if sum(value is not None for _, value in self._observations) < self._initial_points:
            return optimizer.random_sample(1)[0]
        for point, target in self._targets():
            optimizer.register(point, target)
        # The GP's matrices have one row per trial: BLAS threads would only contend for the
        # CPUs (with the trials, on a busy machine) and make each suggestion several times slower.
        with threadpool_limits(limits=1, user_api="blas"):
            return optimizer.suggest()

    def _optimizer(self, random_state: np.random.RandomState) -> BayesianOptimization:
        pbounds = {name: dim.bounds(name) for name, dim in (self._dims or {}).items()}
        with warnings.catch_warnings():
            # bayes_opt flags its categorical parameters as experimental on every build.
            warnings.filterwarnings("ignore", message="Non-float parameters are experimental")
            return BayesianOptimization(
                f=None,
                pbounds=pbounds,
                random_state=random_state,
                verbose=0,
                acquisition_function=UpperConfidenceBound(kappa=UCB_KAPPA),
            )

    def _targets(self) -> list[tuple[Point, float]]:
        """What the GP is fitted to (it maximises): one entry per distinct point, failures
        at the worst value seen so far."""
        sign = -1.0 if self._mode == "min" else 1.0
        finite = [sign * value for _, value in self._observations if value is not None]
        if not finite:
            return []
        worst = min(finite)
        groups: dict[tuple, tuple[Point, list[float]]] = {}
        for point, value in self._observations:
            key = tuple(sorted((name, float(x)) for name, x in point.items()))
            groups.setdefault(key, (point, []))[1].append(worst if value is None else sign * value)
        return [(point, float(np.mean(values))) for point, values in groups.values()]


__all__ = ["UCB_KAPPA", "ChoiceDimension", "GpUcbSearch", "LinearDimension", "LogDimension", "dimension", "split_space"]
