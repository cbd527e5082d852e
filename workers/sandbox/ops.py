"""The learner-host protocol's vocabulary: every frame's ``op``, and the requests harness code sends.

One place names every kind of frame that crosses the pipe, so the two sides cannot drift:
:class:`Op` is what harness code asks a host (each answered by a ``result`` or an ``error``,
:class:`Reply`), :class:`HostOp` what a host asks or tells harness code while a request runs.
A request is a frozen dataclass whose fields are its header (:meth:`Request.header`), built
here and nowhere else; what comes back is read through :mod:`workers.sandbox.messages`.
Nothing here imports more than the standard library: the learner host imports it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

OP = "op"
"""The header key that names a frame's kind."""


class Op(StrEnum):
    """What harness code asks a learner host, one request at a time."""

    HELLO = "hello"  # the first frame: which learner to load; answered by ``ready``
    DESCRIBE = "describe"
    TRIAL = "trial"
    PREPARE_TASK = "prepare_task"
    PREDICT = "predict"
    LOAD_PREDICTOR = "load_predictor"
    FEATURES = "features"
    PREDICT_LOADED = "predict_loaded"
    FEATURES_AND_PREDICT = "features_and_predict"
    AUGMENT_VIEWS = "augment_views"
    FRESH_PREDICTOR = "fresh_predictor"
    RELEASE = "release"
    BYE = "bye"  # the last frame: the host exits, answering nothing


SERVED = frozenset(Op) - {Op.HELLO, Op.BYE}
"""The requests the host's loop answers with a ``result`` (hello and bye frame its life)."""


class HostOp(StrEnum):
    """What a host asks or tells harness code while a request runs (answered with the same op)."""

    CHECKPOINT = "checkpoint"
    FLOPS = "flops"
    RUNG = "rung"
    PAST_TRAIN = "past_train"
    TRAIN_SHARD = "train_shard"
    PAST_PREDICTOR = "past_predictor"
    PRETRAINED = "pretrained"


class Reply(StrEnum):
    """How a host ends a request: its result, its error, or (to ``hello``) that it is ready."""

    RESULT = "result"
    ERROR = "error"
    READY = "ready"


def op_of(header: Any) -> Any:
    """A received header's ``op``, as sent (hostile: anything, or None)."""
    return header.get(OP) if isinstance(header, dict) else None


def frame(op: HostOp | Reply, **fields_: Any) -> dict[str, Any]:
    """The header of a host's message, or of harness code's answer to one."""
    return {OP: str(op), **fields_}


@dataclass(frozen=True)
class Request:
    """A request of harness code's: its :class:`Op`, and its fields, which are its header."""

    op: ClassVar[Op]

    def header(self) -> dict[str, Any]:
        return {OP: str(self.op), **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True)
class Hello(Request):
    op: ClassVar[Op] = Op.HELLO
    spec: str
    threads: int = 1
    warm: bool = False


@dataclass(frozen=True)
class Describe(Request):
    op: ClassVar[Op] = Op.DESCRIBE


@dataclass(frozen=True)
class TaskRequest(Request):
    """A request on one task's causal view: the task's data (named by ``data_key``, sent with
    the first request of a host and task attempt) and what the view may show."""

    data_key: str
    info: dict[str, Any]  # info_to_json's
    past: list[dict[str, Any]]
    stream_length: int
    seed: int
    train_shards: list[int] = field(default_factory=list)  # rows of each shard of a streamed split


@dataclass(frozen=True)
class PrepareTask(TaskRequest):
    op: ClassVar[Op] = Op.PREPARE_TASK


@dataclass(frozen=True)
class Trial(TaskRequest):
    op: ClassVar[Op] = Op.TRIAL
    steps: int = 0
    checkpoint_at: list[int] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    rungs: list[int] = field(default_factory=list)
    rung_proxy: dict[str, int] | None = None  # the proxy scheduler's {n, q, seed}
    prepared: bool = False  # prepare_task's result comes before the state
    flops_every_step: bool = False  # a FLOP report at every progress call: the task has a cap (ruleset)


@dataclass(frozen=True)
class Predict(Request):
    op: ClassVar[Op] = Op.PREDICT
    info: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class LoadPredictor(Request):
    op: ClassVar[Op] = Op.LOAD_PREDICTOR
    info: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class Features(Request):
    op: ClassVar[Op] = Op.FEATURES
    handle: int


@dataclass(frozen=True)
class PredictLoaded(Request):
    op: ClassVar[Op] = Op.PREDICT_LOADED
    handle: int


@dataclass(frozen=True)
class FeaturesAndPredict(Request):
    op: ClassVar[Op] = Op.FEATURES_AND_PREDICT
    handle: int


@dataclass(frozen=True)
class AugmentViews(Request):
    op: ClassVar[Op] = Op.AUGMENT_VIEWS
    handle: int
    q: int
    seed: int


@dataclass(frozen=True)
class FreshPredictor(Request):
    op: ClassVar[Op] = Op.FRESH_PREDICTOR
    handle: int
    seed: int


@dataclass(frozen=True)
class Release(Request):
    op: ClassVar[Op] = Op.RELEASE
    handle: int


@dataclass(frozen=True)
class Bye(Request):
    op: ClassVar[Op] = Op.BYE


__all__ = [
    "OP",
    "SERVED",
    "AugmentViews",
    "Bye",
    "Describe",
    "Features",
    "FeaturesAndPredict",
    "FreshPredictor",
    "Hello",
    "HostOp",
    "LoadPredictor",
    "Op",
    "Predict",
    "PredictLoaded",
    "PrepareTask",
    "Release",
    "Reply",
    "Request",
    "TaskRequest",
    "Trial",
    "frame",
    "op_of",
]
