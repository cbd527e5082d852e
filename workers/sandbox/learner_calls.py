"""The learner calls harness code makes through a learner host: its declaration, a saved
predictor's scores, and the probe pool's calls on predictors kept in the host by handle.

Kept apart from :mod:`workers.sandbox.client` (which starts the host and moves frames) because
these are the protocol's uses, not its transport; every reply is read through its declaration
by :meth:`~workers.sandbox.client.LearnerHost.call` before it gets here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from services.core.errors import LearnerError
from workers.learners.protocol import TaskInfo
from workers.sandbox import messages, ops, wire
from workers.sandbox.client import LearnerHost
from workers.sandbox.declaration import LearnerDeclaration, info_to_json


def describe(host: LearnerHost) -> LearnerDeclaration:
    """The learner's name, search space, resources and initial state, as checked data."""
    reply, parts = host.call(ops.Describe())  # the initial state: one bytes part, checked
    return LearnerDeclaration.from_header(reply, bytes(parts[0]))


def predict(
    host: LearnerHost, info: TaskInfo, predictor: bytes, images: np.ndarray, *, seed: int
) -> tuple[np.ndarray, dict[str, int]]:
    """Scores of a saved predictor on images (no labels), and the FLOPs that cost."""
    reply, parts = host.call(ops.Predict(info_to_json(info), seed), [predictor, images])
    return _array(parts), messages.flop_fields(reply)


@dataclass(frozen=True)
class PredictorHandle:
    """A predictor loaded in a learner host, named by its handle there."""

    handle: int
    host: LearnerHost


class SandboxedLearner:
    """The learner calls the probe pool makes, answered by a learner host.

    The host meters each call as it meters a prediction job (its FLOP meter watches); the
    FLOPs a call cost go to ``ctx.charge_host_flops(counts)`` when the context given has that
    method (the probe pool's :class:`~workers.probe.runtime.context.ProbeContext`, which keeps them
    apart from the learner's cFLOP), and are dropped otherwise.
    """

    def __init__(self, host: LearnerHost, name: str | None = None) -> None:
        self.host = host
        self.name = name or host.spec.learner_spec

    def load_predictor(self, data: bytes, info: TaskInfo, ctx: Any = None) -> PredictorHandle:
        reply, _ = self.host.call(ops.LoadPredictor(info_to_json(info), int(getattr(ctx, "seed", 0))), [data])
        _charge(ctx, reply)
        return PredictorHandle(reply["handle"], self.host)

    def features(self, predictor: PredictorHandle, images: np.ndarray, ctx: Any = None) -> np.ndarray:
        reply, parts = self.host.call(ops.Features(predictor.handle), [images])
        _charge(ctx, reply)
        return _array(parts)

    def predict(self, predictor: PredictorHandle, images: np.ndarray, ctx: Any = None) -> np.ndarray:
        reply, parts = self.host.call(ops.PredictLoaded(predictor.handle), [images])
        _charge(ctx, reply)
        return _array(parts)

    def features_and_predict(
        self, predictor: PredictorHandle, images: np.ndarray, ctx: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Features and scores of the same images: one backbone pass where the learner offers
        it (:mod:`workers.sandbox.joint_pass`), two otherwise."""
        reply, parts = self.host.call(ops.FeaturesAndPredict(predictor.handle), [images])
        _charge(ctx, reply)
        return _array(parts[:1]), _array(parts[1:])  # two arrays, as declared

    def augment_views(
        self,
        predictor: PredictorHandle,
        images: np.ndarray,
        q: int,
        *,
        seed: int,
        ctx: Any = None,
        originals: Any = None,
    ) -> tuple[np.ndarray, str]:
        """q views of each image; with ``originals`` (the same images' stored
        :class:`~workers.stream.task_info.Originals`) cut from them, as training cuts."""
        extra = [] if originals is None else [originals.images, np.asarray(originals.extents)]
        reply, parts = self.host.call(ops.AugmentViews(predictor.handle, int(q), int(seed)), [images, *extra])
        _charge(ctx, reply)
        views = _array(parts)
        if views.shape != (len(images), q, *images.shape[1:]) or views.dtype != np.uint8:
            raise LearnerError(
                f"augmented views must be uint8 shaped {(len(images), q, *images.shape[1:])}; "
                f"got {views.dtype} {views.shape}."
            )
        return views, reply["source"]

    def fresh_predictor(
        self, predictor: PredictorHandle, *, seed: int, ctx: Any = None
    ) -> tuple[PredictorHandle | None, str]:
        """A fresh network of ``predictor``'s architecture (:mod:`workers.sandbox.fresh`), or
        None where the learner's first checkpoint already is one; and what it is."""
        reply, _ = self.host.call(ops.FreshPredictor(predictor.handle, int(seed)))
        _charge(ctx, reply)
        handle = reply["handle"]
        return (PredictorHandle(handle, self.host) if handle else None), reply["source"]

    def release(self, predictor: PredictorHandle) -> None:
        self.host.call(ops.Release(predictor.handle))


def _charge(ctx: Any, reply: dict[str, Any]) -> None:
    """Hand a call's FLOPs, as the host counted them (checked with its reply), to ``ctx`` if it
    keeps a tally."""
    counts = messages.flop_fields(reply)
    charge = getattr(ctx, "charge_host_flops", None)
    if callable(charge):
        charge(counts)


def _array(parts: list[wire.Part]) -> np.ndarray:
    if len(parts) != 1 or not isinstance(parts[0], np.ndarray):
        raise LearnerError("the learner host must answer with one numeric array")
    return parts[0]


__all__ = ["PredictorHandle", "SandboxedLearner", "describe", "predict"]
