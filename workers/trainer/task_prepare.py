"""A learner's ``prepare_task``, once per task, in a learner host: harness code's side.

Work every trial of a task shares (FT-d's k-NN selection of the network to start from) is
done once, before the trials, so the task is charged for it once: were it done inside each
trial's ``train``, a run with N trials at once on N hosts would pay it N times and its cFLOP
would depend on the machine's parallelism. The host runs the hook on the causal view a trial
gets (same data, same past, no test split), metered like a prediction job; the result comes
back pickled (never unpickled here, only handed on to each trial's host) and bounded.
"""

from __future__ import annotations

from typing import Any

from services.core.errors import LearnerError
from workers.learners.protocol import MAX_PREPARED_BYTES
from workers.sandbox import messages
from workers.sandbox.client import LearnerHost
from workers.sandbox.declaration import info_to_json
from workers.trainer.trial import TrialSpec, answer_past, task_parts

PAST_OPS = ("past_train", "past_predictor", "pretrained")
"""What a host may ask for while it prepares a task (no checkpoints, rungs or FLOP reports)."""


def prepare_in_host(host: LearnerHost, spec: TrialSpec) -> tuple[bytes, dict[str, Any]]:
    """The learner's ``prepare_task`` result for ``spec``'s task (pickled, at most
    :data:`~workers.learners.protocol.MAX_PREPARED_BYTES`) and the FLOP fields it cost,
    checked like any metered reply.

    Raises:
        LearnerError: the learner raised, or its host broke the protocol (then it is closed).
    """
    broken = []  # a message refused here leaves the host mid-request

    def on_message(header: dict[str, Any], parts: list) -> tuple[dict[str, Any], list]:
        try:
            message = messages.read_request(header, parts)
            if message["op"] not in PAST_OPS:
                raise LearnerError(f"the learner host sent a {message['op']!r} frame while preparing the task")
            return answer_past(spec.harness, message["op"], message.get("order"))
        except Exception:
            broken.append(True)
            raise

    data_key = spec.key_prefix  # the same task data a trial of this attempt gets, sent once per host
    request = {"op": "prepare_task", "data_key": data_key, "info": info_to_json(spec.info),
               "past": [info_to_json(p) for p in spec.past], "stream_length": spec.stream_length,
               "seed": spec.info.order}
    parts = task_parts(spec.train, spec.dev) if host.data_key != data_key else []
    try:
        header, out = host.call(request, [*parts, spec.state], on_message=on_message)
        host.data_key = data_key
        reply = messages.read_reply("prepare_task", header, out)
    except Exception as exc:  # the learner raised (its host answered), or the host broke the protocol
        if host.alive and (broken or not isinstance(exc, LearnerError)):
            host.close()  # mid-request or untrusted: its next frames must not answer another request
        if isinstance(exc, LearnerError):
            raise
        raise LearnerError(f"prepare_task: {type(exc).__name__}: {exc}") from exc
    prepared = out[0]
    if len(prepared) > MAX_PREPARED_BYTES:
        raise LearnerError(f"prepare_task's result has {len(prepared)} bytes, over the "
                           f"{MAX_PREPARED_BYTES}-byte limit")
    flops = {k: reply[k] for k in ("flops_measured", "flops_reported", "flops_untracked")}
    return prepared, {**flops, "wall_time_s": reply["wall_time_s"]}


__all__ = ["PAST_OPS", "prepare_in_host"]
