"""Multi-worker trials: a Ray Train ``TorchTrainer`` started inside the Tune function.

Every worker runs the learner's ``train`` with its rank and world size (the learner wraps
its model for data parallelism itself, e.g. with ``ray.train.torch.prepare_model``); FLOPs
are summed over workers with an all-reduce, and rank 0 posts the trial's metrics to the
task harness (Train V2 keeps metrics only with checkpoints, and a trial result is no
checkpoint). A failure of any worker fails the trial with the group's error.
"""

from __future__ import annotations

import tempfile
import traceback
from typing import Any

import ray

from workers.learners.protocol import Resources
from workers.trainer.trial import (
    TRIAL_INDEX,
    TrialSpec,
    execute_trial,
    failure_metrics,
    flop_metrics,
    make_context,
)


def run_distributed_trial(config: dict[str, Any], spec: TrialSpec, resources: Resources) -> dict[str, Any]:
    """Fit a TorchTrainer for this trial and return rank 0's metrics (or a failure)."""
    from ray.train import RunConfig, ScalingConfig  # noqa: PLC0415
    from ray.train.torch import TorchTrainer  # noqa: PLC0415

    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={"config": config, "spec": spec},
        scaling_config=ScalingConfig(
            num_workers=resources.num_workers,
            use_gpu=resources.gpus_per_worker > 0,
            resources_per_worker={"CPU": resources.cpus_per_worker, "GPU": resources.gpus_per_worker},
        ),
        run_config=RunConfig(
            storage_path=tempfile.mkdtemp(prefix="nevis-train-"),
            name=f"trial-{int(config[TRIAL_INDEX]):03d}",
        ),
    )
    try:
        trainer.fit()
    except Exception as exc:  # noqa: BLE001 - the worker group's failure is the trial's
        return failure_metrics(config, exc, flop_metrics(None))
    posted = ray.get(spec.harness.take_result.remote(int(config[TRIAL_INDEX])))
    if posted is None:
        return failure_metrics(config, RuntimeError("rank 0 posted no result"), flop_metrics(None))
    return posted


def _worker_loop(loop_config: dict[str, Any]) -> None:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    import ray.train  # noqa: PLC0415
    import ray.train.torch  # noqa: PLC0415

    from workers.learners.registry import load_learner  # noqa: PLC0415

    config, spec = loop_config["config"], loop_config["spec"]
    train_ctx = ray.train.get_context()
    rank, world = train_ctx.get_world_rank(), train_ctx.get_world_size()
    torch.set_num_threads(spec.threads)
    learner = load_learner(spec.learner_spec)
    ctx = make_context(
        learner, spec, config, rank=rank, world_size=world, device=str(ray.train.torch.get_device())
    )
    try:
        metrics = execute_trial(learner, spec, config, ctx)
    except Exception as exc:
        exc.add_note(f"in worker rank {rank} of {world}:\n{traceback.format_exc()}")
        raise
    finally:
        ctx.meter.untrack_all()
    flops = flop_metrics(ctx)
    totals = torch.tensor([flops["flops_measured"], flops["flops_reported"]], dtype=torch.int64)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(totals)
    if rank == 0:
        metrics.update(flops, flops_measured=int(totals[0]), flops_reported=int(totals[1]), num_workers=world)
        ray.get(spec.harness.post_result.remote(int(config["trial_index"]), metrics))
    ray.train.report({"rank": rank})
