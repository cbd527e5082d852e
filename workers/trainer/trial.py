"""One hyper-parameter trial: harness code driving a learner host (:mod:`workers.sandbox`).

The learner host builds the causal view and runs the learner's ``train`` under a FLOP meter;
this side sends it the task's data, stores the checkpoints, predictor and new state it hands
back through the task's harness actor (which owns the object store), and scores the
predictor's dev predictions. Learner exceptions never escape: they become a ``failed``
result with the traceback, so Tune neither retries them nor loses the message.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.core.errors import LearnerError
from services.core.metrics import task_error
from services.store.runs import run_keys
from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost, flop_counts
from workers.sandbox.context import checkpoint_steps
from workers.sandbox.declaration import info_to_json

# Keys of a Tune config that belong to the harness, not to the learner's search space.
TRIAL_INDEX = "trial_index"
TRIAL_SEED = "trial_seed"
HARNESS_KEYS = (TRIAL_INDEX, TRIAL_SEED)


@dataclass(frozen=True)
class TrialSpec:
    """Everything a trial of one task needs besides its sampled config (shipped once)."""

    host: HostSpec  # which learner, how sandboxed
    info: TaskInfo
    past: tuple[TaskInfo, ...]
    stream_length: int
    steps: int
    checkpoint_fractions: tuple[float, ...]
    state: bytes  # pickled learner state from the previous task
    train: LabelledData
    dev: LabelledData
    key_prefix: str  # object-store prefix of this task attempt
    harness: Any  # ActorHandle of workers.trainer.harness.TaskHarness
    rungs: tuple[int, ...] = ()  # early stopping's rung steps (ASHA); none without it


def learner_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The learner's hyper-parameters: the Tune config minus the harness's own keys."""
    return {k: v for k, v in config.items() if k not in HARNESS_KEYS}


def trial_prefix(spec: TrialSpec, index: int) -> str:
    return run_keys.trial_prefix(spec.key_prefix, index)


def run_trial_in_host(host: LearnerHost, config: Mapping[str, Any], spec: TrialSpec) -> dict[str, Any]:
    """One trial in a learner host; returns the metrics Tune reports (never raises for the
    learner's failures: they become a ``failed`` result with the FLOPs spent).

    The host gets the task's data (once per host and task attempt), the learner state and the
    sampled config; it asks back for earlier tasks' train splits and hands over checkpoints,
    which harness code stores through the task's harness actor. The dev error is computed
    here, by harness code, from the scores the learner's ``predict`` returned. The FLOP
    fields are ``flops_measured`` (tracked and untracked module calls), ``flops_reported``
    and ``flops_untracked``, the part of ``flops_measured`` from modules the learner did not
    pass to ``ctx.track``.
    """
    import ray  # noqa: PLC0415 - only inside Ray processes

    prefix = trial_prefix(spec, int(config[TRIAL_INDEX]))
    checkpoints: list[dict[str, Any]] = []
    rungs_seen: list[list[float]] = []
    spent = no_flops()  # the host's last report: what a killed host is charged

    def on_message(header: dict[str, Any], parts: list) -> tuple[dict[str, Any], list] | None:
        if header.get("op") == "checkpoint" and len(parts) == 1 and isinstance(parts[0], bytes):
            step = header.get("step")
            if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= spec.steps:
                raise LearnerError(f"checkpoint at an impossible step {str(step)[:40]}")
            info = ray.get(spec.harness.put.remote(f"{prefix}/ckpt-{step:07d}.bin", parts[0]))
            checkpoints.append({"step": step, **info})
            return None
        if header.get("op") == "flops":
            spent.update(_reported_flops(header, spent))
            return None
        if header.get("op") == "rung" and len(parts) == 1:
            return _answer_rung(spec, int(config[TRIAL_INDEX]), header.get("step"), parts[0], rungs_seen)
        if header.get("op") in ("past_train", "past_predictor", "pretrained"):
            return _answer_past(spec.harness, str(header["op"]), header.get("order"))
        raise LearnerError(f"the learner host sent an unexpected {str(header.get('op'))[:40]!r} frame")

    data_key = spec.key_prefix  # one task attempt: its data goes to a host once
    fresh = host.data_key != data_key
    request = {
        "op": "trial", "data_key": data_key, "info": info_to_json(spec.info),
        "past": [info_to_json(p) for p in spec.past], "stream_length": spec.stream_length,
        "steps": spec.steps, "checkpoint_at": list(checkpoint_steps(spec.steps, spec.checkpoint_fractions)),
        "seed": int(config[TRIAL_SEED]), "config": learner_config(config), "rungs": list(spec.rungs),
    }
    parts = task_parts(spec.train, spec.dev) if fresh else []
    try:
        header, out = host.call(request, [*parts, spec.state], on_message=on_message)
    except LearnerError as exc:  # the host died or broke the protocol: charged its last report
        return {**failure_metrics(config, exc, spent), "checkpoints": checkpoints}
    host.data_key = data_key
    flops = flop_counts(header)
    base = {"trial_index": int(config[TRIAL_INDEX]), "seed": int(config[TRIAL_SEED]),
            "config": learner_config(config), "checkpoints": checkpoints, "curve": header.get("curve") or [],
            **flops, "flops_source": "reported" if flops["flops_reported"] else "measured"}
    if header.get("status") == "stopped" and rungs_seen:
        step, error = rungs_seen[-1]
        return {**base, "status": "stopped", "wall_time_s": _number(header.get("wall_time_s")),
                "error": f"stopped by early stopping at step {int(step)} (dev error {error:.4f})",
                "rungs": rungs_seen}
    if header.get("status") != "ok" or len(out) != 3:
        return {**base, "status": "failed", "error": str(header.get("error", "the trial failed"))[:4000],
                "traceback": str(header.get("traceback", ""))[:20000]}
    scores, predictor, state = out
    try:
        dev_error = task_error(scores, spec.dev.labels, spec.info.kind)
    except LearnerError as exc:
        return {**base, "status": "failed", "error": f"LearnerError: {exc}", "traceback": ""}
    stored = {name: ray.get(spec.harness.put.remote(f"{prefix}/{file}", blob))
              for name, file, blob in (("predictor", run_keys.PREDICTOR_FILE, predictor),
                                       ("state", run_keys.STATE_FILE, state))}
    return {**base, **stored, "status": "ok", "dev_error": dev_error,
            "wall_time_s": _number(header.get("wall_time_s")),
            "peak_memory_bytes": int(_number(header.get("peak_memory_bytes"))),
            "missed_checkpoints": [int(s) for s in header.get("missed_checkpoints") or []]}


