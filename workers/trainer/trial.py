"""One hyper-parameter trial: harness code driving a learner host (:mod:`workers.sandbox`).

The learner host builds the causal view and runs the learner's ``train`` under a FLOP meter;
this side sends it the task's data, stores the checkpoints, predictor and new state it hands
back through the task's harness actor (which owns the object store), and scores the
predictor's dev predictions. Learner exceptions never escape: they become a ``failed``
result with the traceback, so Tune neither retries them nor loses the message. Nor does a
host's broken message or a failure to record what it sent: the trial fails, charged the
FLOPs its host last reported, and a host left in the middle of a request is closed.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.core.checkpoint_plan import checkpoint_steps
from services.core.errors import LearnerError
from services.core.metrics import task_error
from services.core.rulesets import TaskRules
from services.store import key_layout
from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.client import BrokenReply, HostSpec, LearnerHost
from workers.sandbox.declaration import info_to_json
from workers.sandbox.messages import Limits
from workers.sandbox.ops import OP, HostOp, Trial, frame
from workers.trainer.frame_caps import trial_frame_caps
from workers.trainer.proxy_scheduler import rung_value
from workers.trainer.task_budget import cap_message
from workers.trainer.trial_answers import (
    CHECKPOINT_MAX_BYTES,
    CapReached,
    Heard,
    answer_past,
    ask,
    request_argument,
    store_checkpoint,
)
from workers.trainer.trial_flops import final_flops, most_flops, no_flops, reported_flops, update_flops

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
    train: LabelledData | None  # None where the task is streamed: see train_shards
    dev: LabelledData
    key_prefix: str  # object-store prefix of this task attempt
    harness: Any  # ActorHandle of workers.trainer.harness.TaskHarness
    rungs: tuple[int, ...] = ()  # early stopping's rung steps (ASHA); none without it
    rung_proxy: dict[str, int] | None = None  # proxy scheduler: LiDAR views {n, q, seed} at the rungs
    prepared: bytes | None = None  # the learner's prepare_task result, pickled in its host; None without
    train_shards: tuple[int, ...] = ()  # rows of each train shard, where the split is too large to send whole
    rules: TaskRules = TaskRules()  # what the run's ruleset enforces: the task's FLOP cap, defaults only


def learner_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The learner's hyper-parameters: the Tune config minus the harness's own keys."""
    return {k: v for k, v in config.items() if k not in HARNESS_KEYS}


def trial_prefix(spec: TrialSpec, index: int) -> str:
    return key_layout.trial_prefix(spec.key_prefix, index)


def run_trial_in_host(host: LearnerHost, config: Mapping[str, Any], spec: TrialSpec) -> dict[str, Any]:
    """One trial in a learner host (:func:`_run_trial`), and its log stored: what the host
    wrote during the trial (its ring's slice: hosts are reused across trials) and, for a
    failed trial, the error and the learner's traceback, under the trial's prefix."""
    mark = host.log.position
    metrics = _run_trial(host, config, spec)
    if metrics.get("status") == "failed":
        host.settle_log()
        host.log.write(
            f"\n[nevis] trial {config[TRIAL_INDEX]} failed: {metrics.get('error')}\n".encode("utf-8", "replace")
        )
    try:
        ask(
            spec.harness.put,
            key_layout.trial_log_key(trial_prefix(spec, int(config[TRIAL_INDEX]))),
            host.log_since(mark),
        )
    except Exception:  # noqa: BLE001 - a log that cannot be kept does not fail its trial
        pass
    return metrics


