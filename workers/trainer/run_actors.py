"""The warm Ray actors of one run: the storage harness, the trial executors, an evaluator.

A runner keeps them for as long as it lives, so every task of a run reuses processes whose
imports are done and whose learner is loaded. Only the harness holds storage credentials;
the others run learner code. One-worker learners get a pool of executors that runs their
trials and, between trial batches, scores the chosen predictor; multi-worker learners train
in Ray Train worker groups and get a separate evaluator instead.
"""

from __future__ import annotations

from typing import Any

import ray

from services.core.config import Settings
from workers.learners.protocol import Learner, TaskInfo
from services.core.budget import RunBudget
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
        self._pools: dict[tuple[str, int, int], Any] = {}
        self._evaluators: dict[tuple[str, int], Any] = {}

    def start(self, learner: Learner, learner_spec: str, budget: RunBudget) -> None:
        """Start the learner's actors now: their imports overlap with loading a task's data."""
        if self.executor_pool(learner, learner_spec, budget) is None:
            self._evaluator(learner_spec, budget.threads_per_trial)

    def harness(self, size: int) -> Any:
        """The run's harness actor: the one process of a run that holds storage credentials."""
        if self._harness is None or self._harness_size != size:
            self._harness = ray.remote(TaskHarness).options(
                num_cpus=0, runtime_env={"env_vars": storage_env()},
            ).remote(store_url=self.settings.store_url, s3_endpoint_url=self.settings.s3_endpoint_url, image_size=size)
            self._harness_size = size
        return self._harness

    def executor_pool(self, learner: Learner, learner_spec: str, budget: RunBudget) -> Any:
        """The run's warm trial executors (one-worker learners only, else ``None``)."""
        res = learner.resources()
        if res.num_workers > 1:
            return None
        size = min(budget.max_concurrent or default_concurrency(learner), budget.trials)
        key = (learner_spec, budget.threads_per_trial, size)
        if key not in self._pools:
            self._pools[key] = start_pool(learner_spec, threads=budget.threads_per_trial, size=size,
                                          gpus_per_executor=res.gpus_per_worker)
        return self._pools[key]

    def score(self, learner: Learner, learner_spec: str, budget: RunBudget, info: TaskInfo,
              images: Any, *, seed: int, predictor: bytes) -> tuple[Any, dict[str, Any]]:
        """Scores of the chosen predictor on ``images`` (no labels), and their FLOPs."""
        pool = self.executor_pool(learner, learner_spec, budget)
        if pool is not None:
            return predict_in_pool(pool, info, predictor, images, seed=seed)
        return evaluate(self._evaluator(learner_spec, budget.threads_per_trial), info, predictor, images, seed=seed)

    def _evaluator(self, learner_spec: str, threads: int) -> Any:
        key = (learner_spec, threads)
        if key not in self._evaluators:
            self._evaluators[key] = start_evaluator(learner_spec, threads=threads)
        return self._evaluators[key]
