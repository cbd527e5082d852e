"""What harness code accepts from a learner host: each message, its fields, their types and bounds.

A learner host runs hostile code, and that code can write frames of its own
(:mod:`workers.sandbox.wire` only guarantees that a frame decodes to JSON and numeric
arrays). So a header is read through its declaration here before harness code acts on it:
each field is checked for type and bounds, including the bounds the request sets (a trial's
steps, its checkpoint and rung steps, see :class:`Limits`), text is truncated, and only
declared fields come out, so nothing unchecked reaches storage or the database. A message
that breaks its declaration raises :class:`~workers.sandbox.wire.WireError` naming the message
and the field.

Messages a host sends while a trial runs are named by their ``op`` (:data:`REQUESTS`); the
``result`` that ends a request is declared per request op (:data:`REPLIES`), a trial's per
status; ``error`` ends any request (:data:`ERROR`), ``ready`` answers ``hello`` (:data:`READY`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workers.sandbox.ops import OP, HostOp, Op, Reply
from workers.sandbox.wire import Part, WireError

MAX_COUNT = 2**63  # FLOP counts: what the database's BIGINT holds
MAX_MEMORY_BYTES = 2**50
MAX_SECONDS = 1e9
MAX_ORDER = 10**6  # a task's order in its stream
ERROR_CHARS, MESSAGE_CHARS, TRACEBACK_CHARS, NAME_CHARS = 100, 4000, 20000, 200
TRIAL_STATUSES = ("ok", "failed", "stopped")


@dataclass(frozen=True)
class Limits:
    """Bounds a message takes from the request it belongs to (a trial's; none otherwise)."""

    steps: int = 0
    checkpoint_at: tuple[int, ...] = ()
    rungs: tuple[int, ...] = ()


Check = Callable[[Any, Limits], Any]
"""A field's check: returns the value as harness code keeps it, raises ValueError saying why not."""


@dataclass(frozen=True)
class Field:
    """One header field: its check, and what it is when a host leaves it out (if it may)."""

    check: Check
    required: bool = True
    default: Any = None


@dataclass(frozen=True)
class Message:
    """One message: its fields, the kinds of its parts in order (``a`` numeric array, ``b``
    bytes), and rules across fields (each returns a problem, or None)."""

    name: str
    fields: Mapping[str, Field] = field(default_factory=dict)
    parts: tuple[str, ...] = ()
    rules: tuple[Callable[[dict[str, Any]], str | None], ...] = ()

    def read(self, header: Mapping[str, Any], parts: list[Part], limits: Limits = Limits()) -> dict[str, Any]:
        """The declared fields of ``header``, checked; raises WireError naming what is wrong."""
        kinds = tuple("a" if isinstance(p, np.ndarray) else "b" for p in parts)
        if kinds != self.parts:
            raise WireError(f"{self.name}: expects parts {list(self.parts)}; got {list(kinds)[:20]}")
        out = read_fields(self.name, self.fields, header, limits)
        for rule in self.rules:
            problem = rule(out)
            if problem:
                raise WireError(f"{self.name}: {problem}")
        return out


def read_fields(
    name: str, fields: Mapping[str, Field], header: Mapping[str, Any], limits: Limits = Limits()
) -> dict[str, Any]:
    """``fields`` of ``header``, each checked (the parts of a message left aside)."""
    out = {}
    for key, spec in fields.items():
        if key not in header:
            if spec.required:
                raise WireError(f"{name}: field {key!r} is missing")
            out[key] = spec.default
            continue
        try:
            out[key] = spec.check(header[key], limits)
        except (ValueError, TypeError, OverflowError) as exc:
            raise WireError(f"{name}: field {key!r} {exc}") from None
    return out


# --- checks ------------------------------------------------------------------------------


def integer(low: int, high: int | Callable[[Limits], int]) -> Check:
    """An int (not a bool) in [low, high]; ``high`` may come from the limits."""

    def check(value: Any, limits: Limits) -> int:
        top = high(limits) if callable(high) else high
        if not _is_int(value) or not low <= value <= top:
            raise ValueError(f"must be an int in [{low}, {top}]; got {_show(value)}")
        return value

    return check


def member(of: Callable[[Limits], Collection[int]], what: str) -> Check:
    """An int among the steps the request declared (its checkpoints, its rungs)."""

    def check(value: Any, limits: Limits) -> int:
        allowed = of(limits)
        if not _is_int(value) or value not in allowed:
            raise ValueError(f"must be one of the {what} {sorted(allowed)[:20]}; got {_show(value)}")
        return value

    return check


def seconds(value: Any, limits: Limits) -> float:
    """A duration: a finite number of seconds, not negative."""
    if not _is_number(value) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"must be a finite number of seconds in [0, {MAX_SECONDS:g}]; got {_show(value)}")
    return float(value)


