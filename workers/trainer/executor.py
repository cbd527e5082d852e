"""Warm learner processes: trials and evaluations run in processes that live for the run.

Ray Tune starts every trial in a fresh actor process, and a fresh process spends seconds
importing torch and its FLOP counter before the first step (about 3.5 s of the 5.5 s that
orchestration cost per task on a 2-core machine). So a run starts ``size`` executors once,
each keeping a learner host (:mod:`workers.sandbox`: the sandboxed process where the learner
is loaded, its heavy imports done) for the whole run; executors themselves are harness code.
The task's trial loop (:mod:`workers.trainer.trial_loop`) asks the :class:`ExecutorPool` to
run each trial Tune's search suggests in a free executor; the loop holds each running trial's
CPUs (executors reserve none, but the GPUs of GPU learners, which they keep for the run). Between
trial batches the first executor scores the chosen predictor (:meth:`Evaluator.predict`) in a
host of its own that never trains and lives for that one evaluation (started when the task
begins, so its imports overlap the trials; killed once it has predicted).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import ray

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.declaration import LearnerDeclaration
from workers.sandbox.learner_calls import describe, predict
from workers.sandbox.pause import PausingHost
from workers.trainer.host_usage import charge_failure, measured_call
from workers.trainer.learner_nodes import actor_options, configured

_STARTER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="nevis-host-start")  # an executor's two hosts
LogTarget = tuple[Any, str]
"""Where a prediction job's log goes: the task's harness actor (which owns the store) and a key."""


def keep_log(target: LogTarget, data: bytes) -> None:
    """Store a log through the harness actor; a log that cannot be kept fails nothing."""
    harness, key = target
    try:
        ray.get(harness.put.remote(key, data))
    except Exception:  # noqa: BLE001 - the scores matter, the log is a courtesy
        pass


class HostSlot:
    """One learner host kept for the run: started in the background, warm (its first call's
    imports done) before it answers, waited for on first use, restarted if its process died
    (a crashed trial, an out-of-memory kill); paused between calls (:mod:`workers.sandbox.pause`)."""

    def __init__(self, spec: HostSpec) -> None:
        self._spec = spec
        self._host: LearnerHost | Future[LearnerHost] | None = None

    def start(self) -> None:
        """Start the host now, off the caller's path, unless it is started already."""
        if self._host is None:
            self._host = _STARTER.submit(self._new)

    def live(self) -> LearnerHost:
        """The host, waiting for it if it is still starting (started now if it was not)."""
        self.start()
        if isinstance(self._host, Future):
            self._host = self._host.result()
        assert self._host is not None
        if not self._host.alive:
            self._host.close()
            self._host = self._new()
        return self._host

    def _new(self) -> LearnerHost:
        host = PausingHost(self._spec, warm=True)
        host.pause()  # warm and waiting: it computes nothing until its first request
        return host

    def close(self) -> None:
        held, self._host = self._host, None
        try:
            host = held.result() if isinstance(held, Future) else held
            if host is not None:
                host.close()
        except Exception:  # noqa: BLE001 - a host that failed to start has nothing to close
            pass


