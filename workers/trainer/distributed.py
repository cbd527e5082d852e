"""Multi-worker trials: a Ray Train ``TorchTrainer`` started inside the Tune function.

The one place learner code runs outside a learner host: a multi-worker learner uses Ray
Train and ``torch.distributed`` from inside its ``train``, which a sandbox without network
cannot offer. Its workers are Ray workers with a blanked environment, not sandboxes, so runs
that require the sandbox (``NEVIS_SANDBOX=bwrap``, the coordinator's default) refuse such
learners before any of their code runs (:func:`workers.trainer.stream_runner`).

Every worker runs the learner's ``train`` with its rank and world size (the learner wraps
its model for data parallelism itself, e.g. with ``ray.train.torch.prepare_model``); FLOPs
are summed over workers with an all-reduce, and rank 0 posts the trial's metrics to the
task harness (Train V2 keeps metrics only with checkpoints, and a trial result is no
checkpoint). A failure of any worker fails the trial with the group's error.
"""

from __future__ import annotations

import pickle
import resource
import tempfile
import time
import traceback
from collections.abc import Mapping
from typing import Any

import ray

from services.core.checkpoint_plan import checkpoint_steps
from services.core.metrics import task_error
from services.store import key_layout
from workers.learners.protocol import LabelledData, Learner, Resources
from workers.sandbox.context import LocalTrialContext
from workers.sandbox.dev_scoring import DevScoring
from workers.sandbox.host_stream import WireShards
from workers.sandbox.ops import HostOp
from workers.stream.task_view import CausalTaskView
from workers.trainer.learner_nodes import learner_ask
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, TrialSpec, failure_metrics, learner_config, trial_prefix
from workers.trainer.trial_answers import answer_past
from workers.trainer.trial_flops import no_flops


def run_distributed_trial(config: dict[str, Any], spec: TrialSpec, resources: Resources) -> dict[str, Any]:
    """Fit a TorchTrainer for this trial and return rank 0's metrics (or a failure)."""
    from ray.train import RunConfig, ScalingConfig  # noqa: PLC0415
    from ray.train.torch import TorchTrainer  # noqa: PLC0415

    # Ray Train's own run folder, removed with the trial: the results travel through the harness.
    with tempfile.TemporaryDirectory(prefix="nevis-train-", ignore_cleanup_errors=True) as storage:
        trainer = TorchTrainer(
            _worker_loop,
            train_loop_config={"config": config, "spec": spec},
            scaling_config=ScalingConfig(
                num_workers=resources.num_workers,
                use_gpu=resources.gpus_per_worker > 0,
                resources_per_worker={
                    "CPU": resources.cpus_per_worker,
                    "GPU": resources.gpus_per_worker,
                    **learner_ask(),  # trusted ranks run learner code too: on learner nodes
                },
            ),
            run_config=RunConfig(storage_path=storage, name=f"trial-{int(config[TRIAL_INDEX]):03d}"),
        )
        try:
            trainer.fit()
        except Exception as exc:  # noqa: BLE001 - the worker group's failure is the trial's
            spent = ray.get(spec.harness.take_spent.remote(int(config[TRIAL_INDEX])))
            return failure_metrics(config, exc, spent or no_flops())
    posted = ray.get(spec.harness.take_result.remote(int(config[TRIAL_INDEX])))
    if posted is None:
        return failure_metrics(config, RuntimeError("rank 0 posted no result"), no_flops())
    return posted


def _worker_loop(loop_config: dict[str, Any]) -> None:
    import ray.train  # noqa: PLC0415
    import ray.train.torch  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    from workers.learners.loading import load_learner  # noqa: PLC0415

    config, spec = loop_config["config"], loop_config["spec"]
    train_ctx = ray.train.get_context()
    rank, world = train_ctx.get_world_rank(), train_ctx.get_world_size()
    torch.set_num_threads(spec.host.threads)
    learner = load_learner(spec.host.learner_spec)
    ctx = _make_context(learner, spec, config, rank=rank, world_size=world, device=str(ray.train.torch.get_device()))
    ctx.meter.watch()  # modules the learner does not pass to ctx.track are counted too
    index = int(config[TRIAL_INDEX])
    # every rank reports what it has spent periodically, so a group torn down by another
    # rank's failure is still charged for it
    ctx.on_flops = lambda measured, reported: ray.get(spec.harness.add_spent.remote(index, rank, measured, reported))
    try:
        metrics = _execute_trial(learner, spec, config, ctx)
    except Exception as exc:
        exc.add_note(f"in worker rank {rank} of {world}:\n{traceback.format_exc()}")
        # a failed group is charged what each rank spent before failing
        ray.get(spec.harness.add_spent.remote(index, rank, int(ctx.meter.measured), int(ctx.meter.reported)))
        raise
    finally:
        ctx.meter.untrack_all()  # also ends the watch
    flops = flop_metrics(ctx)
    totals = torch.tensor(
        [flops["flops_measured"], flops["flops_reported"], flops["flops_untracked"], flops["flops_updates"]],
        dtype=torch.int64,
    )
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(totals)
    if rank == 0:
        metrics.update(
            flops,
            flops_measured=int(totals[0]),
            flops_reported=int(totals[1]),
            flops_untracked=int(totals[2]),
            flops_updates=int(totals[3]),
            num_workers=world,
        )
        ray.get(spec.harness.post_result.remote(int(config["trial_index"]), metrics))
    ray.train.report({"rank": rank})


