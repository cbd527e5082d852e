"""A task's one-worker trials without a Tune experiment: Tune's search, the run's warm executors.

A Tune experiment costs about 1.5 s to start whatever its trials do (a fresh trial actor, the
experiment's bookkeeping), and every task started one. One-worker trials run in the run's
warm executors anyway (:mod:`workers.trainer.executor`), so the driver drives the search
itself: the same search algorithm as the experiment would (Tune's variant generation with
the same seed for ``random``, a Tune ``Searcher`` through ``suggest`` / ``on_trial_complete``
for the others), one call to the executor pool per trial, each outcome handed on as it ends.
A trial holds a one-bundle placement group of the CPUs it declared while it runs, which is
what its Tune trial actor held, so runs that share a cluster still queue for its CPUs rather
than oversubscribe them; a task's trials take turns in ``concurrency`` such groups.
Multi-worker trials (Ray Train inside Tune) keep the experiment
(:func:`workers.trainer.task_job.run_trials`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.tune.search import Searcher
from ray.tune.search.sample import _BackwardsCompatibleNumpyRng
from ray.tune.search.variant_generator import generate_variants
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group

from services.store.runs.outcomes import TrialOutcome
from workers.trainer.host_usage import usage_of_failure
from workers.trainer.learner_nodes import learner_ask
from workers.trainer.searchers import SearchPlan
from workers.trainer.trial import failure_metrics
from workers.trainer.trial_flops import no_flops


class Suggestions:
    """The configurations of a task's trials, in the order Tune would start them."""

    def __init__(self, plan: SearchPlan, space: Mapping[str, Any]) -> None:
        self._searcher: Searcher | None = None
        self._variants: Iterator[dict[str, Any]] | None = None
        if isinstance(plan.search_alg, Searcher):
            self._searcher = plan.search_alg
            self._searcher.set_search_properties(None, None, dict(space))
        elif plan.variants_seed is not None:
            # What Tune's BasicVariantGenerator draws from this seed: the same samples, in order.
            rng = _BackwardsCompatibleNumpyRng(plan.variants_seed)
            self._variants = (
                spec["config"] for _, spec in generate_variants({"config": dict(space)}, random_state=rng)
            )
        else:
            raise TypeError(f"cannot drive search algorithm {type(plan.search_alg).__name__} outside Tune")

    def next(self, trial_id: str) -> dict[str, Any] | None | str:
        """The next trial's config; ``None`` while the search waits for results; FINISHED at the end."""
        if self._variants is not None:
            return next(self._variants, Searcher.FINISHED)
        return self._searcher.suggest(trial_id)

    def complete(self, trial_id: str, result: Mapping[str, Any]) -> None:
        """Tell the search how a trial ended (a failed trial reports no ``dev_error``)."""
        if self._searcher is not None:
            self._searcher.on_trial_complete(trial_id, result=dict(result))


@dataclass
class _Running:
    trial_id: str
    config: dict[str, Any]
    reservation: PlacementGroup | None
    started: float = field(default_factory=time.perf_counter)


@dataclass
class TrialLoop:
    """Runs one task's trials in ``pool`` (an :class:`~workers.trainer.executor.ExecutorPool`).

    ``cpus`` is what one trial declared, ``concurrency`` how many run at once: the loop
    reserves ``concurrency`` one-bundle groups of ``cpus`` and asks the search for a trial only
    when one is free (as Tune asks its searcher only when a trial can start), so a trial never
    waits for CPUs after it was suggested. ``on_trial`` gets each outcome as soon as it ends.
    """

    pool: Any
    spec_ref: Any
    cpus: float
    concurrency: int
    on_trial: Callable[[TrialOutcome], None]
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def run(self, suggestions: Suggestions) -> list[TrialOutcome]:
        """Every trial's outcome, in the order they ended."""
        bundle = {"CPU": self.cpus, **learner_ask()}  # on a learner node where the setting names one
        groups = [placement_group([bundle]) for _ in range(self.concurrency)] if self.cpus > 0 else []
        reserving = {group.ready(): group for group in groups}  # not ready yet
        free: list[PlacementGroup | None] = [] if groups else [None] * self.concurrency
        calls: dict[Any, _Running] = {}
        outcomes: list[TrialOutcome] = []
        finished = False
        try:
            while True:
                while free and not finished:
                    trial_id = f"trial_{next(self._ids):05d}"
                    config = suggestions.next(trial_id)
                    if config is None:
                        if not calls:
                            raise RuntimeError("the search waits for results but no trial is running")
                        break
                    if config == Searcher.FINISHED:
                        finished = True
                        break
                    trial = _Running(trial_id, dict(config), free.pop())
                    calls[self.pool.run.remote(trial.config, [self.spec_ref])] = trial
                if finished and not calls:
                    return outcomes
                [ref], _ = ray.wait([*calls, *reserving], num_returns=1)
                if ref in reserving:  # CPUs for one more trial
                    free.append(reserving.pop(ref))
                    continue
                trial = calls.pop(ref)
                free.append(trial.reservation)
                # The stored config is the trial's whole config, harness keys included, as the
                # result Tune hands on carries it (multi-worker trials still go through Tune).
                metrics = {**self._result(ref, trial, self.cpus), "config": trial.config}
                outcome = TrialOutcome.from_metrics(metrics)
                suggestions.complete(trial.trial_id, metrics)
                outcomes.append(outcome)
                self.on_trial(outcome)
        finally:  # done or interrupted: give every reservation back
            for group in groups:
                _release(group)

    @staticmethod
    def _result(ref: Any, trial: _Running, cpus: float) -> dict[str, Any]:
        try:
            return ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
            # The executor's process died (memory, kill), or harness code raised: the trial
            # failed, as a Tune trial whose process failed does, charged the usage its call
            # measured or, where that died with the executor, wall time × its CPUs (floored).
            usage = usage_of_failure(exc, time.perf_counter() - trial.started, cpus)
            return {**failure_metrics(trial.config, exc, no_flops()), **usage}


def _release(reservation: PlacementGroup | None) -> None:
    if reservation is not None:
        try:
            remove_placement_group(reservation)
        except Exception:  # noqa: BLE001 - Ray already shut down (interrupted run)
            pass


__all__ = ["Suggestions", "TrialLoop"]
