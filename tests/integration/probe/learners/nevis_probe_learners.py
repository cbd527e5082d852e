"""A learner for the probe tests whose representation changes along training.

``GrowingLearner`` is nearest-mean on 4x4-pooled pixels (48 values at 16 px), but its
features at training step s keep only the first d(s) of them, d growing from a few to all. So LiDAR,
RankMe and probe accuracy all change from checkpoint to checkpoint, and the proxies have
something to rank. Pure numpy; it reports its own FLOPs; runs take seconds.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from workers.learners.protocol import Choice, Resources, TrainOutput


def _flat(images: np.ndarray) -> np.ndarray:
    """4x4 block means of every channel, flattened (small features keep probes fast)."""
    n, h, w, c = images.shape
    x = images.astype(np.float32) / 255.0
    return x.reshape(n, 4, h // 4, 4, w // 4, c).mean(axis=(2, 4)).reshape(n, -1)


class GrowingLearner:
    name = "growing"

    def search_space(self):
        return {"shrink": Choice((0.0, 0.5))}

    def resources(self) -> Resources:
        return Resources()

    def init_state(self) -> Any:
        return None

    def train(self, view, state, config, ctx):
        data = view.train()
        x = _flat(data.images)
        y = data.labels if data.labels.ndim == 2 else np.eye(view.info.num_classes)[data.labels]
        means = (y.T @ x) / np.maximum(y.sum(axis=0), 1.0)[:, None]
        means = (1 - config["shrink"]) * means + config["shrink"] * x.mean(axis=0)
        ctx.report_flops(2 * x.shape[0] * x.shape[1] * y.shape[1])
        dim = x.shape[1]
        predictor = None
        for step in range(ctx.steps + 1):
            keep = max(4, int(round(dim * (step + 1) / (ctx.steps + 1))))
            predictor = {"means": means, "keep": keep}
            ctx.progress(step, predictor, loss=None if step == 0 else 2.0 / (step + 1))
        return TrainOutput(predictor=predictor, state=None)

    def predict(self, predictor, images, ctx):
        x = _flat(images)[:, : predictor["keep"]]
        means = predictor["means"][:, : predictor["keep"]]
        ctx.report_flops(3 * x.shape[0] * x.shape[1] * means.shape[0])
        return -((x[:, None, :] - means[None, :, :]) ** 2).sum(axis=2)

    def features(self, predictor, images, ctx):
        return _flat(images)[:, : predictor["keep"]]

    def save_predictor(self, predictor) -> bytes:
        return pickle.dumps(predictor)

    def load_predictor(self, data, info, ctx):
        return pickle.loads(data)


def growing() -> GrowingLearner:
    return GrowingLearner()