def _build_view(spec: TrialSpec) -> CausalTaskView:
    """The causal view for this trial; past train splits come lazily from the harness."""

    def load_past(order: int) -> LabelledData:
        return ray.get(spec.harness.past_train.remote(order))

    def load_past_predictor(order: int) -> bytes:
        return ray.get(spec.harness.past_predictor.remote(order))

    def load_pretrained() -> bytes:
        return ray.get(spec.harness.pretrained.remote())

    def ask(header: dict[str, Any], _: list) -> tuple[dict[str, Any], list]:  # a streamed task's shard
        return answer_past(spec.harness, HostOp.TRAIN_SHARD, header["shard"])

    streamed = WireShards(spec.train_shards, ask) if spec.train is None else None
    return CausalTaskView(
        info=spec.info,
        train=streamed.whole if streamed else spec.train,
        train_stream=streamed.stream if streamed else None,
        dev=spec.dev,
        past={t.order: t for t in spec.past},
        load_past_train=load_past,
        stream_length=spec.stream_length,
        load_past_predictor=load_past_predictor,
        load_pretrained=load_pretrained,
    )


def _make_context(
    learner: Learner,
    spec: TrialSpec,
    config: Mapping[str, Any],
    *,
    rank: int = 0,
    world_size: int = 1,
    device: str = "cpu",
) -> LocalTrialContext:
    """The trial's context; checkpoints go to the harness actor under the trial's prefix."""
    prefix = trial_prefix(spec, int(config[TRIAL_INDEX]))
    ctx: LocalTrialContext

    def store_checkpoint(step: int, data: bytes) -> None:
        info = ray.get(spec.harness.put.remote(key_layout.checkpoint_key(prefix, step), data))
        ctx.stored_checkpoints.append({"step": step, **info})

    ctx = LocalTrialContext(
        seed=int(config[TRIAL_SEED]),
        steps=spec.steps,
        save_predictor=learner.save_predictor,
        on_checkpoint=store_checkpoint,
        checkpoint_at=checkpoint_steps(spec.steps, spec.checkpoint_fractions),
        world_size=world_size,
        rank=rank,
        device=device,
    )
    ctx.dev_scoring = DevScoring(
        spec.dev, spec.info.kind, lambda p: learner.predict(p, spec.dev.images, ctx), learner.save_predictor
    )  # the harness's dev pass, offered to the learner
    return ctx


def _execute_trial(
    learner: Learner, spec: TrialSpec, config: Mapping[str, Any], ctx: LocalTrialContext
) -> dict[str, Any]:
    """Train and validate one trial in this process; returns its result metrics.

    On rank 0 the predictor is scored on the dev split (harness code, FLOPs counted; not again
    if the learner's ``ctx.dev_error`` scored the same predictor bytes) and the predictor and
    new state are stored; other ranks only train.
    """
    prefix = trial_prefix(spec, int(config[TRIAL_INDEX]))
    started = time.perf_counter()
    output = learner.train(_build_view(spec), pickle.loads(spec.state), learner_config(config), ctx)
    metrics: dict[str, Any] = {}
    if ctx.rank == 0:
        predictor = learner.save_predictor(output.predictor)
        scoring = ctx.dev_scoring  # scored by the learner's ctx.dev_error already, or now
        scores = (
            scoring.scores_for(output.predictor, predictor)
            if scoring is not None
            else learner.predict(output.predictor, spec.dev.images, ctx)
        )
        metrics["dev_error"] = task_error(scores, spec.dev.labels, spec.info.kind)
        blobs = {
            "predictor": (key_layout.trial_predictor_key(prefix), predictor),
            "state": (key_layout.trial_state_key(prefix), pickle.dumps(output.state)),
        }
        for name, (key, data) in blobs.items():
            metrics[name] = ray.get(spec.harness.put.remote(key, data))
    metrics.update(
        status="ok",
        trial_index=int(config[TRIAL_INDEX]),
        seed=ctx.seed,
        config=learner_config(config),
        wall_time_s=time.perf_counter() - started,
        peak_memory_bytes=peak_memory_bytes(ctx.device),
        curve=[(p.step, p.loss) for p in ctx.curve],
        checkpoints=list(ctx.stored_checkpoints),
        missed_checkpoints=list(ctx.missed_checkpoints),
    )
    return metrics


def flop_metrics(ctx: LocalTrialContext) -> dict[str, int | str]:
    meter = ctx.meter
    return {
        "flops_measured": meter.measured,
        "flops_reported": meter.reported,
        "flops_untracked": meter.untracked,
        "flops_updates": meter.updates,
        "flops_source": meter.source,
    }


def peak_memory_bytes(device: str) -> int:
    """Peak memory of this worker's process: CUDA allocator peak on GPU, else peak RSS."""
    if device.startswith("cuda"):
        import torch  # noqa: PLC0415

        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


__all__ = ["flop_metrics", "peak_memory_bytes", "run_distributed_trial"]
