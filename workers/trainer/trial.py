"""One hyper-parameter trial, run inside a Ray Tune trial process.

The trial builds the causal view, runs the learner's ``train`` under a FLOP meter, scores the
predictor on the dev split with harness code, and hands checkpoints, the final predictor and
the learner's new state to the task's harness actor (which owns the object store). Learner
exceptions never escape: they become a ``failed`` result with the traceback, so Tune neither
retries them nor loses the message.
"""

from __future__ import annotations

import pickle
import resource
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.learners.protocol import LabelledData, Learner, TaskInfo
from workers.stream.task_view import CausalTaskView
from workers.trainer.context import LocalTrialContext, checkpoint_steps
from services.core.metrics import task_error

# Keys of a Tune config that belong to the harness, not to the learner's search space.
TRIAL_INDEX = "trial_index"
TRIAL_SEED = "trial_seed"
HARNESS_KEYS = (TRIAL_INDEX, TRIAL_SEED)


@dataclass(frozen=True)
class TrialSpec:
    """Everything a trial of one task needs besides its sampled config (shipped once)."""

    learner_spec: str
    info: TaskInfo
    past: tuple[TaskInfo, ...]
    stream_length: int
    steps: int
    checkpoint_fractions: tuple[float, ...]
    threads: int
    state: bytes  # pickled learner state from the previous task
    train: LabelledData
    dev: LabelledData
    key_prefix: str  # object-store prefix of this task attempt
    harness: Any  # ActorHandle of workers.trainer.harness.TaskHarness


def learner_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The learner's hyper-parameters: the Tune config minus the harness's own keys."""
    return {k: v for k, v in config.items() if k not in HARNESS_KEYS}


def trial_prefix(spec: TrialSpec, index: int) -> str:
    return f"{spec.key_prefix}/trial-{index:03d}"


def build_view(spec: TrialSpec) -> CausalTaskView:
    """The causal view for this trial; past train splits come lazily from the harness."""
    import ray  # noqa: PLC0415 - only inside Ray processes

    def load_past(order: int) -> LabelledData:
        return ray.get(spec.harness.past_train.remote(order))

    return CausalTaskView(
        info=spec.info,
        train=spec.train,
        dev=spec.dev,
        past={t.order: t for t in spec.past},
        load_past_train=load_past,
        stream_length=spec.stream_length,
    )


def make_context(
    learner: Learner, spec: TrialSpec, config: Mapping[str, Any], *, rank: int = 0,
    world_size: int = 1, device: str = "cpu",
) -> LocalTrialContext:
    """The trial's context; checkpoints go to the harness actor under the trial's prefix."""
    import ray  # noqa: PLC0415 - only inside Ray processes

    prefix = trial_prefix(spec, int(config[TRIAL_INDEX]))
    ctx: LocalTrialContext

    def store_checkpoint(step: int, data: bytes) -> None:
        info = ray.get(spec.harness.put.remote(f"{prefix}/ckpt-{step:07d}.bin", data))
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
    return ctx


def execute_trial(
    learner: Learner, spec: TrialSpec, config: Mapping[str, Any], ctx: LocalTrialContext
) -> dict[str, Any]:
    """Train and validate one trial in this process; returns its result metrics.

    On rank 0 the predictor is scored on the dev split (harness code, FLOPs counted) and the
    predictor and new state are stored; other ranks only train.
    """
    import ray  # noqa: PLC0415

    prefix = trial_prefix(spec, int(config[TRIAL_INDEX]))
    started = time.perf_counter()
    output = learner.train(build_view(spec), pickle.loads(spec.state), learner_config(config), ctx)
    metrics: dict[str, Any] = {}
    if ctx.rank == 0:
        scores = learner.predict(output.predictor, spec.dev.images, ctx)
        metrics["dev_error"] = task_error(scores, spec.dev.labels, spec.info.kind)
        blobs = {
            "predictor": (f"{prefix}/predictor.bin", learner.save_predictor(output.predictor)),
            "state": (f"{prefix}/state.pkl", pickle.dumps(output.state)),
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


def failure_metrics(config: Mapping[str, Any], exc: BaseException, flops: Mapping[str, int]) -> dict[str, Any]:
    """The result of a trial whose learner raised: status, message, traceback, FLOPs spent."""
    return {
        "status": "failed",
        "trial_index": int(config[TRIAL_INDEX]),
        "seed": int(config[TRIAL_SEED]),
        "config": learner_config(config),
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(exc)),
        **flops,
    }


def flop_metrics(ctx: LocalTrialContext | None) -> dict[str, int | str]:
    if ctx is None:
        return {"flops_measured": 0, "flops_reported": 0, "flops_source": "measured"}
    meter = ctx.meter
    return {"flops_measured": meter.measured, "flops_reported": meter.reported, "flops_source": meter.source}


def peak_memory_bytes(device: str) -> int:
    """Peak memory of this trial's process: CUDA allocator peak on GPU, else peak RSS."""
    if device.startswith("cuda"):
        import torch  # noqa: PLC0415

        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