class Evaluator:
    """Scores a chosen predictor on evaluation images through a learner host of its own (a
    Ray actor of harness code; the learner runs in the host's sandbox).

    That host only ever predicts, and only once: evaluation images never reach a host that
    trains, and the host that saw them is killed when the evaluation ends (a fresh one starts
    when the next task begins), so no learner process holds them when it next runs. It
    receives images only; the labels stay in the driver. Runs of multi-worker learners start
    one of these on its own; otherwise the pool's first executor (a subclass) does the job.
    """

    def __init__(self, host_spec: HostSpec) -> None:
        self._spec = host_spec
        self._predictor = HostSlot(host_spec)
        self._warm_up()

    def _warm_up(self) -> None:
        """What the actor does before it answers: start its predicting host."""
        self._predictor.live()

    def start_predictor(self) -> None:
        """A task begins: start the host that will score it, if it is not started, so the
        evaluation does not wait for a start (torch and the learner: a second or more)."""
        self._predictor.start()

    def predict(
        self, info: TaskInfo, predictor: bytes, images: np.ndarray, seed: int, log_to: LogTarget | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Scores of ``predictor`` on evaluation images, from a host that never trains and lives
        for this one evaluation: started (warm, before the task's trials ended), asked to
        predict, then killed, so no image it saw outlives the task in a learner's memory,
        ``/tmp`` or a thread (the next task's evaluation gets a fresh host). With ``log_to``
        (the task's harness actor and a key), what the host wrote meanwhile, failures
        included, is stored there."""
        host = self._predictor.live()
        mark = host.log.position
        try:
            (scores, flops), usage = measured_call(host, lambda: predict(host, info, predictor, images, seed=seed))
        except Exception as exc:
            charge_failure(host, exc)  # its usage travels with the error: the failed task is charged its floor
            raise
        finally:
            if log_to is not None:
                keep_log(log_to, host.log_since(mark))
            self._predictor.close()  # one evaluation per host: start, predict, kill
        return scores, {**flops, **usage}

    def close(self) -> None:
        """Close its hosts (an actor killed by Ray takes them with it)."""
        self._predictor.close()


def start_evaluator(host_spec: HostSpec) -> Any:
    """A warm evaluator actor; it holds no CPU while idle (it runs between trial batches)."""
    return ray.remote(Evaluator).options(num_cpus=0, **actor_options()).remote(host_spec)


class TrialExecutor(Evaluator):
    """Runs one-worker trials of one learner in a host that stays warm for the run, and
    evaluations in another that never trains (a Ray actor, warm for the run)."""

    def __init__(self, host_spec: HostSpec, *, evaluates: bool = False) -> None:
        """``evaluates``: this executor scores the run's chosen predictors (a pool's first)."""
        self._trainer = HostSlot(host_spec)
        self._evaluates = evaluates
        super().__init__(host_spec)

    def _warm_up(self) -> None:
        """Start the training host and import the trial harness while it starts (0.3 s: the
        harness needs neither torch nor scikit-learn). The evaluating executor starts its
        predicting host beside it: started later, its imports (3 s of CPU) would compete with
        the run's first trial on a small machine (1.5 s of a 7 s trial on 2 cores); the others'
        wait for a task to begin (:meth:`start_predictor`)."""
        self._trainer.start()
        if self._evaluates:
            self._predictor.start()
        import workers.trainer.trial  # noqa: F401, PLC0415

        self._trainer.live()

    def run(self, config: dict[str, Any], spec: Any) -> dict[str, Any]:
        """One trial; learner failures come back as a ``failed`` result, never raised."""
        from workers.trainer.trial import run_trial_in_host  # noqa: PLC0415

        if spec.host != self._spec:
            raise ValueError(f"executor of {self._spec.learner_spec!r} asked to run {spec.host.learner_spec!r}")
        host = self._trainer.live()
        metrics, usage = measured_call(host, lambda: run_trial_in_host(host, config, spec))
        return {**metrics, **usage}

    def describe(self) -> LearnerDeclaration:
        """What the learner declares, asked of this executor's host (a run whose pool was
        started before its learner was described saves starting a host just to ask)."""
        return describe(self._trainer.live())

    def prepare(self, spec: Any) -> tuple[bytes, dict[str, Any]]:
        """The learner's ``prepare_task`` for the task of ``spec`` (once per task), and its FLOP
        and usage fields; a learner's failure is raised (the task fails), charged at least the
        floor of the CPU time its host used (:meth:`~workers.trainer.task_prepare.PrepareFailed.charged`)."""
        from workers.trainer.task_prepare import PrepareFailed, prepare_in_host  # noqa: PLC0415

        host = self._trainer.live()
        try:
            (prepared, flops), usage = measured_call(host, lambda: prepare_in_host(host, spec))
        except PrepareFailed as exc:  # charged what its host used, floored like any call
            raise exc.charged(charge_failure(host, exc)) from exc.__cause__
        return prepared, {**flops, **usage}

    def close(self) -> None:
        """Close both hosts."""
        self._trainer.close()
        super().close()


class ExecutorPool:
    """Lends its executors for one trial or one evaluation at a time (an async actor).

    The pool itself makes the call and takes the executor back, so an executor returns to
    the pool even when the process that asked for the work dies or is stopped by Tune half
    way; one whose own process died is replaced. Large arguments arrive boxed (an ObjectRef
    in a list) so that they are read where the learner runs, not copied through the pool.
    Evaluations always go to the first executor, so a run starts one predicting host.
    """

    def __init__(
        self, host_spec: HostSpec, executors: list[Any], gpus_per_executor: float, learner_resource: str = ""
    ) -> None:
        """``executors``: started by the caller (:func:`start_pool`), while this actor's own
        process started; the pool replaces any that dies with one of its own."""
        self._make = lambda: start_executor(host_spec, gpus_per_executor, learner_resource=learner_resource)
        self._executors = list(executors)
        self._free = list(self._executors)
        self._returned = asyncio.Condition()

    async def run(self, config: dict[str, Any], spec_box: list) -> dict[str, Any]:
        """One trial (:meth:`TrialExecutor.run`) in a free executor."""
        return await self._lend(self._for_training, "run", config, spec_box[0])

    async def prepare(self, spec_box: list) -> Any:
        """A task's preparation (:meth:`TrialExecutor.prepare`) in a free executor."""
        return await self._lend(self._for_training, "prepare", spec_box[0])

    async def predict(
        self, info: TaskInfo, predictor_box: list, images_box: list, seed: int, log_to: LogTarget | None = None
    ) -> Any:
        """One evaluation (:meth:`Evaluator.predict`) in the evaluating executor."""
        return await self._lend(self._for_evaluation, "predict", info, predictor_box[0], images_box[0], seed, log_to)

    async def describe(self) -> LearnerDeclaration:
        """The learner's declaration (:meth:`TrialExecutor.describe`) from a free executor."""
        return await self._lend(self._for_training, "describe")

    async def start_predictor(self) -> None:
        """A task begins: the evaluating executor starts its predicting host if it has none
        (:meth:`Evaluator.start_predictor`)."""
        await self._lend(self._for_evaluation, "start_predictor")

    def _for_training(self) -> Any:
        return self._free[0] if self._free else None

    def _for_evaluation(self) -> Any:
        return self._executors[0] if self._executors[0] in self._free else None

    async def _lend(self, pick: Any, method: str, *args: Any) -> Any:
        async with self._returned:
            await self._returned.wait_for(lambda: pick() is not None)
            executor = pick()
            self._free.remove(executor)
        try:
            return await getattr(executor, method).remote(*args)
        except ray.exceptions.RayActorError:  # its process died (memory, kill): replace it
            ray.kill(executor)
            dead, executor = executor, self._make()
            self._executors[self._executors.index(dead)] = executor
            raise
        finally:
            async with self._returned:
                self._free.append(executor)
                self._returned.notify_all()

    async def ready(self) -> int:
        """Wait until every executor has started (imports done); returns how many."""
        await asyncio.gather(*[e.__ray_ready__.remote() for e in self._executors])
        return len(self._executors)


def predict_in_pool(
    pool: Any, info: TaskInfo, predictor: bytes, images: np.ndarray, *, seed: int, log_to: LogTarget | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Scores of a predictor on ``images`` from one of ``pool``'s executors, and their FLOPs."""
    return ray.get(pool.predict.remote(info, [ray.put(predictor)], [ray.put(images)], seed, log_to))


def start_executor(
    host_spec: HostSpec, gpus: float, *, evaluates: bool = False, learner_resource: str | None = None
) -> Any:
    """One warm trial executor (it reserves no CPU: the trial loop holds a running trial's), on a
    learner node where ``learner_resource`` (default: this process's setting) names their resource."""
    return (
        ray.remote(TrialExecutor)
        .options(num_cpus=0, num_gpus=gpus, max_concurrency=1, **actor_options(learner_resource))
        .remote(host_spec, evaluates=evaluates)
    )


def start_pool(host_spec: HostSpec, *, size: int, gpus_per_executor: float) -> tuple[Any, list[Any]]:
    """A pool of ``size`` warm executors for one run (started now, in the background), and
    those executors, which the caller stops with the pool.

    The executors are started here, beside the pool's own process, rather than by the pool
    once its process is up: a run's first trial waits for an executor's learner host, and
    starting its executor a process start (0.3-0.7 s) earlier starts that host earlier."""
    resource = configured() or ""  # the pool replaces a dead executor on a learner node too
    executors = [
        start_executor(host_spec, gpus_per_executor, evaluates=i == 0, learner_resource=resource) for i in range(size)
    ]
    pool = ray.remote(ExecutorPool).options(num_cpus=0).remote(host_spec, executors, gpus_per_executor, resource)
    return pool, executors


__all__ = [
    "Evaluator",
    "ExecutorPool",
    "LogTarget",
    "TrialExecutor",
    "keep_log",
    "predict_in_pool",
    "start_evaluator",
    "start_executor",
    "start_pool",
]