def _run_trial(host: LearnerHost, config: Mapping[str, Any], spec: TrialSpec) -> dict[str, Any]:
    """One trial in a learner host; returns the metrics Tune reports (never raises for the
    learner's failures: they become a ``failed`` result with the FLOPs spent).

    The host gets the task's data (once per host and task attempt), the learner state and the
    sampled config; it asks back for earlier tasks' train splits and hands over checkpoints,
    which harness code stores through the task's harness actor. Every message it sends is
    read through its declaration (:mod:`workers.sandbox.messages`) with this trial's limits:
    checkpoints only at the declared steps, once each, each at most
    :data:`CHECKPOINT_MAX_BYTES`. The dev error is computed here, by harness code, from the
    scores the learner's ``predict`` returned. The FLOP fields are ``flops_measured`` (tracked
    and untracked module calls), ``flops_reported`` and ``flops_untracked``, the part of
    ``flops_measured`` from modules the learner did not pass to ``ctx.track``; a trial is
    charged the most its host reported, in the final frame or before, whatever else went wrong.
    """
    index = int(config[TRIAL_INDEX])
    limits = Limits(
        steps=spec.steps, checkpoint_at=checkpoint_steps(spec.steps, spec.checkpoint_fractions), rungs=tuple(spec.rungs)
    )
    heard = Heard(prefix=trial_prefix(spec, index))
    capped = spec.rules.task_flop_cap is not None
    if capped:  # no trial starts once the task's cap is reached
        go_on, total = ask(spec.harness.budget_report, index, 0)
        if not go_on:
            return {
                **_failed(config, CapReached(), no_flops(), heard),
                "status": "stopped",
                "traceback": "",
                "error": cap_message(spec.rules.ruleset, spec.rules.task_flop_cap, total, started=False),
            }

    def on_message(message: dict[str, Any], parts: list) -> tuple[dict[str, Any], list] | None:
        try:  # the message was read through its declaration, with these limits, by host.call
            return _answer(spec, index, heard, message, parts)
        except Exception:
            heard.broken = True  # the host is left mid-request: see _drop_if_out_of_step
            raise

    data_key = spec.key_prefix  # one task attempt: its data goes to a host once
    request = trial_request(config, spec, limits, capped=capped)
    parts = task_parts(spec.train, spec.dev) if host.data_key != data_key else []
    prepared = [] if spec.prepared is None else [spec.prepared]  # before the state, which comes last
    try:
        caps = trial_frame_caps(
            num_dev=len(spec.dev.labels),
            num_classes=spec.info.num_classes,
            limits=spec.host.limits,
            proxy=spec.rung_proxy,
            checkpoint_bytes=CHECKPOINT_MAX_BYTES,
        )
        result, out = host.call(
            request, [*parts, *prepared, spec.state], on_message=on_message, announce=caps, limits=limits
        )  # the result read through its declaration, with these limits
    except CapReached as exc:  # the harness ends the trial where the learner cannot object
        host.close()
        return {**_failed(config, exc, heard.spent, heard), "status": "stopped", "error": str(exc), "traceback": ""}
    except BrokenReply as exc:  # no honest host sends it, and its real result may follow
        host.close()
        return _failed(config, exc, most_flops(heard.spent, final_flops(exc.header)), heard)
    except Exception as exc:  # noqa: BLE001 - died, broke the contract, or could not be recorded
        _drop_if_out_of_step(host, heard, exc)
        return _failed(config, exc, heard.spent, heard)
    host.data_key = data_key
    if result["status"] == "failed" and result["traceback"]:  # the learner's own traceback, after its prints
        host.settle_log()
        host.log.write(f"\n{str(result['traceback'])[-20000:]}".encode("utf-8", "replace"))
    return _finish(config, spec, result, out, heard)


def trial_request(config: Mapping[str, Any], spec: TrialSpec, limits: Limits, *, capped: bool) -> Trial:
    """The ``trial`` request a host gets for this config (a multi-worker trial's other ranks
    get it with no rungs: :mod:`workers.trainer.rank_trial`)."""
    return Trial(
        data_key=spec.key_prefix,
        info={**info_to_json(spec.info), "flop_budget": spec.rules.task_flop_cap},
        past=[info_to_json(p) for p in spec.past],
        stream_length=spec.stream_length,
        steps=spec.steps,
        checkpoint_at=list(limits.checkpoint_at),
        seed=int(config[TRIAL_SEED]),
        config=learner_config(config),
        rungs=list(limits.rungs),
        rung_proxy=dict(spec.rung_proxy) if spec.rung_proxy else None,
        prepared=spec.prepared is not None,
        train_shards=list(spec.train_shards),
        flops_every_step=capped,
    )


def _answer(
    spec: TrialSpec, index: int, heard: Heard, message: dict[str, Any], parts: list
) -> tuple[dict[str, Any], list] | None:
    """Act on one checked message of the host's during a trial; what goes back, if anything."""
    op = message[OP]
    if op == HostOp.CHECKPOINT:
        store_checkpoint(spec.harness, heard, message["step"], parts[0])
        return None
    if op == HostOp.FLOPS:
        heard.spent = reported_flops(message, heard.spent)
        _check_cap(spec, index, heard.spent)
        return None
    if op == HostOp.RUNG:
        return _answer_rung(spec, index, message["step"], parts[0], heard.rungs)
    return answer_past(spec.harness, op, request_argument(message))


def _check_cap(spec: TrialSpec, index: int, spent: Mapping[str, Any]) -> None:
    """Tell the task's charge what this trial spent so far; raise :class:`CapReached` once the
    task's cap (its ruleset's ``budget-<X>``) is reached."""
    if spec.rules.task_flop_cap is None:
        return
    go_on, total = ask(spec.harness.budget_report, index, int(spent["flops_measured"]) + int(spent["flops_reported"]))
    if not go_on:
        raise CapReached(cap_message(spec.rules.ruleset, spec.rules.task_flop_cap, total, started=True))


