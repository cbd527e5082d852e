"""What harness code accepts from a learner host: each message, its fields, their types and bounds.

A learner host runs hostile code, and that code can write frames of its own
(:mod:`workers.sandbox.wire` only guarantees that a frame decodes to JSON and numeric
arrays). So a header is read through its declaration here before harness code acts on it:
each field is checked for type and bounds, including the bounds the request sets (a trial's
steps, its checkpoint and rung steps, see :class:`~workers.sandbox.message_fields.Limits`), text is truncated, and only
declared fields come out, so nothing unchecked reaches storage or the database. A message
that breaks its declaration raises :class:`~workers.sandbox.wire.WireError` naming the message
and the field.

Messages a host sends while a trial runs are named by their ``op`` (:data:`REQUESTS`); the
``result`` that ends a request is declared per request op (:data:`REPLIES`), a trial's per
status; ``error`` ends any request (:data:`ERROR`), ``ready`` answers ``hello`` (:data:`READY`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workers.sandbox.message_fields import (
    CHECKPOINT_STEP,
    CURVE,
    RUNG_STEP,
    Field,
    Limits,
    Message,
    flag,
    integer,
    label,
    list_of,
    mapping,
    one_of,
    optional,
    read_fields,
    seconds,
    shown,
    text,
)
from workers.sandbox.ops import OP, HostOp, Op, Reply
from workers.sandbox.wire import Part, WireError

MAX_COUNT = 2**63  # FLOP counts: what the database's BIGINT holds
MAX_MEMORY_BYTES = 2**50
MAX_ORDER = 10**6  # a task's order in its stream
ERROR_CHARS, MESSAGE_CHARS, TRACEBACK_CHARS, NAME_CHARS = 100, 4000, 20000, 200
TRIAL_STATUSES = ("ok", "failed", "stopped")


# --- the messages --------------------------------------------------------------------------

COUNT = integer(0, MAX_COUNT - 1)
FLOP_FIELDS = {
    "flops_measured": Field(COUNT),
    "flops_reported": Field(COUNT),
    "flops_untracked": Field(COUNT, required=False, default=0),
}  # absent from an older host


def _untracked_within_measured(fields: dict[str, Any]) -> str | None:
    if fields["flops_untracked"] > fields["flops_measured"]:
        return "flops_untracked cannot exceed flops_measured"
    return None


def _updates_within_total(fields: dict[str, Any]) -> str | None:
    updates = fields.get("flops_updates")
    if updates is not None and updates > fields["flops_measured"] + fields["flops_reported"]:
        return "flops_updates cannot exceed flops_measured + flops_reported"
    return None


def _metered(name: str, fields: Mapping[str, Field] | None = None, parts: tuple[str, ...] = ()) -> Message:
    """A message that carries the FLOPs its call cost."""
    return Message(name, {**(fields or {}), **FLOP_FIELDS}, parts, (_untracked_within_measured,))


def _trial_result(name: str, fields: Mapping[str, Field], parts: tuple[str, ...] = ()) -> Message:
    """A trial's result: its FLOPs, and the part of them its training spent on updates
    (``flops_updates``; absent from an older host, where all of them are counted as updates)."""
    return Message(
        name,
        {**fields, **FLOP_FIELDS, "flops_updates": Field(COUNT, required=False, default=None)},
        parts,
        (_untracked_within_measured, _updates_within_total),
    )


ORDER = integer(0, MAX_ORDER)

REQUESTS: dict[HostOp, Message] = {
    HostOp.CHECKPOINT: Message("checkpoint", {"step": Field(CHECKPOINT_STEP)}, ("b",)),
    HostOp.FLOPS: _metered("flops report"),
    HostOp.RUNG: Message("rung report", {"step": Field(RUNG_STEP)}, ("a",)),
    HostOp.PAST_TRAIN: Message("past_train request", {"order": Field(ORDER)}),
    # a streamed task's train split, one shard at a time
    HostOp.TRAIN_SHARD: Message("train_shard request", {"shard": Field(integer(0, MAX_ORDER))}),
    HostOp.PAST_PREDICTOR: Message("past_predictor request", {"order": Field(ORDER)}),
    HostOp.PRETRAINED: Message("pretrained request", {"order": Field(optional(ORDER), required=False)}),
}
"""What a host may ask or tell harness code while a trial runs, by ``op``."""

TRIAL_RESULTS: dict[str, Message] = {
    "ok": _trial_result(
        "result of trial (ok)",
        {
            "status": Field(one_of("ok")),
            "wall_time_s": Field(seconds),
            "peak_memory_bytes": Field(integer(0, MAX_MEMORY_BYTES)),
            "curve": Field(CURVE),
            "missed_checkpoints": Field(list_of(CHECKPOINT_STEP, lambda lim: len(lim.checkpoint_at))),
        },
        ("a", "b", "b"),
    ),  # dev scores, predictor, new state
    "stopped": _trial_result(
        "result of trial (stopped)",
        {
            "status": Field(one_of("stopped")),
            "stopped_at": Field(RUNG_STEP),
            "wall_time_s": Field(seconds),
            "curve": Field(CURVE),
        },
    ),
    "failed": _trial_result(
        "result of trial (failed)",
        {
            "status": Field(one_of("failed")),
            "error": Field(text(MESSAGE_CHARS)),
            "traceback": Field(text(TRACEBACK_CHARS), required=False, default=""),
            "curve": Field(CURVE, required=False, default=[]),
        },
    ),
}
"""A trial's ``result``, by its status."""

