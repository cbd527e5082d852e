"""Warm learner processes: trials and evaluations run in processes that live for the run.

Ray Tune starts every trial in a fresh actor process, and a fresh process spends seconds
importing torch and its FLOP counter before the first step (about 3.5 s of the 5.5 s that
orchestration cost per task on a 2-core machine). So a run starts ``size`` executors once,
each with the heavy imports done and the learner loaded; Tune's trial becomes a thin process
that asks the :class:`ExecutorPool` to run the trial in a free executor and reports what
comes back. Tune still decides which trials run and how many at once; its trials hold the CPUs
(executors reserve none, but the GPUs of GPU learners, which they keep for the run). Between
trial batches the same executors score the chosen predictor (:meth:`Evaluator.predict`), so
a run of a one-worker learner starts no process of learner code besides them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import ray

from workers.learners.protocol import TaskInfo


class Evaluator:
    """Learner code that scores a chosen predictor on evaluation images (a Ray actor).

    It receives images only; the labels stay in the driver. Runs of multi-worker learners
    start one of these on its own; otherwise the pool's executors (subclasses) do the job.
    """

    def __init__(self, learner_spec: str, threads: int) -> None:
        import torch  # noqa: PLC0415 - the point: import once, here

        from workers.learners.registry import load_learner  # noqa: PLC0415

        torch.set_num_threads(threads)
        self._learner = load_learner(learner_spec)
        self._spec = learner_spec

    def predict(self, info: TaskInfo, predictor: bytes, images: np.ndarray, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        from workers.trainer.context import LocalTrialContext  # noqa: PLC0415
        from workers.trainer.trial import flop_metrics  # noqa: PLC0415

        ctx = LocalTrialContext(seed=seed, steps=1, save_predictor=self._learner.save_predictor)
        model = self._learner.load_predictor(predictor, info, ctx)
        scores = np.asarray(self._learner.predict(model, images, ctx))
        return scores, flop_metrics(ctx)


def start_evaluator(learner_spec: str, *, threads: int) -> Any:
    """A warm evaluator actor; it holds no CPU while idle (it runs between trial batches)."""
    return ray.remote(Evaluator).options(num_cpus=0).remote(learner_spec, threads)


class TrialExecutor(Evaluator):
    """Runs one-worker trials of one learner, and evaluations (a Ray actor, warm for the run)."""

    def __init__(self, learner_spec: str, threads: int) -> None:
        import torch._dynamo  # noqa: F401, PLC0415 - FlopCounterMode imports it on first use

        super().__init__(learner_spec, threads)

    def run(self, config: dict[str, Any], spec: Any) -> dict[str, Any]:
        """One trial; learner failures come back as a ``failed`` result, never raised."""
        from workers.trainer.tune_trial import run_local_trial  # noqa: PLC0415

        if spec.learner_spec != self._spec:
            raise ValueError(f"executor of {self._spec!r} asked to run {spec.learner_spec!r}")
        return run_local_trial(self._learner, config, spec)


class ExecutorPool:
    """Lends its executors for one trial or one evaluation at a time (an async actor).

    The pool itself makes the call and takes the executor back, so an executor returns to
    the pool even when the process that asked for the work dies or is stopped by Tune half
    way; one whose own process died is replaced. Large arguments arrive boxed (an ObjectRef
    in a list) so that they are read where the learner runs, not copied through the pool.
    """

    def __init__(self, learner_spec: str, threads: int, size: int, gpus_per_executor: float) -> None:
        self._make = lambda: ray.remote(TrialExecutor).options(
            num_cpus=0, num_gpus=gpus_per_executor, max_concurrency=1,
        ).remote(learner_spec, threads)
        self._free: asyncio.Queue = asyncio.Queue()
        for _ in range(size):
            self._free.put_nowait(self._make())

    async def run(self, config: dict[str, Any], spec_box: list) -> dict[str, Any]:
        """One trial (:meth:`TrialExecutor.run`) in a free executor."""
        return await self._lend("run", config, spec_box[0])

    async def predict(self, info: TaskInfo, predictor_box: list, images_box: list, seed: int) -> Any:
        """One evaluation (:meth:`Evaluator.predict`) in a free executor."""
        return await self._lend("predict", info, predictor_box[0], images_box[0], seed)

    async def _lend(self, method: str, *args: Any) -> Any:
        executor = await self._free.get()
        try:
            return await getattr(executor, method).remote(*args)
        except ray.exceptions.RayActorError:  # its process died (memory, kill): replace it
            ray.kill(executor)
            executor = self._make()
            raise
        finally:
            self._free.put_nowait(executor)

    async def ready(self) -> int:
        """Wait until every executor has started (imports done); returns how many."""
        executors = [await self._free.get() for _ in range(self._free.qsize())]
        await asyncio.gather(*[e.__ray_ready__.remote() for e in executors])
        for e in executors:
            self._free.put_nowait(e)
        return len(executors)


def predict_in_pool(pool: Any, info: TaskInfo, predictor: bytes, images: np.ndarray, *,
                    seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    """Scores of a predictor on ``images`` from one of ``pool``'s executors, and their FLOPs."""
    return ray.get(pool.predict.remote(info, [ray.put(predictor)], [ray.put(images)], seed))


def start_pool(learner_spec: str, *, threads: int, size: int, gpus_per_executor: float) -> Any:
    """A pool of ``size`` warm executors for one run (started now, in the background)."""
    return ray.remote(ExecutorPool).options(num_cpus=0).remote(learner_spec, threads, size, gpus_per_executor)
