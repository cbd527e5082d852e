"""The probe pool's calls, as a learner host serves them: a predictor loaded once, then
features, predictions, augmented views or a fresh network of it, named by a handle.

A mix-in of :class:`~workers.sandbox.host.Host`, apart from the trial's ops because its state
(the loaded predictors, at most :data:`MAX_PREDICTORS`) and its metering (each call is one
prediction job's, which the probe pool records apart from the learner's cFLOP) are its own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from services.core.errors import LearnerError
from workers.learners.protocol import Learner
from workers.sandbox.context import LocalTrialContext
from workers.sandbox.declaration import info_from_json
from workers.sandbox.fresh import fresh_predictor
from workers.sandbox.host_values import blob, flops, numeric
from workers.sandbox.joint_pass import features_and_scores
from workers.sandbox.views import augment_views

MAX_PREDICTORS = 2  # loaded predictors kept for features calls (a probe job needs one)


class ProbeCalls:
    """The ``load_predictor`` … ``release`` ops of a host serving ``learner`` on ``device``."""

    learner: Learner
    device: str

    def __init__(self) -> None:
        self._predictors: OrderedDict[int, Any] = OrderedDict()
        self._next_handle = 1

    def _op_load_predictor(self, header: dict, parts: list) -> tuple[dict, list]:
        info = info_from_json(header["info"])
        with self._metered(header) as ctx:
            handle = self._keep(self.learner.load_predictor(blob(parts[0], "predictor"), info, ctx))
        return {"handle": handle, **flops(ctx)}, []

    def _op_features(self, header: dict, parts: list) -> tuple[dict, list]:
        predictor = self._predictor(header)
        with self._metered(header) as ctx:
            out = numeric(self.learner.features(predictor, parts[0], ctx), "features()")
        return flops(ctx), [out]

    def _op_predict_loaded(self, header: dict, parts: list) -> tuple[dict, list]:
        predictor = self._predictor(header)
        with self._metered(header) as ctx:
            out = numeric(self.learner.predict(predictor, parts[0], ctx), "predict()")
        return flops(ctx), [out]

    def _op_features_and_predict(self, header: dict, parts: list) -> tuple[dict, list]:
        predictor = self._predictor(header)
        with self._metered(header) as ctx:
            features, scores = features_and_scores(self.learner, predictor, parts[0], ctx)
            out = [numeric(features, "features()"), numeric(scores, "predict()")]
        return flops(ctx), out

    def _op_augment_views(self, header: dict, parts: list) -> tuple[dict, list]:
        predictor = self._predictor(header)
        originals = (parts[1], parts[2]) if len(parts) == 3 else (None, None)  # canvas, extents
        with self._metered(header) as ctx:  # a learner's own augment_images may run torch modules
            views, source = augment_views(
                self.learner,
                predictor,
                parts[0],
                int(header["q"]),
                seed=int(header["seed"]),
                originals=originals[0],
                extents=originals[1],
            )
        return {"source": source, **flops(ctx)}, [np.asarray(views, dtype=np.uint8)]

    def _op_fresh_predictor(self, header: dict, parts: list) -> tuple[dict, list]:
        predictor = self._predictor(header)
        with self._metered(header) as ctx:  # a learner's own hook may run torch modules
            fresh, source = fresh_predictor(self.learner, predictor, seed=int(header["seed"]))
        handle = 0 if fresh is None else self._keep(fresh)
        return {"handle": handle, "source": source, **flops(ctx)}, []

    def _op_release(self, header: dict, parts: list) -> tuple[dict, list]:
        self._predictors.pop(int(header["handle"]), None)
        return {}, []

    def _predictor(self, header: dict) -> Any:
        handle = int(header["handle"])
        if handle not in self._predictors:
            raise LearnerError(f"predictor handle {handle} is not loaded (released or evicted)")
        self._predictors.move_to_end(handle)
        return self._predictors[handle]

    def _keep(self, predictor: Any) -> int:
        """A new handle for ``predictor``; the least recently used beyond :data:`MAX_PREDICTORS` go."""
        handle, self._next_handle = self._next_handle, self._next_handle + 1
        self._predictors[handle] = predictor
        while len(self._predictors) > MAX_PREDICTORS:
            self._predictors.popitem(last=False)
        return handle

    @contextmanager
    def _metered(self, header: dict) -> Iterator[LocalTrialContext]:
        """A one-call context whose meter watches while learner code runs, then lets go of
        every module (a predictor kept here must not be charged to a later call's meter
        unless that call tracks or runs it)."""
        ctx = LocalTrialContext(
            seed=int(header.get("seed", 0)), steps=1, save_predictor=self.learner.save_predictor, device=self.device
        )
        ctx.meter.watch()
        try:
            yield ctx
        finally:
            ctx.meter.untrack_all()


__all__ = ["MAX_PREDICTORS", "ProbeCalls"]
