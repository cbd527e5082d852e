"""Learners each broken in one way a researcher's learner often is, for ``nevis check``'s tests.

``LinearLearner`` works (a compact form of the README's); each factory below breaks one call:

- ``wrong_shape``: ``predict`` drops the last class column;
- ``unpicklable``: the predictor holds a lambda, and ``save_predictor`` pickles it whole;
- ``raising_load``: ``load_predictor`` raises;
- ``missing_method``: no ``features``;
- ``nan_loss``: the loss becomes NaN (a ``0 * log(0)`` term), as a diverging learner's does.
"""

from __future__ import annotations

import io
import pickle

import torch
from torch import nn

from workers.learners.protocol import LogUniform, Resources, TrainOutput


class LinearLearner:
    name = "linear-fixture"

    def search_space(self):
        return {"learning_rate": LogUniform(1e-3, 1e-1)}

    def resources(self):
        return Resources(num_workers=1, cpus_per_worker=1)

    def init_state(self):
        return None

    def _model(self, info):
        return nn.Sequential(nn.Flatten(), nn.Linear(3 * info.image_size**2, info.num_classes))

    def _loss(self, logits, target, info):
        fn = nn.CrossEntropyLoss() if info.kind == "single" else nn.BCEWithLogitsLoss()
        return fn(logits, target if info.kind == "single" else target.float())

    def train(self, view, state, config, ctx):
        info, data = view.info, view.train()
        torch.manual_seed(ctx.seed)
        model = ctx.track(self._model(info))
        opt = torch.optim.SGD(model.parameters(), lr=config["learning_rate"])
        x, y = torch.as_tensor(data.images).float().div(255), torch.as_tensor(data.labels)
        ctx.progress(0, self._predictor(info, model))
        for step in range(1, ctx.steps + 1):
            idx = torch.randint(len(x), (16,))
            loss = self._loss(model(x[idx]), y[idx], info)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ctx.progress(step, self._predictor(info, model), loss=loss.item())
        return TrainOutput(predictor=self._predictor(info, model), state=state)

    def _predictor(self, info, model):
        return (info, model)

    def predict(self, predictor, images, ctx):
        with torch.no_grad():
            return predictor[1](torch.as_tensor(images).float().div(255)).numpy()

    def features(self, predictor, images, ctx):
        return images.reshape(len(images), -1).astype("float32") / 255

    def save_predictor(self, predictor):
        buffer = io.BytesIO()
        torch.save(predictor[1].state_dict(), buffer)
        return buffer.getvalue()

    def load_predictor(self, data, info, ctx):
        model = ctx.track(self._model(info))
        model.load_state_dict(torch.load(io.BytesIO(data)))
        return info, model


class WrongShape(LinearLearner):
    def predict(self, predictor, images, ctx):
        return super().predict(predictor, images, ctx)[:, :-1]


class Unpicklable(LinearLearner):
    def _predictor(self, info, model):
        return (info, model, lambda x: x / 255)  # a preprocessing step kept as a lambda

    def save_predictor(self, predictor):
        return pickle.dumps(predictor)


class RaisingLoad(LinearLearner):
    def load_predictor(self, data, info, ctx):
        print("looking for the weights in /home/me/checkpoints")
        raise RuntimeError("weights file not found: /home/me/checkpoints/best.pt")


class MissingMethod(LinearLearner):
    features = None  # forgot to write it


class NanLoss(LinearLearner):
    def _loss(self, logits, target, info):
        return super()._loss(logits, target, info) + 0 * torch.log(torch.zeros(()))


def working():
    return LinearLearner()


def wrong_shape():
    return WrongShape()


def unpicklable():
    return Unpicklable()


def raising_load():
    return RaisingLoad()


def missing_method():
    return MissingMethod()


def nan_loss():
    return NanLoss()