def _drop_if_out_of_step(host: LearnerHost, heard: Heard, exc: Exception) -> None:
    """Close a host left in the middle of a request: it still runs the trial and has frames
    on their way, which the next request would read as its own. A learner error the host
    itself answered (an ``error`` frame) leaves it in step, and a dead host has nothing left."""
    if host.alive and (heard.broken or not isinstance(exc, LearnerError)):
        host.close()


def _finish(
    config: Mapping[str, Any], spec: TrialSpec, result: dict[str, Any], out: list, heard: Heard
) -> dict[str, Any]:
    """The metrics of a trial from its checked final frame: the dev error scored, the predictor
    and state stored. Whatever fails there fails the trial, charged the most the host reported."""
    charged = most_flops(heard.spent, result)
    charged["flops_updates"] = update_flops(result, charged)
    base = {
        "trial_index": int(config[TRIAL_INDEX]),
        "seed": int(config[TRIAL_SEED]),
        "config": learner_config(config),
        "checkpoints": heard.checkpoints,
        "curve": result["curve"],
        **charged,
    }
    if result["status"] == "stopped" and heard.rungs:
        step, error = heard.rungs[-1]
        return {
            **base,
            "status": "stopped",
            "wall_time_s": result["wall_time_s"],
            "error": f"stopped by early stopping at step {int(step)} "
            + (f"(LiDAR {-error:.4f})" if spec.rung_proxy else f"(dev error {error:.4f})"),
            "rungs": heard.rungs,
        }
    if result["status"] == "stopped":
        return {**base, "status": "failed", "error": "the trial stopped without a rung report", "traceback": ""}
    if result["status"] == "failed":
        return {
            **base,
            "status": "failed",
            "error": result["error"] or "the trial failed",
            "traceback": result["traceback"],
        }
    scores, predictor, state = out
    try:
        dev_error = task_error(scores, spec.dev.labels, spec.info.kind)
    except Exception as exc:  # noqa: BLE001 - hostile scores fail the trial, whatever they raise
        return {**base, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:4000], "traceback": ""}
    try:
        stored = {
            name: ask(spec.harness.put, key, blob)
            for name, key, blob in (
                ("predictor", key_layout.trial_predictor_key(heard.prefix), predictor),
                ("state", key_layout.trial_state_key(heard.prefix), state),
            )
        }
    except Exception as exc:  # noqa: BLE001 - a trial that cannot be recorded failed, charged
        return _failed(config, exc, charged, heard)
    return {
        **base,
        **stored,
        "status": "ok",
        "dev_error": dev_error,
        "wall_time_s": result["wall_time_s"],
        "peak_memory_bytes": result["peak_memory_bytes"],
        "missed_checkpoints": result["missed_checkpoints"],
    }


def task_parts(train: LabelledData | None, dev: LabelledData) -> list[np.ndarray]:
    """A task's splits as the host's ``trial`` request carries them: dev first (2 arrays),
    then train (2, or 4 with the originals its training crops come from), unless the task is
    streamed (``train`` is ``None``: the host asks for its shards one at a time)."""
    return [*dev.to_arrays()[:2], *(train.to_arrays() if train is not None else [])]


def _answer_rung(
    spec: TrialSpec, trial_index: int, step: int, scores: Any, seen: list[list[float]]
) -> tuple[dict[str, Any], list]:
    """Score a trial's dev predictions at a rung (its step checked against the declared rungs;
    harness code holds the labels' verdict) and ask the harness actor whether the trial goes on."""
    if any(s == step for s, _ in seen):
        raise LearnerError(f"a second rung report at step {step}")
    try:
        error = (
            rung_value(scores, spec.rung_proxy, max_dim=spec.host.limits.proxy_max_dim)
            if spec.rung_proxy
            else task_error(scores, spec.dev.labels, spec.info.kind)
        )
    except Exception:  # noqa: BLE001 - unusable scores rank last
        error = float("inf")
    seen.append([step, error])
    go_on = ask(spec.harness.rung_report, trial_index, step, error)
    return frame(HostOp.RUNG, **{"continue": bool(go_on)}), []


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


def _failed(config: Mapping[str, Any], exc: BaseException, flops: Mapping[str, Any], heard: Heard) -> dict[str, Any]:
    return {**failure_metrics(config, exc, flops), "checkpoints": heard.checkpoints}


__all__ = [
    "HARNESS_KEYS",
    "TRIAL_INDEX",
    "TRIAL_SEED",
    "TrialSpec",
    "failure_metrics",
    "learner_config",
    "run_trial_in_host",
    "task_parts",
    "trial_prefix",
    "trial_request",
]
