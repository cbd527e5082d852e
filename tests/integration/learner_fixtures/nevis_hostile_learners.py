"""Hostile learners: each tries one way to obtain what it must not, or to spend without being
charged. Used by the integration tests and by ``bench/adversaries.py``, which reads what each
obtained from its saved state (``state["obtained"]``: empty when it obtained nothing).

- ``mlp_tracked`` / ``mlp_raw``: the same MLP, trained once through ``ctx.track``-ed modules and
  once as raw tensor arithmetic (``x @ W``), which no module hook sees;
- ``meter_patcher``: switches the FLOP meter off at import, then trains the MLP;
- ``floor_topper``: trains the MLP as raw arithmetic, then tops its meter up to twice the floor
  it estimates from its own CPU time and the calibration code (importable in the sandbox);
- ``hoarder``: keeps the images ``predict`` is given (memory and ``/tmp``) and looks for them
  when it next trains;
- ``tmpfs_filler`` / ``fork_bomber`` (``resource_hog``: both): try to take the node's memory or
  process table;
- ``silent``: never finishes declaring itself;
- ``frame_forger``: writes a frame of its own to the harness's pipe claiming a 2^40-element array;
- ``two_workers_spy``: declares two workers and, if it ever runs outside a sandbox, records
  what it can see there;
- ``dev_score_swapper``: has its trained weights scored on dev by the harness (``ctx.dev_error``),
  then returns other weights in the same array, hoping the harness keeps the first score;
- ``rung_forger`` / ``state_bloater`` (``nevis_bloat_learners.py``): a forged 4096 × 4096
  proxy rung report, a state over ``NEVIS_HOST_STATE_MB``: refused before they are read;
- ``lock_signaller`` (``nevis_channel_learners.py``): signals from the predicting host to the
  next training host through file locks, and tries ``keyctl``;
- ``prepare_raiser`` / ``prepare_killer``: spend a known pass in ``prepare_task``, then raise, or
  kill their own process after a FLOP report, hoping the failed preparation is free.
"""

from __future__ import annotations

import glob
import os
import time

import numpy as np
from nevis_bloat_learners import rung_forger, state_bloater  # noqa: F401 - likewise (harness work they order)
from nevis_channel_learners import lock_signaller  # noqa: F401 - one module name for every adversary
from nevis_test_learners import HandCountedLinear, NearestMeanLearner, _flat, probe_machine

from workers.learners.protocol import Resources, TrainOutput

HIDDEN = 1024
BATCH = 256
FLOOR_STEPS = 480
"""Steps of the MLP that cost well above the floor's CPU allowance (2 s): 240 steps measured
2.4-3.5 CPU-s here from run to run (the meter-patched learner is the cheapest), once close
enough to the allowance to stay under it, where nothing is floored and the test proves
nothing; twice that keeps a margin of about two."""
HOARD_DIR = "/tmp/nevis-hoard"
_HOARD: list[np.ndarray] = []  # images kept in memory from an earlier predict


class _Mlp(NearestMeanLearner):
    """A two-layer MLP on flattened pixels; ``raw`` trains it without any torch module."""

    name = "mlp"
    raw = False

    def search_space(self):
        return {}

    def train(self, view, state, config, ctx):
        import torch

        torch.manual_seed(ctx.seed)
        data = view.train()
        x_all = torch.as_tensor(data.images.reshape(len(data.images), -1), dtype=torch.float32) / 255.0
        y_all = torch.as_tensor(np.asarray(data.labels).reshape(len(data.labels), -1)[:, 0], dtype=torch.long)
        classes, width = view.info.num_classes, x_all.shape[1]
        if self.raw:
            w1 = (torch.randn(width, HIDDEN) * width**-0.5).requires_grad_()
            w2 = (torch.randn(HIDDEN, classes) * HIDDEN**-0.5).requires_grad_()
            params = [w1, w2]

            def forward(x):
                return torch.relu(x @ w1) @ w2
        else:
            model = ctx.track(
                torch.nn.Sequential(
                    torch.nn.Linear(width, HIDDEN, bias=False),
                    torch.nn.ReLU(),
                    torch.nn.Linear(HIDDEN, classes, bias=False),
                )
            )
            params = list(model.parameters())
            forward = model
        optimiser = torch.optim.SGD(params, lr=0.01)
        for step in range(ctx.steps):
            index = torch.randint(0, len(x_all), (BATCH,))
            loss = torch.nn.functional.cross_entropy(forward(x_all[index]), y_all[index])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            ctx.progress(step + 1, None, loss=float(loss))
        means = np.zeros((classes, width), np.float32)  # predictions stay the cheap nearest-mean
        return TrainOutput(predictor=means, state={**state, "obtained": {}})