def text(limit: int) -> Check:
    """A string, cut to ``limit`` characters (a long message is not a broken one)."""

    def check(value: Any, limits: Limits) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string; got {type(value).__name__}")  # noqa: TRY004
        return value[:limit]

    return check


def label(limit: int) -> Check:
    """A non-empty string of at most ``limit`` characters, refused rather than cut (a name cut
    would be another name)."""

    def check(value: Any, limits: Limits) -> str:
        if not isinstance(value, str) or not 0 < len(value) <= limit:
            raise ValueError(f"must be a non-empty string of at most {limit} characters; got {_show(value)}")
        return value

    return check


def one_of(*values: str) -> Check:
    def check(value: Any, limits: Limits) -> str:
        if not isinstance(value, str) or value not in values:
            raise ValueError(f"must be one of {list(values)}; got {_show(value)}")
        return value

    return check


def list_of(item: Check, longest: Callable[[Limits], int]) -> Check:
    """A list of at most ``longest(limits)`` items, each checked."""

    def check(value: Any, limits: Limits) -> list[Any]:
        most = longest(limits)
        if not isinstance(value, list) or len(value) > most:
            size = len(value) if isinstance(value, list) else type(value).__name__
            raise ValueError(f"must be a list of at most {most} items; got {size}")
        checked = []
        for i, entry in enumerate(value):
            try:
                checked.append(item(entry, limits))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"item {i}: {exc}") from None
        return checked

    return check


def optional(inner: Check) -> Check:
    """``inner``, or None."""
    return lambda value, limits: None if value is None else inner(value, limits)


def flag(value: Any, limits: Limits) -> bool:
    """A JSON boolean (not a number standing for one)."""
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false; got {_show(value)}")  # noqa: TRY004
    return value


def mapping(value: Any, limits: Limits) -> dict[str, Any]:
    """A JSON object, read in depth by its owner (a declaration's search space, resources)."""
    if not isinstance(value, dict):
        raise ValueError(f"must be an object; got {type(value).__name__}")  # noqa: TRY004
    return value


STEP = integer(0, lambda lim: lim.steps)


def curve_point(value: Any, limits: Limits) -> list[Any]:
    """``[step, loss]`` of the learner's curve: the step within the trial, the loss finite,
    ``"inf"`` (the host's spelling of a diverged run, JSON having no infinity) or null."""
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"must be [step, loss]; got {_show(value)}")
    step, loss = value
    STEP(step, limits)
    if not (loss is None or loss == "inf" or (_is_number(loss) and math.isfinite(loss))):
        raise ValueError(f'loss must be a finite number, "inf" or null; got {_show(loss)}')
    return [step, loss if loss is None or loss == "inf" else float(loss)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _show(value: Any) -> str:
    return repr(value)[:40]


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


CHECKPOINT_STEP = member(lambda lim: lim.checkpoint_at, "checkpoint steps")
RUNG_STEP = member(lambda lim: lim.rungs, "rung steps")
CURVE = list_of(curve_point, lambda lim: lim.steps + 1)
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
        raise WireError(f"the learner host sent an unexpected {_show(op)} frame")
    return {OP: HostOp(op), **message.read(header, parts, limits)}


def read_reply(
    request_op: str, header: Mapping[str, Any], parts: list[Part], limits: Limits = Limits()
) -> dict[str, Any]:
    """The ``result`` of a ``request_op`` request, checked (a trial's by its status)."""
    if header.get(OP) != Reply.RESULT:
        raise WireError(f"expected the result of {request_op}; got a {_show(header.get(OP))} frame")
    if request_op == Op.TRIAL:
        status = header.get("status")
        if not isinstance(status, str) or status not in TRIAL_RESULTS:
            raise WireError(
                f"result of trial: field 'status' must be one of {list(TRIAL_STATUSES)}; got {_show(status)}"
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
    "MAX_SECONDS",
    "MESSAGE_CHARS",
    "NAME_CHARS",
    "READY",
    "REPLIES",
    "REQUESTS",
    "TRACEBACK_CHARS",
    "TRIAL_RESULTS",
    "TRIAL_STATUSES",
    "Check",
    "Field",
    "Limits",
    "Message",
    "curve_point",
    "flop_fields",
    "integer",
    "flag",
    "label",
    "list_of",
    "mapping",
    "member",
    "one_of",
    "optional",
    "read_fields",
    "read_reply",
    "read_request",
    "seconds",
    "text",
]
