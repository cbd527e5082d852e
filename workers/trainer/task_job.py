"""One Ray job per task: the trials under Ray Tune's search, then evaluation by harness code.

``run_trials`` runs the learner's search (a strategy of :mod:`workers.trainer.searchers`):
one-worker trials in the run's warm executors from a loop in this process
(:mod:`workers.trainer.trial_loop`), multi-worker trials as a Tune experiment whose trials
call :func:`workers.trainer.tune_trial.tune_trial`; each
finished trial becomes a :class:`~services.store.runs.outcomes.TrialOutcome` and is handed to
``on_trial`` at once (the runner records it, so an interrupted task still leaves its spent
FLOPs in the database). ``evaluate`` scores the chosen predictor in an evaluator actor
(:mod:`workers.trainer.executor`) that receives images only; labels never leave the driver.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import ray
from ray import tune
from ray.tune.logger import JsonLoggerCallback

from services.core.budget import RunBudget
from services.store.runs.outcomes import TrialOutcome
from workers.learners.protocol import Resources, TaskInfo
from workers.sandbox.declaration import LearnerDeclaration
from workers.trainer import searchers
from workers.trainer.learner_nodes import learner_ask
from workers.trainer.pending_deadline import PendingDeadline
from workers.trainer.rank_trial import sandboxed_ranks
from workers.trainer.search import param_space
from workers.trainer.trial import TRIAL_SEED, TrialSpec, failure_metrics
from workers.trainer.trial_flops import no_flops
from workers.trainer.trial_loop import Suggestions, TrialLoop
from workers.trainer.tune_trial import TrialJob, tune_trial

os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # keep Tune's console tables out of our bars
# Only the JSON logger (Tune's result grid reads it); no CSV or TensorBoard files per trial.
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
# Ctrl-C must reach the runner (which closes the attempt and says how to resume), not be
# turned by Tune into a "restore this experiment" message.
os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
# A failed trial reports no dev_error, by design; Tune's strict check would otherwise end the
# experiment at that result whenever the searcher or scheduler names the metric (gp_ucb, asha).
os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")


class _TrialSink(tune.Callback):
    """Hands each trial's outcome to the runner as soon as the trial ends."""

    def __init__(self, on_trial: Callable[[TrialOutcome], None]) -> None:
        self._on_trial = on_trial
        self.outcomes: list[TrialOutcome] = []

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks to make an experiment restorable; the runner's hook
        # (database sessions) stays in this process.
        return {"outcomes": []}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.outcomes, self._on_trial = state["outcomes"], lambda outcome: None

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._emit(dict(trial.last_result))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # The trial process itself died (out of memory, killed): learner errors never get here.
        message = RuntimeError(f"trial process failed: {trial.error_file or 'see Ray logs'}")
        self._emit(failure_metrics(trial.config, message, no_flops()))

    def _emit(self, metrics: dict[str, Any]) -> None:
        outcome = TrialOutcome.from_metrics(metrics)  # the one place a result dict is read
        self.outcomes.append(outcome)
        self._on_trial(outcome)


def trial_resources(resources: Resources, *, ranks_here: bool = False) -> dict[str, float]:
    """Tune resources of one trial run as a Tune experiment: its CPUs and GPUs; every rank's in
    one bundle, so on one node, where this trial's process starts the ranks' learner hosts
    (``ranks_here``); else just a driver for a Ray Train worker group (pooled trials hold theirs
    in the trial loop)."""
    if resources.num_workers > 1 and ranks_here:
        return {
            "cpu": resources.num_workers * resources.cpus_per_worker,
            "gpu": resources.num_workers * resources.gpus_per_worker,
        }
    if resources.num_workers > 1:
        return {"cpu": 0.01}  # the Train worker group reserves the real resources
    return {"cpu": resources.cpus_per_worker, "gpu": resources.gpus_per_worker}


def fit_to_cluster(resources: Resources, cluster: Mapping[str, float]) -> Resources:
    """What a trial asks for on this cluster: an optional GPU ask (``gpu_optional``) is dropped
    where the cluster has no GPU, so the trial runs on CPUs instead of waiting forever."""
    if resources.gpu_optional and resources.gpus_per_worker > 0 and cluster.get("GPU", 0.0) <= 0:
        return replace(resources, gpus_per_worker=0.0)
    return resources


def default_concurrency(resources: Resources, cluster: Mapping[str, float] | None = None) -> int:
    """How many trials fit on the cluster (Ray's, unless given) at once: by its CPUs and, for a
    trial that asks for GPUs, by its GPUs, where a share of one (``gpus_per_worker`` 0.25) puts
    that many trials side by side on each."""
    cluster = ray.cluster_resources() if cluster is None else cluster
    cpus = cluster.get("CPU", 1.0) / max(resources.cpus_per_worker * resources.num_workers, 1e-9)
    fits = int(cpus)
    if resources.gpus_per_worker > 0:
        fits = min(fits, int(cluster.get("GPU", 0.0) / (resources.gpus_per_worker * resources.num_workers)))
    return max(fits, 1)