class MlpTracked(_Mlp):
    name = "mlp-tracked"


class MlpRaw(_Mlp):
    name = "mlp-raw"
    raw = True


class MeterPatcher(MlpTracked):
    """Switches its meter off: every module call and report counts nothing."""

    name = "meter-patcher"

    def __init__(self) -> None:
        from workers.sandbox.metering import flops

        flops.FlopMeter.track = lambda self, module: module
        flops.FlopMeter.watch = lambda self: self
        flops.FlopMeter.report_flops = lambda self, n: None


class FloorTopper(MlpRaw):
    """Counts nothing while it trains, then reports just enough to clear the floor it expects."""

    name = "floor-topper"

    def train(self, view, state, config, ctx):
        from workers.sandbox.metering.calibration import ALLOWANCE_S, FLOOR_FRACTION, measure_flop_rate

        rate = measure_flop_rate()  # what the harness's calibration would find on this node
        started = time.process_time()
        out = super().train(view, state, config, ctx)
        used = time.process_time() - started
        ctx.report_flops(int(2 * max(used - ALLOWANCE_S, 0.0) * rate * FLOOR_FRACTION))
        return out


class Hoarder(NearestMeanLearner):
    """Keeps the images it is asked to predict, and reports any it still finds at training."""

    name = "hoarder"

    def train(self, view, state, config, ctx):
        seen = set(state.get("dev_fingerprints", []))  # dev images are the learner's to keep
        seen.add(_fingerprint(view.dev().images))
        kept = [a for a in _HOARD if _fingerprint(a) not in seen]
        kept += [f for f in glob.glob(os.path.join(HOARD_DIR, "*.npy")) if _fingerprint(np.load(f)) not in seen]
        out = super().train(view, state, config, ctx)
        obtained = {"evaluation_images_kept": len(kept)} if kept else {}
        return TrainOutput(
            predictor=out.predictor, state={**out.state, "obtained": obtained, "dev_fingerprints": sorted(seen)}
        )

    def predict(self, predictor, images, ctx):
        _HOARD.append(np.array(images))
        os.makedirs(HOARD_DIR, exist_ok=True)
        np.save(os.path.join(HOARD_DIR, f"{time.time_ns()}.npy"), images)
        return super().predict(predictor, images, ctx)


class TmpfsFiller(NearestMeanLearner):
    """Writes 3 GiB to each RAM folder; records how much got through."""

    name = "tmpfs-filler"

    def train(self, view, state, config, ctx):
        written = {folder: _fill(folder, 3 << 30) for folder in ("/tmp", "/dev/shm")}
        out = super().train(view, state, config, ctx)
        over = {k: v for k, v in written.items() if v > 2 << 30}
        return TrainOutput(predictor=out.predictor, state={**out.state, "obtained": over, "written": written})


class ForkBomber(NearestMeanLearner):
    """Forks 4,000 sleeping children; records how many it got."""

    name = "fork-bomber"

    def train(self, view, state, config, ctx):
        made = _fork_many(4000)
        out = super().train(view, state, config, ctx)
        obtained = {"processes": made} if made >= 1000 else {}
        return TrainOutput(predictor=out.predictor, state={**out.state, "obtained": obtained, "forked": made})


class ResourceHog(NearestMeanLearner):
    """Both at once (one run for the tests): fills the RAM folders, then forks."""

    name = "resource-hog"

    def train(self, view, state, config, ctx):
        written = {folder: _fill(folder, 3 << 30) for folder in ("/tmp", "/dev/shm")}
        made = _fork_many(4000)
        out = super().train(view, state, config, ctx)
        obtained = {k: v for k, v in written.items() if v > 2 << 30}
        if made >= 1000:
            obtained["processes"] = made
        return TrainOutput(
            predictor=out.predictor, state={**out.state, "obtained": obtained, "written": written, "forked": made}
        )


class Silent(NearestMeanLearner):
    name = "silent"

    def search_space(self):
        time.sleep(3600)
        return {}


