"""The Ray Tune function of a trial: one worker in-process, several through Ray Train.

A one-worker trial runs learner code right here, so it pays for no Train worker group. A
trial whose learner asks for ``num_workers > 1`` starts a Ray Train ``TorchTrainer`` from
inside this function (Ray Train V2's way of combining Tune and Train) and reports what rank
0 measured, with FLOPs summed over all workers.
"""

from __future__ import annotations

from typing import Any

from ray import tune

from workers.learners.registry import load_learner
from workers.trainer.trial import (
    TrialSpec,
    execute_trial,
    failure_metrics,
    flop_metrics,
    make_context,
)


def tune_trial(config: dict[str, Any], spec: TrialSpec) -> None:
    """Run one trial and report exactly one result (``status`` ok or failed)."""
    import torch  # noqa: PLC0415 - heavy; only in trial processes

    torch.set_num_threads(spec.threads)
    learner = load_learner(spec.learner_spec)
    if learner.resources().num_workers > 1:
        from workers.trainer.distributed import run_distributed_trial  # noqa: PLC0415

        tune.report(run_distributed_trial(config, spec, learner.resources()))
        return
    tune.report(run_local_trial(learner, config, spec))


def trial_device(learner: Any) -> str:
    """Where a one-worker trial computes: the GPU Ray assigned it, if the learner asked for one."""
    import torch  # noqa: PLC0415

    wants_gpu = learner.resources().gpus_per_worker > 0
    return "cuda:0" if wants_gpu and torch.cuda.is_available() else "cpu"


def run_local_trial(learner: Any, config: dict[str, Any], spec: TrialSpec) -> dict[str, Any]:
    """Train in this process; any learner exception becomes a failed result."""
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
