"""The two learners of ``bench/gpu_floor_check.py``: an honest twin and a hostile one, each
training for ``config["seconds"]`` on the device its host was given (``ctx.device``).

- ``honest``: a two-layer MLP on flattened pixels, passed to ``ctx.track`` (its meter counts
  every step); bf16 autocast on CUDA;
- ``hostile``: switches its FLOP meter off when it is loaded (as ``meter_patcher`` of
  ``tests/integration/learner_fixtures/nevis_hostile_learners.py`` does), then trains the same
  kind of MLP as raw tensors with ``torch.matmul`` (no module any hook could see), wider and
  on bigger batches, in bf16 on CUDA: its own count is 0.

On a CPU both loops stop at ``seconds`` of their own process's CPU time (as loaded as the
machine may be, each spends the same); on CUDA at ``seconds`` of wall time, synchronising
every few steps so the device's queue does not run past it.
"""

from __future__ import annotations

import pickle
import time

import numpy as np

from workers.learners.protocol import Resources, TrainOutput

SYNC_EVERY = 8


class _Timed:
    name = "timed"

    def search_space(self):
        return {}

    def resources(self) -> Resources:
        return Resources(gpus_per_worker=1.0, gpu_optional=True)  # the device where there is one

    def init_state(self):
        return None

    def train(self, view, state, config, ctx):
        import torch

        torch.manual_seed(ctx.seed)
        device = ctx.device
        data = view.train()
        x_all = torch.as_tensor(data.images.reshape(len(data.images), -1), device=device).float() / 255.0
        y_all = torch.as_tensor(np.asarray(data.labels).reshape(len(data.labels), -1)[:, 0], device=device).long()
        classes = view.info.num_classes
        step_of, params = self.network(x_all.shape[1], int(config["hidden"]), classes, device, ctx)
        optimiser = torch.optim.SGD(params, lr=float(config.get("lr", 1e-3)))
        cuda = device.startswith("cuda")
        clock = time.perf_counter if cuda else time.process_time
        started, step = clock(), 0
        while clock() - started < float(config["seconds"]) and step < ctx.steps:
            index = torch.randint(0, len(x_all), (int(config["batch"]),), device=device)
            with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=cuda):
                loss = torch.nn.functional.cross_entropy(step_of(x_all[index]).float(), y_all[index])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            step += 1
            if cuda and step % SYNC_EVERY == 0:
                torch.cuda.synchronize()
            ctx.progress(step, None, loss=loss.detach())
        return TrainOutput(predictor=classes, state={"steps": step})

    def network(self, width, hidden, classes, device, ctx):
        raise NotImplementedError

    def predict(self, predictor, images, ctx):
        return np.zeros((len(images), predictor), np.float32)  # chance: the check is about charges

    def features(self, predictor, images, ctx):
        return np.zeros((len(images), 1), np.float32)

    def save_predictor(self, predictor) -> bytes:
        return pickle.dumps(predictor)

    def load_predictor(self, data, info, ctx):
        return pickle.loads(data)


class Honest(_Timed):
    name = "gpu-floor-honest"

    def network(self, width, hidden, classes, device, ctx):
        import torch

        model = ctx.track(
            torch.nn.Sequential(
                torch.nn.Linear(width, hidden, bias=False),
                torch.nn.ReLU(),
                torch.nn.Linear(hidden, classes, bias=False),
            ).to(device)
        )
        return model, list(model.parameters())


class Hostile(_Timed):
    """Counts nothing: its meter is switched off, and its arithmetic is raw ``torch.matmul``."""

    name = "gpu-floor-hostile"

    def __init__(self) -> None:
        from workers.sandbox.metering import flops

        flops.FlopMeter.track = lambda self, module: module
        flops.FlopMeter.watch = lambda self: self
        flops.FlopMeter.report_flops = lambda self, n: None

    def network(self, width, hidden, classes, device, ctx):
        import torch

        w1 = (torch.randn(width, hidden, device=device) * width**-0.5).requires_grad_()
        w2 = (torch.randn(hidden, classes, device=device) * hidden**-0.5).requires_grad_()
        return (lambda x: torch.matmul(torch.relu(torch.matmul(x, w1)), w2)), [w1, w2]


def honest() -> Honest:
    return Honest()


def hostile() -> Hostile:
    return Hostile()