class FrameForger(NearestMeanLearner):
    """Writes a forged ``result`` frame to every pipe it can find, claiming a huge array."""

    name = "frame-forger"

    def train(self, view, state, config, ctx):
        import io
        import json
        import struct

        header = io.BytesIO()  # an .npy header claiming 2^40 float64s, and no data after it
        np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (1 << 40,)})
        npy = header.getvalue()
        head = json.dumps(
            {
                "op": "result",
                "status": "ok",
                "flops_measured": 0,
                "flops_reported": 0,
                "parts": [["a", len(npy)], ["b", 1], ["b", 1]],
            }
        ).encode()
        frame = struct.pack(">Q", len(head)) + head + npy + b"x" + b"y"
        for fd in range(3, 64):
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    os.write(fd, frame)
            except OSError:
                continue
        return super().train(view, state, config, ctx)


class DevScoreSwapper(HandCountedLinear):
    """Its trained weights scored on dev by the harness, it negates them in place (the worst
    class wins every row) and returns the same array: the harness must score what it gets."""

    name = "dev-score-swapper"

    def train(self, view, state, config, ctx):
        out = super().train(view, state, config, ctx)  # ctx.dev_error(trained weights)
        np.negative(out.predictor, out=out.predictor)  # the same array, other weights
        return out


class FailingPreparer(NearestMeanLearner):
    """One pass of a bias-free 48-wide linear layer over the train split in ``prepare_task``
    (2·N·D·48 FLOPs), a ``ctx.progress`` call (which reports it), then a raise or ``os._exit``."""

    name = "failing-preparer"
    width = 48

    def __init__(self, die: bool) -> None:
        self.die = die

    def prepare_task(self, view, state, ctx):
        import torch

        x = torch.as_tensor(_flat(view.train().images))
        with torch.no_grad():
            ctx.track(torch.nn.Linear(x.shape[1], self.width, bias=False))(x)
        ctx.progress(0, None)  # a FLOP report goes to the harness
        if self.die:
            os._exit(9)
        raise RuntimeError("prepare_task gives up after spending")


class TwoWorkersSpy(NearestMeanLearner):
    """Declares two workers; if any of its code runs, it records what it could see."""

    name = "two-workers-spy"

    def resources(self) -> Resources:
        return Resources(num_workers=2, cpus_per_worker=0.5)

    def train(self, view, state, config, ctx):
        seen = probe_machine()
        obtained = {
            k: v
            for k, v in seen.items()
            if k in ("env_secrets", "foreign_environs_with_secrets", "readable_paths", "connected") and v
        }
        if seen["visible_pids"] > 10:
            obtained["visible_pids"] = seen["visible_pids"]
        out = super().train(view, state, config, ctx)
        return TrainOutput(predictor=out.predictor, state={**out.state, "obtained": obtained})


def _fingerprint(images: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(images).tobytes()).hexdigest()[:16]


def _fill(folder: str, cap: int) -> int:
    written = 0
    try:
        with open(os.path.join(folder, "fill"), "wb") as out:
            while written < cap:
                out.write(b"x" * (1 << 22))
                written += 1 << 22
    except OSError:
        pass
    finally:
        try:
            os.unlink(os.path.join(folder, "fill"))
        except OSError:
            pass
    return written


def _fork_many(count: int) -> int:
    children = []
    for _ in range(count):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
    for pid in children:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass
    return len(children)


def mlp_tracked() -> MlpTracked:
    return MlpTracked()


def mlp_raw() -> MlpRaw:
    return MlpRaw()


def meter_patcher() -> MeterPatcher:
    return MeterPatcher()


def floor_topper() -> FloorTopper:
    return FloorTopper()


def hoarder() -> Hoarder:
    return Hoarder()


def tmpfs_filler() -> TmpfsFiller:
    return TmpfsFiller()


def fork_bomber() -> ForkBomber:
    return ForkBomber()


def resource_hog() -> ResourceHog:
    return ResourceHog()


def silent() -> Silent:
    return Silent()


def frame_forger() -> FrameForger:
    return FrameForger()


def two_workers_spy() -> TwoWorkersSpy:
    return TwoWorkersSpy()


def dev_score_swapper() -> DevScoreSwapper:
    return DevScoreSwapper()


def prepare_raiser() -> FailingPreparer:
    return FailingPreparer(die=False)


def prepare_killer() -> FailingPreparer:
    return FailingPreparer(die=True)
