"""The warm Ray actors of one run: the storage harness, the trial executors, an evaluator.

A runner keeps them for as long as it lives, so every task of a run reuses processes whose
learner hosts are warm. Only the harness holds storage credentials; the others drive learner
hosts, the sandboxed processes where learner code runs. One-worker learners get a pool of executors that runs their
trials and, between trial batches, scores the chosen predictor; multi-worker learners train
in Ray Train worker groups and get a separate evaluator instead.
"""

from __future__ import annotations

import itertools
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from services.core.budget import RunBudget
from services.core.config import Settings
from workers.learners.protocol import Resources, TaskInfo
from workers.sandbox.client import HostSpec
from workers.sandbox.declaration import LearnerDeclaration
from workers.trainer.executor import predict_in_pool, start_evaluator, start_pool
from workers.trainer.harness import TaskHarness
from workers.trainer.ray_env import storage_env
from workers.trainer.task_job import default_concurrency, evaluate


class RunActors:
    """Starts each actor on first use and hands out the same one afterwards."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._harness: Any = None
        self._harness_size = 0
        self._pools: dict[tuple[HostSpec, int], Any] = {}
        self._executors: dict[tuple[HostSpec, int], list[Any]] = {}  # each pool's first executors
        self._evaluators: dict[HostSpec, Any] = {}
        self._guessed: tuple[HostSpec, int] | None = None  # a pool started before its learner was described

    def start(self, host: HostSpec, resources: Resources, budget: RunBudget, size: int) -> None:
        """A task begins: start the learner's actors, their predicting host and the harness
        now, so that their imports overlap with loading the task's data and its trials."""
        pool = self.executor_pool(host, resources, budget)
        if pool is None:  # its predicting host starts with it, and again for each task (one evaluation a host)
            self._evaluator(host).start_predictor.remote()
        else:  # fire and forget: the evaluation waits for the host if need be
            pool.start_predictor.remote()
        self.harness(size)

    def describe_in_guessed_pool(self, host: HostSpec, budget: RunBudget) -> LearnerDeclaration | None:
        """The learner's declaration, asked of the pool a learner with default resources (one
        worker, one CPU, no GPU) gets, started now: most learners ask for just that, so the
        run's first trial finds its executors' hosts started (seconds each: torch, the learner,
        training's imports) instead of waiting for them after a host started only to ask. A
        learner that asks for more gets its own pool and this one is stopped. ``None`` where
        the pool could not answer (a learner that fails to load): the caller asks a host of
        its own, which reports why."""
        if self._pools or self._evaluators:
            return None
        pool = self.executor_pool(host, Resources(), budget)
        self._guessed = next(iter(self._pools))
        try:
            return ray.get(pool.describe.remote())
        except ray.exceptions.RayError:
            self._stop_wrong_guess(None)
            return None

    def harness(self, size: int) -> Any:
        """The run's harness actor: the one process of a run that holds storage credentials.

        It runs on the driver's node, which is where the credentials are: on a cluster, the
        trusted head, never a node that runs learner code."""
        if self._harness is None or self._harness_size != size:
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            self._harness = (
                ray.remote(TaskHarness)
                .options(num_cpus=0, runtime_env={"env_vars": storage_env()}, scheduling_strategy=here)
                .remote(
                    store_url=self.settings.store_url,
                    s3_endpoint_url=self.settings.s3_endpoint_url,
                    image_size=size,
                    storage_quota_bytes=self.settings.submission_storage_mb << 20,
                )
            )
            self._harness_size = size
        return self._harness

    def executor_pool(self, host: HostSpec, resources: Resources, budget: RunBudget) -> Any:
        """The run's warm trial executors (one-worker learners only, else ``None``)."""
        if resources.num_workers > 1:
            return None
        size = min(budget.max_concurrent or default_concurrency(resources), budget.trials)
        key = (host, size)
        if key not in self._pools:
            self._pools[key], self._executors[key] = start_pool(
                host, size=size, gpus_per_executor=resources.gpus_per_worker
            )
            self._stop_wrong_guess(key)
        elif key == self._guessed:  # the guess was right: the pool is the run's own now
            self._guessed = None
        return self._pools[key]

    def score(
        self,
        host: HostSpec,
        resources: Resources,
        budget: RunBudget,
        info: TaskInfo,
        images: Any,
        *,
        seed: int,
        predictor: bytes,
        log_to: tuple[Any, str] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Scores of the chosen predictor on ``images`` (no labels), and their FLOPs; the
        prediction job's log goes to ``log_to`` (harness actor, key) when given."""
        pool = self.executor_pool(host, resources, budget)
        if pool is not None:
            return predict_in_pool(pool, info, predictor, images, seed=seed, log_to=log_to)
        return evaluate(self._evaluator(host), info, predictor, images, seed=seed, log_to=log_to)

    def prepare(
        self, host: HostSpec, resources: Resources, budget: RunBudget, spec: Any
    ) -> tuple[bytes, dict[str, Any]] | None:
        """The learner's ``prepare_task`` result for ``spec``'s task (pickled) and its FLOP and
        usage fields, from one of the pool's executors; ``None`` for a multi-worker learner,
        whose trials (Ray Train, :mod:`workers.trainer.distributed`) do the work themselves."""
        pool = self.executor_pool(host, resources, budget)
        if pool is None:
            return None
        return ray.get(pool.prepare.remote([ray.put(spec)]))

    def close(self) -> None:
        """Stop every actor of the run now (their learner hosts end with them) instead of
        whenever the last handle is collected: a process running many runs (the tests, a
        study) must not keep each run's warm executors alive."""
        actors = [
            self._harness,
            *self._pools.values(),
            *itertools.chain(*self._executors.values()),
            *self._evaluators.values(),
        ]
        self._harness, self._pools, self._executors, self._evaluators, self._guessed = None, {}, {}, {}, None
        for actor in actors:
            if actor is not None:
                _kill(actor)

    def _evaluator(self, host: HostSpec) -> Any:
        if host not in self._evaluators:
            self._evaluators[host] = start_evaluator(host)
            self._stop_wrong_guess(None)
        return self._evaluators[host]

    def _stop_wrong_guess(self, needed: tuple[HostSpec, int] | None) -> None:
        """Stop the guessed pool once the run needs another (its hosts would idle for the run)."""
        guessed, self._guessed = self._guessed, None
        if guessed is not None and guessed != needed:
            for actor in (self._pools.pop(guessed), *self._executors.pop(guessed)):
                _kill(actor)


def _kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone, or Ray already shut down
        pass


__all__ = ["RunActors"]