def search_seed(run_seed: int, task_order: int) -> int:
    """The random-search seed of one task: fixed by the run seed and the task, nothing else."""
    return zlib.crc32(f"{run_seed}:{task_order}".encode())


def run_trials(
    learner: LearnerDeclaration,
    spec: TrialSpec,
    budget: RunBudget,
    *,
    storage_path: str,
    on_trial: Callable[[TrialOutcome], None],
    pool: Any = None,
    search: str = "random",
    scheduler: str = "fifo",
) -> list[TrialOutcome]:
    """Run the task's trials; returns every trial's outcome, by trial index.

    With ``pool`` (an :class:`~workers.trainer.executor.ExecutorPool`), one-worker trials
    run in its warm executors, driven by this process through Tune's search algorithm
    (:mod:`workers.trainer.trial_loop`: no Tune experiment, whose start-up alone cost about
    1.5 s per task); multi-worker trials run as a Tune experiment whose trials start Ray Train. ``search`` names the strategy in
    :data:`~workers.trainer.searchers.SEARCHERS`, ``scheduler`` the trial scheduler in
    :data:`~workers.trainer.searchers.SCHEDULERS`. Under a ruleset (``spec.rules``) the
    task harness keeps the task's charge (each ended trial is settled there at its charge
    before ``on_trial`` hears of it), and ``self-tuning`` trials get no search space: the
    learner's defaults.
    """
    on_trial = _settling(spec, on_trial)
    sink = _TrialSink(on_trial)
    concurrency = budget.max_concurrent or default_concurrency(learner.resources)
    search_plan = searchers.plan(
        search,
        searchers.SearchRequest(
            seed=search_seed(budget.seed, spec.info.order),
            max_concurrent=min(concurrency, budget.trials),
            trials=budget.trials,
            steps=budget.steps,
        ),
        scheduler=scheduler,
    )
    space = param_space({} if spec.rules.defaults_only else learner.search_space, trials=budget.trials)
    if pool is not None and learner.resources.num_workers == 1:
        loop = TrialLoop(
            pool=pool,
            spec_ref=ray.put(spec),
            cpus=learner.resources.cpus_per_worker,
            concurrency=min(concurrency, budget.trials),
            on_trial=on_trial,
        )
        outcomes = loop.run(Suggestions(search_plan, space))
        return sorted(outcomes, key=lambda o: o.trial_index)
    job = TrialJob(spec=ray.put(spec), resources=learner.resources)
    # sandboxed ranks: one host per rank, all started by the trial's process on its node
    asked = trial_resources(learner.resources, ranks_here=sandboxed_ranks(learner.resources, spec.host.sandbox))
    asked = {**asked, **learner_ask()}  # the trial's process starts the ranks' hosts: on a learner node
    tuner = tune.Tuner(
        tune.with_resources(tune.with_parameters(tune_trial, job=job), asked),
        param_space=space,
        tune_config=tune.TuneConfig(
            search_alg=search_plan.search_alg,
            scheduler=search_plan.scheduler,
            num_samples=search_plan.num_samples,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(
            storage_path=storage_path,
            name=f"{spec.key_prefix.replace('/', '_')}",
            verbose=0,
            callbacks=[sink, JsonLoggerCallback(), PendingDeadline(str(asked))],  # no wait without end
            failure_config=tune.FailureConfig(max_failures=0),
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
        ),
    )
    tuner.fit()
    if len(sink.outcomes) < budget.trials:
        # Tune stopped early without an error of its own: it was interrupted.
        raise KeyboardInterrupt(f"{budget.trials - len(sink.outcomes)} trials did not finish")
    return sorted(sink.outcomes, key=lambda o: o.trial_index)


def _settling(spec: TrialSpec, on_trial: Callable[[TrialOutcome], None]) -> Callable[[TrialOutcome], None]:
    """``on_trial``, after settling each ended trial at its charge (meter or floor, whichever
    is higher) in the task's running charge, where the task has a FLOP cap."""
    if spec.rules.task_flop_cap is None:
        return on_trial

    def settled(outcome: TrialOutcome) -> None:
        ray.get(spec.harness.budget_settle.remote(outcome.trial_index, outcome.flops))
        on_trial(outcome)

    return settled


def evaluate(
    evaluator: Any,
    info: TaskInfo,
    predictor: bytes,
    images: np.ndarray,
    *,
    seed: int,
    log_to: tuple[Any, str] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Scores of the chosen predictor on evaluation images, and the FLOPs that cost.

    ``evaluator`` is an :class:`~workers.trainer.executor.Evaluator` actor; runs with an
    executor pool score through :func:`~workers.trainer.executor.predict_in_pool` instead.
    """
    return ray.get(evaluator.predict.remote(info, predictor, images, seed, log_to))


__all__ = [
    "TRIAL_SEED",
    "default_concurrency",
    "evaluate",
    "fit_to_cluster",
    "run_trials",
    "search_seed",
    "trial_resources",
]
