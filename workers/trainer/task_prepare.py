"""A learner's ``prepare_task``, once per task, in a learner host: harness code's side.

Work every trial of a task shares (FT-d's k-NN selection of the network to start from) is
done once, before the trials, so the task is charged for it once: were it done inside each
trial's ``train``, a run with N trials at once on N hosts would pay it N times and its cFLOP
would depend on the machine's parallelism. The host runs the hook on the causal view a trial
gets (same data, same past, no test split), metered like a prediction job; the result comes
back pickled (never unpickled here, only handed on to each trial's host) and bounded. A
preparation that fails is charged what its host last reported, as a failed trial is
(docs/fidelity.md F3): the host reports at the learner's ``ctx.progress`` calls and once more
when the learner raises; and at least the floor its host's CPU time implies
(:meth:`PrepareFailed.charged`), like any measured call. What the host wrote meanwhile, a
failure's traceback included, is the attempt's ``prepare-log.txt``, as a trial's log is.
"""

from __future__ import annotations

from typing import Any

from services.core.errors import LearnerError
from services.store import key_layout
from workers.learners.protocol import MAX_PREPARED_BYTES
from workers.sandbox.client import LearnerHost
from workers.sandbox.declaration import info_to_json
from workers.sandbox.ops import OP, HostOp, PrepareTask
from workers.trainer.trial import TrialSpec, task_parts
from workers.trainer.trial_answers import answer_past, request_argument
from workers.trainer.trial_flops import no_flops, reported_flops

PAST_OPS = (HostOp.PAST_TRAIN, HostOp.PAST_PREDICTOR, HostOp.PRETRAINED, HostOp.TRAIN_SHARD)
"""What a host may ask for while it prepares a task (besides FLOP reports; no checkpoints or rungs)."""


class PrepareFailed(LearnerError):
    """The learner's ``prepare_task`` failed; ``flops`` is what the task is charged for it:
    what its host last reported it had spent (measured plus reported), or the floor its CPU
    time implies where that is more (:meth:`charged`), then ``floored``."""

    def __init__(self, message: str, flops: int = 0, cpu_seconds: float | None = None, floored: bool = False) -> None:
        super().__init__(message)
        self.flops = int(flops)
        self.cpu_seconds = cpu_seconds
        self.floored = floored

    def charged(self, usage: dict[str, Any] | None) -> PrepareFailed:
        """This failure charged its host's measured usage too (:func:`~workers.trainer.host_usage.measured_call`'s fields)."""
        if usage is None:
            return self
        floor, used = int(usage.get("flops_floor") or 0), usage.get("cpu_seconds")
        failed = PrepareFailed(
            str(self), max(self.flops, floor), used if isinstance(used, (int, float)) else None, floor > self.flops
        )
        failed.__cause__ = self.__cause__
        return failed

    def __reduce__(self) -> tuple[Any, ...]:  # crosses Ray as the cause of a task error
        return type(self), (str(self), self.flops, self.cpu_seconds, self.floored)


def prepare_in_host(host: LearnerHost, spec: TrialSpec) -> tuple[bytes, dict[str, Any]]:
    """The learner's ``prepare_task`` result for ``spec``'s task (pickled, at most
    :data:`~workers.learners.protocol.MAX_PREPARED_BYTES`) and the FLOP fields it cost,
    checked like any metered reply.

    Raises:
        PrepareFailed: the learner raised, or its host died or broke the protocol (then it is
            closed), with the FLOPs the host last reported.
    """
    mark = host.log.position
    try:
        return _prepare(host, spec)
    finally:
        try:
            import ray  # noqa: PLC0415 - Ray only inside Ray processes, as trial logs

            ray.get(spec.harness.put.remote(key_layout.prepare_log_key(spec.key_prefix), host.log_since(mark)))
        except Exception:  # noqa: BLE001 - a log that cannot be kept fails nothing
            pass


def _prepare(host: LearnerHost, spec: TrialSpec) -> tuple[bytes, dict[str, Any]]:
    broken = []  # a message refused here leaves the host mid-request
    spent: dict[str, Any] = no_flops()  # the host's last FLOP report: a failure's charge

    def on_message(message: dict[str, Any], parts: list) -> tuple[dict[str, Any], list] | None:
        nonlocal spent  # the message was read through its declaration by host.call
        try:
            op = message[OP]
            if op == HostOp.FLOPS:
                spent = reported_flops(message, spent)
                return None
            if op not in PAST_OPS:
                raise LearnerError(f"the learner host sent a {str(op)!r} frame while preparing the task")
            return answer_past(spec.harness, op, request_argument(message))
        except Exception:
            broken.append(True)
            raise

    data_key = spec.key_prefix  # the same task data a trial of this attempt gets, sent once per host
    request = PrepareTask(
        data_key=data_key,
        info=info_to_json(spec.info),
        past=[info_to_json(p) for p in spec.past],
        stream_length=spec.stream_length,
        seed=spec.info.order,
        train_shards=list(spec.train_shards),
    )
    parts = task_parts(spec.train, spec.dev) if host.data_key != data_key else []
    try:
        reply, out = host.call(request, [*parts, spec.state], on_message=on_message)  # checked by its declaration
        host.data_key = data_key
    except Exception as exc:  # the learner raised (its host answered), or the host broke the protocol
        if host.alive and (broken or not isinstance(exc, LearnerError)):
            host.close()  # mid-request or untrusted: its next frames must not answer another request
        charged = int(spent["flops_measured"]) + int(spent["flops_reported"])  # untracked is within measured
        what = str(exc) if isinstance(exc, LearnerError) else f"prepare_task: {type(exc).__name__}: {exc}"
        raise PrepareFailed(what, charged) from exc
    prepared = out[0]
    flops = {k: reply[k] for k in ("flops_measured", "flops_reported", "flops_untracked")}
    if len(prepared) > MAX_PREPARED_BYTES:
        raise PrepareFailed(
            f"prepare_task's result has {len(prepared)} bytes, over the {MAX_PREPARED_BYTES}-byte limit",
            flops["flops_measured"] + flops["flops_reported"],
        )
    return prepared, {**flops, "wall_time_s": reply["wall_time_s"]}


__all__ = ["PAST_OPS", "PrepareFailed", "prepare_in_host"]
