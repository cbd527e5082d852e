"""Warm learner processes: trials and evaluations run in processes that live for the run.

Ray Tune starts every trial in a fresh actor process, and a fresh process spends seconds
importing torch and its FLOP counter before the first step (about 3.5 s of the 5.5 s that
orchestration cost per task on a 2-core machine). So a run starts ``size`` executors once,
each keeping a learner host (:mod:`workers.sandbox`: the sandboxed process where the learner
is loaded, its heavy imports done) for the whole run; executors themselves are harness code.
The task's trial loop (:mod:`workers.trainer.trial_loop`) asks the :class:`ExecutorPool` to
run each trial Tune's search suggests in a free executor; the loop holds each running trial's
CPUs (executors reserve none, but the GPUs of GPU learners, which they keep for the run). Between
trial batches the same executors score the chosen predictor (:meth:`Evaluator.predict`), so
a run of a one-worker learner starts no learner host besides theirs.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import ray

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost, describe, predict
from workers.sandbox.declaration import LearnerDeclaration
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
    """Scores a chosen predictor on evaluation images through a warm learner host (a Ray
    actor of harness code; the learner runs in the host's sandbox).

    It receives images only; the labels stay in the driver. Runs of multi-worker learners
    start one of these on its own; otherwise one of the pool's executors (subclasses) does the job.
    """

    trains = False  # whether its hosts train too (they import what training needs first)

    def __init__(self, host_spec: HostSpec) -> None:
        self._spec = host_spec
        self._spare: Future[LearnerHost] | None = None  # takes over after the next evaluation
        self._host: LearnerHost | Future[LearnerHost] | None = _STARTER.submit(self._start)
        if self.trains:  # the trial harness imports torch and scikit-learn (2-3 s): while the host starts
            import workers.trainer.trial  # noqa: F401, PLC0415
        self._host = self._host.result()  # started: the actor is ready when its host is

    def keep_spare(self) -> None:
        """Another task follows the one starting now: start the host that takes over after
        its evaluation, so the next task's first trial finds it ready instead of waiting for
        a start (seconds: torch, the learner, training's imports). Without this call the host
        that evaluated is retired and none is started, which a run's last task needs no more."""
        if self._spare is None:
            self._spare = _STARTER.submit(self._start)

    def predict(self, info: TaskInfo, predictor: bytes, images: np.ndarray, seed: int,
                log_to: LogTarget | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Scores of ``predictor`` on evaluation images; the host that saw them is discarded
        afterwards and the spare, if any, takes its place, so no learner keeps test images in
        its memory or ``/tmp`` when it next trains. With ``log_to`` (the task's harness actor
        and a key), what the host wrote meanwhile, failures included, is stored there."""
        host = self._live_host()
        mark = host.log.position
        try:
            (scores, flops), usage = measured_call(host, lambda: predict(host, info, predictor, images, seed=seed))
        finally:
            if log_to is not None:
                keep_log(log_to, host.log_since(mark))
            self._retire_host()
        return scores, {**flops, **usage}

    def _retire_host(self) -> None:
        """Close the host off the caller's path; the spare (a fresh process that has been sent
        nothing but its learner's name) takes its place, or the next call starts one."""
        old, self._host, self._spare = self._host, self._spare, None
        _STARTER.submit(old.close)

    def _start(self) -> LearnerHost:
        """A fresh learner host, its imports done (training's too where it will train)."""
        return LearnerHost(self._spec, trains=self.trains)

    def _live_host(self) -> LearnerHost:
        """The host (waiting for it if it is still starting; started now if there is none),
        restarted if its process died (a crashed trial, an out-of-memory kill; a spare that
        died while it waited)."""
        if isinstance(self._host, Future):
            self._host = self._host.result()
        if self._host is None:
            self._host = self._start()
        if not self._host.alive:
            self._host.close()
            self._host = self._start()
        return self._host

    def close(self) -> None:
        """Close its hosts, the spare included (an actor killed by Ray takes them with it)."""
        for held in (self._spare, self._host):
            try:
                host = held.result() if isinstance(held, Future) else held
                if host is not None:
                    host.close()
            except Exception:  # noqa: BLE001 - a host that failed to start has nothing to close
                pass
        self._spare = self._host = None


def start_evaluator(host_spec: HostSpec) -> Any:
    """A warm evaluator actor; it holds no CPU while idle (it runs between trial batches)."""
    return ray.remote(Evaluator).options(num_cpus=0).remote(host_spec)


class TrialExecutor(Evaluator):
    """Runs one-worker trials of one learner, and evaluations (a Ray actor, warm for the run)."""

    trains = True

    def run(self, config: dict[str, Any], spec: Any) -> dict[str, Any]:
        """One trial; learner failures come back as a ``failed`` result, never raised."""
        from workers.trainer.trial import run_trial_in_host  # noqa: PLC0415

        if spec.host != self._spec:
            raise ValueError(f"executor of {self._spec.learner_spec!r} asked to run {spec.host.learner_spec!r}")
        host = self._live_host()
        metrics, usage = measured_call(host, lambda: run_trial_in_host(host, config, spec))
        return {**metrics, **usage}

    def describe(self) -> LearnerDeclaration:
        """What the learner declares, asked of this executor's host (a run whose pool was
        started before its learner was described saves starting a host just to ask)."""
        return describe(self._live_host())

    def prepare(self, spec: Any) -> tuple[bytes, dict[str, Any]]:
        """The learner's ``prepare_task`` for the task of ``spec`` (once per task), and its FLOP
        and usage fields; a learner's failure is raised (the task fails)."""
        from workers.trainer.task_prepare import prepare_in_host  # noqa: PLC0415

        host = self._live_host()
        (prepared, flops), usage = measured_call(host, lambda: prepare_in_host(host, spec))
        return prepared, {**flops, **usage}


class ExecutorPool:
    """Lends its executors for one trial or one evaluation at a time (an async actor).

    The pool itself makes the call and takes the executor back, so an executor returns to
    the pool even when the process that asked for the work dies or is stopped by Tune half
    way; one whose own process died is replaced. Large arguments arrive boxed (an ObjectRef
    in a list) so that they are read where the learner runs, not copied through the pool.
    Evaluations always go to the first executor (the *evaluating* one), so only its host is
    ever retired for having seen evaluation images and only it keeps a spare; trials go to
    the others first, whose hosts stay warm for the whole run.
    """

    def __init__(self, host_spec: HostSpec, size: int, gpus_per_executor: float) -> None:
        self._make = lambda: ray.remote(TrialExecutor).options(
            num_cpus=0, num_gpus=gpus_per_executor, max_concurrency=1,
        ).remote(host_spec)
        self._executors = [self._make() for _ in range(size)]
        self._free = list(self._executors)
        self._returned = asyncio.Condition()

    async def run(self, config: dict[str, Any], spec_box: list) -> dict[str, Any]:
        """One trial (:meth:`TrialExecutor.run`) in a free executor."""
        return await self._lend(self._for_training, "run", config, spec_box[0])

    async def prepare(self, spec_box: list) -> Any:
        """A task's preparation (:meth:`TrialExecutor.prepare`) in a free executor."""
        return await self._lend(self._for_training, "prepare", spec_box[0])

    async def predict(self, info: TaskInfo, predictor_box: list, images_box: list, seed: int,
                      log_to: LogTarget | None = None) -> Any:
        """One evaluation (:meth:`Evaluator.predict`) in the evaluating executor."""
        return await self._lend(self._for_evaluation, "predict", info, predictor_box[0], images_box[0], seed, log_to)

    async def describe(self) -> LearnerDeclaration:
        """The learner's declaration (:meth:`TrialExecutor.describe`) from a free executor."""
        return await self._lend(self._for_training, "describe")

    async def keep_spare(self) -> None:
        """Another task follows: the evaluating executor starts its spare host now
        (:meth:`Evaluator.keep_spare`)."""
        await self._lend(self._for_evaluation, "keep_spare")

    def _for_training(self) -> Any:
        """A free executor, the evaluating one last (its host is the one replaced each task)."""
        others = [e for e in self._free if e is not self._executors[0]]
        return (others or self._free or [None])[0]

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