def task_parts(train: LabelledData, dev: LabelledData) -> list[np.ndarray]:
    """A task's splits as the host's ``trial`` request carries them: dev first (2 arrays),
    then train (2, or 4 with the originals its training crops come from)."""
    return [*dev.to_arrays()[:2], *train.to_arrays()]


def _answer_past(harness: Any, op: str, order: Any) -> tuple[dict[str, Any], list]:
    """An earlier task's train split or predictor, or the run's pretrained checkpoint, fetched by the harness actor (which checks
    causality again); a refusal goes back to the learner as data, raised there."""
    import ray  # noqa: PLC0415 - only inside Ray processes

    try:
        answer = ray.get(getattr(harness, op).remote(order))
    except Exception as exc:  # noqa: BLE001 - a CausalityError from the harness, as data
        cause = getattr(exc, "cause", None) or exc
        return {"op": op, "ok": False, "message": str(cause)[:2000]}, []
    parts = answer.to_arrays() if op == "past_train" else [answer]
    return {"op": op, "ok": True}, parts


def _reported_flops(header: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """A host's running FLOP totals, kept only if they are counts that never go down."""
    counts = {"flops_measured": header.get("flops_measured"), "flops_reported": header.get("flops_reported"),
              "flops_untracked": header.get("flops_untracked", 0)}  # absent from an older host
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= int(before.get(k, 0))
               for k, v in counts.items()) or counts["flops_untracked"] > counts["flops_measured"]:
        raise LearnerError("the learner host sent a malformed FLOP report")
    return {**counts, "flops_source": "reported" if counts["flops_reported"] else "measured"}


def _answer_rung(spec: TrialSpec, trial_index: int, step: Any, scores: Any,
                 seen: list[list[float]]) -> tuple[dict[str, Any], list]:
    """Score a trial's dev predictions at a rung (harness code holds the labels' verdict) and
    ask the harness actor whether the trial goes on."""
    import ray  # noqa: PLC0415 - only inside Ray processes

    if not isinstance(step, int) or isinstance(step, bool) or step not in spec.rungs:
        raise LearnerError(f"a rung report at an impossible step {str(step)[:40]}")
    try:
        error = task_error(scores, spec.dev.labels, spec.info.kind)
    except (LearnerError, ValueError):
        error = float("inf")  # unusable scores rank last
    seen.append([step, error])
    go_on = ray.get(spec.harness.rung_report.remote(trial_index, step, error))
    return {"op": "rung", "continue": bool(go_on)}, []


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


def no_flops() -> dict[str, int | str]:
    """The FLOP fields of a trial that spent none (or whose count died with its process)."""
    return {"flops_measured": 0, "flops_reported": 0, "flops_untracked": 0, "flops_source": "measured"}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


__all__ = [
    "HARNESS_KEYS", "TRIAL_INDEX", "TRIAL_SEED", "TrialSpec", "failure_metrics", "learner_config",
    "no_flops", "run_trial_in_host", "task_parts", "trial_prefix"
]
