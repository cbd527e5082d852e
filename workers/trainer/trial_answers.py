"""What harness code does with a learner host's messages during a trial that need no more than the
task's harness actor: a checkpoint stored (once per declared step, within its size), an earlier
task's data or predictor fetched, and what it heard kept for the trial's result.

The messages arrive checked against their declarations (:mod:`workers.sandbox.messages`);
:mod:`workers.trainer.trial` routes them here, and :mod:`workers.trainer.task_prepare` and
:mod:`workers.trainer.rank_trial` answer the same requests the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.core.errors import LearnerError
from services.store import key_layout
from workers.sandbox.ops import OP, HostOp, frame
from workers.trainer.trial_flops import no_flops

CHECKPOINT_MAX_BYTES = 1024**3
"""The most one checkpoint (a saved predictor) may hold; a larger one fails its trial."""


class CapReached(Exception):
    """The task's running charge reached its ruleset's cap: the trial is stopped by the harness."""


@dataclass
class Heard:
    """What harness code heard from a host during one trial, and whether it refused a message."""

    prefix: str  # the trial's object-store prefix
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    rungs: list[list[float]] = field(default_factory=list)
    spent: dict[str, Any] = field(default_factory=no_flops)  # the last FLOP report: a failure's charge
    broken: bool = False  # a message failed harness side, leaving the host mid-request


def store_checkpoint(harness: Any, heard: Heard, step: int, data: bytes) -> None:
    """Store a checkpoint at a declared step (its message was checked): the first one there,
    and not over the size limit; anything else is a flood that fails the trial."""
    if any(c["step"] == step for c in heard.checkpoints):
        raise LearnerError(f"a second checkpoint at step {step}: each declared step is checkpointed once")
    if len(data) > CHECKPOINT_MAX_BYTES:
        raise LearnerError(
            f"the checkpoint at step {step} has {len(data)} bytes, over the {CHECKPOINT_MAX_BYTES}-byte limit"
        )
    info = ask(harness.put, key_layout.checkpoint_key(heard.prefix, step), data)
    heard.checkpoints.append({"step": step, **info})


def request_argument(message: Mapping[str, Any]) -> Any:
    """What a checked request for data names: a streamed shard's number, or a task's order."""
    return message["shard"] if message[OP] == HostOp.TRAIN_SHARD else message.get("order")


def answer_past(harness: Any, op: HostOp, order: Any) -> tuple[dict[str, Any], list]:
    """An earlier task's train split or predictor, or the run's pretrained checkpoint, fetched by the harness actor (which checks
    causality again); a refusal goes back to the learner as data, raised there."""
    try:
        answer = ask(getattr(harness, op), order)
    except Exception as exc:  # noqa: BLE001 - a CausalityError from the harness, as data
        cause = getattr(exc, "cause", None) or exc
        return frame(op, ok=False, message=str(cause)[:2000]), []
    parts = answer.to_arrays() if op in (HostOp.PAST_TRAIN, HostOp.TRAIN_SHARD) else [answer]
    return frame(op, ok=True), parts


def ask(method: Any, *args: Any) -> Any:
    """Call a harness actor's method and wait for its answer (Ray only inside Ray processes)."""
    import ray  # noqa: PLC0415

    return ray.get(method.remote(*args))


__all__ = ["CHECKPOINT_MAX_BYTES", "CapReached", "Heard", "answer_past", "ask", "request_argument", "store_checkpoint"]