REPLIES: dict[Op, Message] = {
    Op.DESCRIBE: Message(
        "result of describe",
        {
            "name": Field(label(NAME_CHARS)),
            "search_space": Field(mapping),
            "resources": Field(mapping),
            "preferred_search": Field(optional(label(NAME_CHARS)), required=False),
            "prepares_task": Field(flag, required=False, default=False),
        },
        ("b",),
    ),
    # the learner's result, pickled in its host
    Op.PREPARE_TASK: _metered("result of prepare_task", {"wall_time_s": Field(seconds)}, ("b",)),
    Op.PREDICT: _metered("result of predict", parts=("a",)),
    Op.LOAD_PREDICTOR: _metered("result of load_predictor", {"handle": Field(integer(1, MAX_COUNT - 1))}),
    Op.FEATURES: _metered("result of features", parts=("a",)),
    Op.PREDICT_LOADED: _metered("result of predict_loaded", parts=("a",)),
    Op.FEATURES_AND_PREDICT: _metered("result of features_and_predict", parts=("a", "a")),  # features, scores
    Op.AUGMENT_VIEWS: _metered("result of augment_views", {"source": Field(text(NAME_CHARS))}, ("a",)),
    Op.FRESH_PREDICTOR: _metered(
        "result of fresh_predictor",
        {  # handle 0: none (step 0 is untrained)
            "handle": Field(integer(0, MAX_COUNT - 1)),
            "source": Field(text(NAME_CHARS)),
        },
    ),
    Op.RELEASE: Message("result of release"),
}
"""The ``result`` of each request but ``trial`` (see :data:`TRIAL_RESULTS`), by request op."""

ERROR = Message(
    "error",
    {
        "error": Field(text(ERROR_CHARS)),
        "message": Field(text(MESSAGE_CHARS)),
        "traceback": Field(text(TRACEBACK_CHARS), required=False, default=""),
    },
)
READY = Message("ready", {"device": Field(text(NAME_CHARS))})


def read_request(header: Mapping[str, Any], parts: list[Part], limits: Limits = Limits()) -> dict[str, Any]:
    """A host's message during a trial, checked against its declaration (by ``op``)."""
    op = header.get(OP)
    message = REQUESTS.get(op) if isinstance(op, str) else None
    if message is None:
        raise WireError(f"the learner host sent an unexpected {shown(op)} frame")
    return {OP: HostOp(op), **message.read(header, parts, limits)}


def read_reply(
    request_op: str, header: Mapping[str, Any], parts: list[Part], limits: Limits = Limits()
) -> dict[str, Any]:
    """The ``result`` of a ``request_op`` request, checked (a trial's by its status)."""
    if header.get(OP) != Reply.RESULT:
        raise WireError(f"expected the result of {request_op}; got a {shown(header.get(OP))} frame")
    if request_op == Op.TRIAL:
        status = header.get("status")
        if not isinstance(status, str) or status not in TRIAL_RESULTS:
            raise WireError(
                f"result of trial: field 'status' must be one of {list(TRIAL_STATUSES)}; got {shown(status)}"
            )
        return TRIAL_RESULTS[status].read(header, parts, limits)
    return REPLIES[request_op].read(header, parts, limits)


def flop_fields(header: Mapping[str, Any]) -> dict[str, int]:
    """The FLOP fields of any metered message, checked (raises WireError if one is bad)."""
    counts = read_fields("FLOP counts", FLOP_FIELDS, header)
    problem = _untracked_within_measured(counts)
    if problem:
        raise WireError(f"FLOP counts: {problem}")
    return counts


__all__ = [
    "ERROR",
    "ERROR_CHARS",
    "FLOP_FIELDS",
    "MAX_COUNT",
    "MAX_MEMORY_BYTES",
    "MAX_ORDER",
    "MESSAGE_CHARS",
    "NAME_CHARS",
    "READY",
    "REPLIES",
    "REQUESTS",
    "TRACEBACK_CHARS",
    "TRIAL_RESULTS",
    "TRIAL_STATUSES",
    "Limits",  # the bounds read_reply and read_request take (declared in message_fields)
    "Message",
    "flop_fields",
    "read_reply",
    "read_request",
]
