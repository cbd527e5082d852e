"""The Ray Tune function of a trial: a warm executor for one worker, Ray Train for several.

A one-worker trial runs in one of the run's warm executors (:mod:`workers.trainer.executor`),
whose learner host has its imports done, so it pays neither for a Train worker group nor for
a fresh process; this function only asks the run's executor pool to run it and reports what
comes back. A trial whose learner asks for ``num_workers > 1`` starts a Ray Train
``TorchTrainer`` from inside this function (Ray Train V2's way of combining Tune and Train) and reports what rank 0
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
    pool: Any  # ActorHandle of an ExecutorPool, or None to run from the trial's own process
    resources: Any  # workers.learners.protocol.Resources, as the learner declared them


def tune_trial(config: dict[str, Any], job: TrialJob) -> None:
    """Run one trial and report exactly one result (``status`` ok or failed)."""
    if job.resources.num_workers > 1 or job.pool is None:
        tune.report(_run_here(config, ray.get(job.spec), job.resources))
        return
    try:
        metrics = ray.get(job.pool.run.remote(config, [job.spec]))
    except ray.exceptions.RayActorError as exc:  # the executor's process died (memory, kill)
        from workers.trainer.trial import failure_metrics, no_flops  # noqa: PLC0415

        metrics = failure_metrics(config, exc, no_flops())
    tune.report(metrics)


def _run_here(config: dict[str, Any], spec: Any, resources: Any) -> dict[str, Any]:
    """The trial from this process: a Ray Train group for several workers, else a learner
    host of its own (the run has no executor pool)."""
    if resources.num_workers > 1:
        from workers.trainer.distributed import run_distributed_trial  # noqa: PLC0415

        return run_distributed_trial(config, spec, resources)
    from workers.sandbox.client import LearnerHost  # noqa: PLC0415
    from workers.trainer.trial import run_trial_in_host  # noqa: PLC0415

    from workers.trainer.host_usage import measured_call  # noqa: PLC0415

    with LearnerHost(spec.host) as host:
        metrics, usage = measured_call(host, lambda: run_trial_in_host(host, config, spec))
        return {**metrics, **usage}


__all__ = ["TrialJob", "tune_trial"]
