"""Warm trial executors: one-worker trials run in processes that live for the whole run.

Ray Tune starts every trial in a fresh actor process, and a fresh process spends seconds
importing torch and its FLOP counter before the first step (about 3.5 s of the 5.5 s that
orchestration cost per task on a 2-core machine). So a run starts ``size`` executors once,
each with the heavy imports done and the learner loaded; Tune's trial becomes a thin process
that borrows a free executor from the :class:`ExecutorPool`, runs the trial there and hands
it back. Tune still decides which trials run and how many at once; its trials hold the CPUs
(executors reserve none, but the GPUs of GPU learners, which they keep for the run).
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray


class TrialExecutor:
    """Runs one-worker trials of one learner (a Ray actor, warm for the whole run)."""

    def __init__(self, learner_spec: str, threads: int) -> None:
        import torch  # noqa: PLC0415 - the point: import once, here
        import torch._dynamo  # noqa: F401, PLC0415 - FlopCounterMode imports it on first use

        from workers.learners.registry import load_learner  # noqa: PLC0415

        torch.set_num_threads(threads)
        self._learner = load_learner(learner_spec)
        self._spec = learner_spec

    def run(self, config: dict[str, Any], spec: Any) -> dict[str, Any]:
        """One trial; learner failures come back as a ``failed`` result, never raised."""
        from workers.trainer.tune_trial import run_local_trial  # noqa: PLC0415

        if spec.learner_spec != self._spec:
            raise ValueError(f"executor of {self._spec!r} asked to run {spec.learner_spec!r}")
        return run_local_trial(self._learner, config, spec)


class ExecutorPool:
    """Hands out free executors; an executor whose process died is replaced (async actor)."""

    def __init__(self, learner_spec: str, threads: int, size: int, gpus_per_executor: float) -> None:
        self._make = lambda: ray.remote(TrialExecutor).options(
            num_cpus=0, num_gpus=gpus_per_executor, max_concurrency=1,
        ).remote(learner_spec, threads)
        self._free: asyncio.Queue = asyncio.Queue()
        for _ in range(size):
            self._free.put_nowait(self._make())

    async def acquire(self) -> Any:
        return await self._free.get()

    async def release(self, executor: Any) -> None:
        self._free.put_nowait(executor)

    async def replace(self, dead: Any) -> None:
        ray.kill(dead)
        self._free.put_nowait(self._make())

    async def ready(self) -> int:
        """Wait until every executor has started (imports done); returns how many."""
        executors = [await self._free.get() for _ in range(self._free.qsize())]
        await asyncio.gather(*[e.__ray_ready__.remote() for e in executors])
        for e in executors:
            self._free.put_nowait(e)
        return len(executors)


def start_pool(learner_spec: str, *, threads: int, size: int, gpus_per_executor: float) -> Any:
    """A pool of ``size`` warm executors for one run (started now, in the background)."""
    return ray.remote(ExecutorPool).options(num_cpus=0).remote(learner_spec, threads, size, gpus_per_executor)
