"""The Ray Tune function of a trial that has no warm executor: Ray Train for several workers.

One-worker trials of a run with an executor pool never get here: the task's trial loop sends
them to the pool (:mod:`workers.trainer.trial_loop`). Without a pool, a one-worker trial runs
in a learner host of its own. A trial whose learner asks for ``num_workers > 1`` runs one learner
host per rank from this process where the sandbox is in force (:mod:`workers.trainer.rank_trial`);
trusted code without it starts a Ray Train ``TorchTrainer`` from inside this function (Ray Train
V2's way of combining Tune and Train). Either reports what rank 0 measured, with FLOPs summed
over all workers. This module imports nothing heavy at the top:
Tune starts its trials in fresh processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray
from ray import tune


@dataclass(frozen=True)
class TrialJob:
    """What every trial of a task gets: the spec (by reference) and the learner's resources."""

    spec: Any  # ObjectRef of a workers.trainer.trial.TrialSpec, resolved only where used
    resources: Any  # workers.learners.protocol.Resources, as the learner declared them


def tune_trial(config: dict[str, Any], job: TrialJob) -> None:
    """Run one trial and report exactly one result (``status`` ok or failed)."""
    tune.report(_run_here(config, ray.get(job.spec), job.resources))


def _run_here(config: dict[str, Any], spec: Any, resources: Any) -> dict[str, Any]:
    """The trial from this process: a Ray Train group for several workers, else a learner
    host of its own (the run has no executor pool)."""
    if resources.num_workers > 1:
        from workers.trainer.rank_trial import run_ranked_trial, sandboxed_ranks  # noqa: PLC0415

        if sandboxed_ranks(resources, spec.host.sandbox):  # a learner host per rank, on this node
            return run_ranked_trial(config, spec, resources)
        from workers.trainer.distributed import run_distributed_trial  # noqa: PLC0415

        return run_distributed_trial(config, spec, resources)
    from workers.sandbox.client import LearnerHost  # noqa: PLC0415
    from workers.trainer.host_usage import measured_call  # noqa: PLC0415
    from workers.trainer.trial import run_trial_in_host  # noqa: PLC0415

    with LearnerHost(spec.host) as host:
        metrics, usage = measured_call(host, lambda: run_trial_in_host(host, config, spec))
        return {**metrics, **usage}


__all__ = ["TrialJob", "tune_trial"]
