"""Warm learner processes: trials and evaluations run in processes that live for the run.

Ray Tune starts every trial in a fresh actor process, and a fresh process spends seconds
importing torch and its FLOP counter before the first step (about 3.5 s of the 5.5 s that
orchestration cost per task on a 2-core machine). So a run starts ``size`` executors once,
each keeping a training host (:mod:`workers.sandbox`: the sandboxed process where the learner
is loaded, its heavy imports and first-call warm-up done) for the whole run, and an evaluation
host started ahead of each evaluation; executors themselves are harness code.
The task's trial loop (:mod:`workers.trainer.trial_loop`) asks the :class:`ExecutorPool` to
run each trial Tune's search suggests in a free executor; the loop holds each running trial's
CPUs (executors reserve none, but the GPUs of GPU learners, which they keep for the run). Between
trial batches the same executors score the chosen predictor (:meth:`Evaluator.predict`) in
their evaluation hosts, so a run of a one-worker learner starts no learner host besides theirs.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import ray

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost, predict
from workers.trainer.host_usage import measured_call

_STARTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nevis-host-start")
LogTarget = tuple[Any, str]
"""Where a prediction job's log goes: the task's harness actor (which owns the store) and a key."""


def keep_log(target: LogTarget, data: bytes) -> None:
    """Store a log through the harness actor; a log that cannot be kept fails nothing."""
    harness, key = target
    try:
        ray.get(harness.put.remote(key, data))
    except Exception:  # noqa: BLE001 - the scores matter, the log is a courtesy
        pass


class Evaluator:
    """Scores a chosen predictor on evaluation images through a fresh learner host (a Ray
    actor of harness code; the learner runs in the host's sandbox).

    It receives images only; the labels stay in the driver. Each evaluation gets a host that
    was started after the previous one (a task ahead, so it is ready when needed) and has been
    sent nothing but its learner's name; the host is discarded afterwards, so no learner keeps
    evaluation images in its memory or ``/tmp``. Runs of multi-worker learners start one of
    these on its own; otherwise the pool's executors (subclasses) do the job.
    """

    def __init__(self, host_spec: HostSpec) -> None:
        self._spec = host_spec
        self._scorer: Future[LearnerHost] | None = _STARTER.submit(self._start)  # the next evaluation's host

    def predict(self, info: TaskInfo, predictor: bytes, images: np.ndarray, seed: int,
                log_to: LogTarget | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Scores of ``predictor`` on evaluation images, from a host no one else uses, which
        is retired afterwards while the next evaluation's starts. With ``log_to`` (the task's
        harness actor and a key), what the host wrote meanwhile, failures included, is stored
        there."""
        host = self._scoring_host()
        mark = host.log.position
        try:
            (scores, flops), usage = measured_call(host, lambda: predict(host, info, predictor, images, seed=seed))
        finally:
            if log_to is not None:
                keep_log(log_to, host.log_since(mark))
            _STARTER.submit(host.close)
            self._scorer = _STARTER.submit(self._start)
        return scores, {**flops, **usage}

    def _start(self, *, trains: bool = False) -> LearnerHost:
        """A fresh learner host, its imports done (training's too where it will train)."""
        return LearnerHost(self._spec, trains=trains)

    def _scoring_host(self) -> LearnerHost:
        """The next evaluation's host (waiting for its start), restarted if its process died
        while it waited."""
        pending, self._scorer = self._scorer, None
        host = pending.result() if pending is not None else self._start()
        if not host.alive:
            host.close()
            host = self._start()
        return host

    def close(self) -> None:
        """Close its hosts, one still starting included (an actor killed by Ray takes them with it)."""
        pending, self._scorer = self._scorer, None
        if pending is not None:
            try:
                pending.result().close()
            except Exception:  # noqa: BLE001 - a host that failed to start has nothing to close
                pass


def start_evaluator(host_spec: HostSpec) -> Any:
    """A warm evaluator actor; it holds no CPU while idle (it runs between trial batches)."""
    return ray.remote(Evaluator).options(num_cpus=0).remote(host_spec)


class TrialExecutor(Evaluator):
    """Runs one-worker trials of one learner, and evaluations (a Ray actor, warm for the run).

    Trials run in one training host kept for the run, its imports (training's included) and
    its first-call warm-up (kernels chosen for the network's shapes) done once, not once a
    task; it never sees evaluation images, which go to the evaluation hosts of
    :class:`Evaluator`.
    """

    def __init__(self, host_spec: HostSpec) -> None:
        self._spec = host_spec
        self._trainer: LearnerHost | None = self._start(trains=True)  # first: the first trial needs it
        super().__init__(host_spec)

    def run(self, config: dict[str, Any], spec: Any) -> dict[str, Any]:
        """One trial; learner failures come back as a ``failed`` result, never raised."""
        from workers.trainer.trial import run_trial_in_host  # noqa: PLC0415

        if spec.host != self._spec:
            raise ValueError(f"executor of {self._spec.learner_spec!r} asked to run {spec.host.learner_spec!r}")
        host = self._training_host()
        metrics, usage = measured_call(host, lambda: run_trial_in_host(host, config, spec))
        return {**metrics, **usage}

    def prepare(self, spec: Any) -> tuple[bytes, dict[str, Any]]:
        """The learner's ``prepare_task`` for the task of ``spec`` (once per task), and its FLOP
        and usage fields; a learner's failure is raised (the task fails)."""
        from workers.trainer.task_prepare import prepare_in_host  # noqa: PLC0415

        host = self._training_host()
        (prepared, flops), usage = measured_call(host, lambda: prepare_in_host(host, spec))
        return prepared, {**flops, **usage}

    def _training_host(self) -> LearnerHost:
        """The training host, restarted if its process died (a crashed trial, an out-of-memory kill)."""
        if self._trainer is None or not self._trainer.alive:
            if self._trainer is not None:
                self._trainer.close()
            self._trainer = self._start(trains=True)
        return self._trainer

    def close(self) -> None:
        super().close()
        trainer, self._trainer = self._trainer, None
        if trainer is not None:
            trainer.close()


class ExecutorPool:
    """Lends its executors for one trial or one evaluation at a time (an async actor).

    The pool itself makes the call and takes the executor back, so an executor returns to
    the pool even when the process that asked for the work dies or is stopped by Tune half
    way; one whose own process died is replaced. Large arguments arrive boxed (an ObjectRef
    in a list) so that they are read where the learner runs, not copied through the pool.
    """

    def __init__(self, host_spec: HostSpec, size: int, gpus_per_executor: float) -> None:
        self._make = lambda: ray.remote(TrialExecutor).options(
            num_cpus=0, num_gpus=gpus_per_executor, max_concurrency=1,
        ).remote(host_spec)
        self._free: asyncio.Queue = asyncio.Queue()
        for _ in range(size):
            self._free.put_nowait(self._make())

    async def run(self, config: dict[str, Any], spec_box: list) -> dict[str, Any]:
        """One trial (:meth:`TrialExecutor.run`) in a free executor."""
        return await self._lend("run", config, spec_box[0])

    async def prepare(self, spec_box: list) -> Any:
        """A task's preparation (:meth:`TrialExecutor.prepare`) in a free executor."""
        return await self._lend("prepare", spec_box[0])

    async def predict(self, info: TaskInfo, predictor_box: list, images_box: list, seed: int,
                      log_to: LogTarget | None = None) -> Any:
        """One evaluation (:meth:`Evaluator.predict`) in a free executor."""
        return await self._lend("predict", info, predictor_box[0], images_box[0], seed, log_to)

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
                    seed: int, log_to: LogTarget | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Scores of a predictor on ``images`` from one of ``pool``'s executors, and their FLOPs."""
    return ray.get(pool.predict.remote(info, [ray.put(predictor)], [ray.put(images)], seed, log_to))


def start_pool(host_spec: HostSpec, *, size: int, gpus_per_executor: float) -> Any:
    """A pool of ``size`` warm executors for one run (started now, in the background)."""
    return ray.remote(ExecutorPool).options(num_cpus=0).remote(host_spec, size, gpus_per_executor)


__all__ = [
    "Evaluator", "ExecutorPool", "LogTarget", "TrialExecutor", "keep_log", "predict_in_pool", "start_evaluator",
    "start_pool"
]
