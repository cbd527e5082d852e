"""The Ray Tune function of a trial: a warm executor for one worker, Ray Train for several.

A one-worker trial runs in one of the run's warm executors (:mod:`workers.trainer.executor`),
so it pays neither for a Train worker group nor for importing torch in a fresh process; this
function only asks the run's executor pool to run it and reports what comes back. A trial
whose learner asks for ``num_workers > 1`` starts a Ray Train ``TorchTrainer`` from inside
this function (Ray Train V2's way of combining Tune and Train) and reports what rank 0
measured, with FLOPs summed over all workers. This module imports nothing heavy at the top:
Tune starts its trials in fresh processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray
from ray import tune


@dataclass(frozen=True)
class TrialJob:
    """What every trial of a task gets: the spec (by reference) and where to run."""

    spec: Any  # ObjectRef of a workers.trainer.trial.TrialSpec, resolved only where used
    pool: Any  # ActorHandle of an ExecutorPool, or None to run in the trial's own process
    num_workers: int


def tune_trial(config: dict[str, Any], job: TrialJob) -> None:
    """Run one trial and report exactly one result (``status`` ok or failed)."""
    if job.num_workers > 1 or job.pool is None:
        tune.report(_run_here(config, ray.get(job.spec)))
        return
    try:
        metrics = ray.get(job.pool.run.remote(config, [job.spec]))
    except ray.exceptions.RayActorError as exc:  # the executor's process died (memory, kill)
        from workers.trainer.trial import failure_metrics, flop_metrics  # noqa: PLC0415

        metrics = failure_metrics(config, exc, flop_metrics(None))
    tune.report(metrics)


def _run_here(config: dict[str, Any], spec: Any) -> dict[str, Any]:
    """The trial in this process: a Ray Train group for several workers, else in-line."""
    import torch  # noqa: PLC0415

    from workers.learners.registry import load_learner  # noqa: PLC0415

    torch.set_num_threads(spec.threads)
    learner = load_learner(spec.learner_spec)
    if learner.resources().num_workers > 1:
        from workers.trainer.distributed import run_distributed_trial  # noqa: PLC0415

        return run_distributed_trial(config, spec, learner.resources())
    return run_local_trial(learner, config, spec)


def trial_device(learner: Any) -> str:
    """Where a one-worker trial computes: the GPU Ray assigned it, if the learner asked for one."""
    import torch  # noqa: PLC0415

    wants_gpu = learner.resources().gpus_per_worker > 0
    return "cuda:0" if wants_gpu and torch.cuda.is_available() else "cpu"


def run_local_trial(learner: Any, config: dict[str, Any], spec: Any) -> dict[str, Any]:
    """Train in this process; any learner exception becomes a failed result."""
    from workers.trainer.trial import (  # noqa: PLC0415
        execute_trial,
        failure_metrics,
        flop_metrics,
        make_context,
    )

    ctx = None
    try:
        ctx = make_context(learner, spec, config, device=trial_device(learner))
        metrics = execute_trial(learner, spec, config, ctx)
    except Exception as exc:  # noqa: BLE001 - a learner's failure is data, not a crash
        metrics = failure_metrics(config, exc, flop_metrics(ctx))
        metrics["checkpoints"] = list(ctx.stored_checkpoints) if ctx else []
        return metrics
    finally:
        if ctx is not None:
            ctx.meter.untrack_all()  # modules kept in learner state must not count on later
    metrics.update(flop_metrics(ctx))
    return metrics
