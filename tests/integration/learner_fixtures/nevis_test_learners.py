"""Learners used by the integration tests, importable by Ray workers as ``module:factory``.

- ``NearestMeanLearner``: a numpy learner (no torch) that reports its own FLOPs, so the
  "reported" path of the FLOP accounting is exercised and runs take seconds.
- ``CheatingLearner``: tries every way we could think of to see a future task or a test
  label, records what happened in its state (which the test reads back), and otherwise
  behaves like the nearest-mean learner.
- ``CrashingLearner`` / ``MalformedLearner``: a learner that raises, and one whose
  predictions have the wrong shape.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
from typing import Any

import numpy as np

from workers.learners.indep import IndepLearner
from workers.learners.protocol import Choice, Resources, TrainOutput, Uniform


def _flat(images: np.ndarray) -> np.ndarray:
    return images.reshape(len(images), -1).astype(np.float32) / 255.0


class NearestMeanLearner:
    """Class means of flattened pixels; scores are negative squared distances."""

    name = "nearest-mean"

    def search_space(self):
        return {"shrink": Choice((0.0, 0.5))}

    def resources(self) -> Resources:
        return Resources()

    def init_state(self) -> Any:
        return {"tasks_seen": []}

    def train(self, view, state, config, ctx):
        data = view.train()
        x = _flat(data.images)
        y = data.labels if data.labels.ndim == 2 else np.eye(view.info.num_classes)[data.labels]
        counts = np.maximum(y.sum(axis=0), 1.0)
        means = (y.T @ x) / counts[:, None]
        means = (1 - config["shrink"]) * means + config["shrink"] * x.mean(axis=0)
        ctx.report_flops(2 * x.shape[0] * x.shape[1] * y.shape[1])
        for step in range(ctx.steps + 1):
            ctx.progress(step, means, loss=1.0 / (step + 1))
        new_state = dict(state)
        new_state["tasks_seen"] = [*state["tasks_seen"], view.info.order]
        return TrainOutput(predictor=means, state=new_state)

    def predict(self, predictor, images, ctx):
        x = _flat(images)
        ctx.report_flops(3 * x.shape[0] * x.shape[1] * predictor.shape[0])
        return -((x[:, None, :] - predictor[None, :, :]) ** 2).sum(axis=2)

    def features(self, predictor, images, ctx):
        return _flat(images)

    def save_predictor(self, predictor) -> bytes:
        return pickle.dumps(predictor)

    def load_predictor(self, data, info, ctx):
        return pickle.loads(data)


def _attempt(log: dict[str, str], name: str, fn) -> None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - recording what happened is the point
        log[name] = type(exc).__name__
    else:
        log[name] = "ALLOWED"


def _array_fingerprints() -> set[str]:
    """Hashes of every numpy array alive in this process (what a snooping learner could find)."""
    out = set()
    for obj in gc.get_objects():
        if type(obj) is np.ndarray and obj.size:
            try:
                out.add(hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest())
            except Exception:  # noqa: BLE001 - exotic arrays cannot hold a split
                continue
    return out


TARGETS_FILE = "nevis_cheat_targets.json"  # written by a test beside the learners it imports
SECRET_MARKERS = (b"NEVIS_DATABASE_URL=", b"NEVIS_STORE_URL=", b"AWS_SECRET_ACCESS_KEY=", b"PGPASSWORD=")


def _targets() -> dict[str, Any]:
    """What a test asks the learner to try and reach (files, ports), if it wrote any."""
    import json
    import sys

    for folder in sys.path:
        candidate = os.path.join(folder or ".", TARGETS_FILE)
        if os.path.isfile(candidate):
            with open(candidate) as handle:
                return json.load(handle)
    return {}


def probe_machine() -> dict[str, Any]:
    """Everything outside its task a hostile learner tries to obtain, and what it got."""
    import socket

    got: dict[str, Any] = {}
    got["env_secrets"] = sorted(
        k for k, v in os.environ.items() if v and (k.startswith(("NEVIS_", "AWS_", "PG")) or "TOKEN" in k)
    )
    foreign = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if any(marker in environ for marker in SECRET_MARKERS):
            foreign.append(int(pid))
    got["foreign_environs_with_secrets"] = foreign
    got["visible_pids"] = sum(p.isdigit() for p in os.listdir("/proc"))
    targets = _targets()
    readable = []
    for path in targets.get("paths", []):
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as handle:
                    handle.read(16)
            readable.append(path)
        except OSError:
            continue
    got["readable_paths"] = readable
    connected = []
    for host, port in [tuple(t) for t in targets.get("ports", [])]:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            connected.append(f"{host}:{port}")
        except OSError:
            continue
    got["connected"] = connected
    got["targets"] = bool(targets)
    return got


class CheatingLearner(NearestMeanLearner):
    """Tries to reach test data and future tasks; records the outcome of every attempt."""

    name = "cheater"

    def train(self, view, state, config, ctx):
        log: dict[str, str] = {}
        order = view.info.order
        _attempt(log, "view.test()", lambda: view.test())
        _attempt(log, "view.dev_test()", lambda: view.dev_test())
        _attempt(log, "view.split('test')", lambda: view.split("test"))
        _attempt(log, "view.split('dev_test', past)", lambda: view.split("dev_test", max(order - 1, 1)))
        _attempt(
            log,
            "view.split('dev', past)",
            lambda: view.split("dev", max(order - 1, 1)) if order > 1 else view.split("dev", 0),
        )
        _attempt(log, "view.past_train(future)", lambda: view.past_train(order + 1))
        _attempt(log, "view.split('train', future)", lambda: view.split("train", order + 1))
        _attempt(log, "view.past_train(unknown)", lambda: view.past_train(10_000))
        _attempt(log, "view.past_train('1')", lambda: view.past_train("1"))
        # Reach behind the view: its slots hold only train, dev and past metadata.
        _attempt(log, "view.__dict__", lambda: view.__dict__)
        harness = next((o for o in gc.get_objects() if type(o).__name__ == "ActorHandle"), None)
        if harness is not None:
            import ray

            _attempt(log, "harness.past_train(future)", lambda: ray.get(harness.past_train.remote(order + 1)))
            _attempt(log, "harness.past_train(current)", lambda: ray.get(harness.past_train.remote(order)))
            _attempt(log, "harness.put(outside)", lambda: ray.get(harness.put.remote("datasets/x/evil.bin", b"x")))
        # Credentials: none of the storage variables may point anywhere real.
        creds = {k: os.environ.get(k, "") for k in ("NEVIS_DATABASE_URL", "NEVIS_STORE_URL", "NEVIS_DATA_DIR")}
        past = [t.order for t in view.past_tasks()]
        past_ok = all(len(view.past_train(p)) > 0 for p in past)
        new = super().train(view, state, config, ctx)
        record = {
            "order": order,
            "log": log,
            "creds": creds,
            "past": past,
            "past_ok": past_ok,
            "arrays": sorted(_array_fingerprints()),
            "machine": probe_machine(),
        }
        state_out = dict(new.state)
        state_out["cheats"] = [*state.get("cheats", []), record]
        return TrainOutput(new.predictor, state_out)

    def predict(self, predictor, images, ctx):
        # Whatever arrays exist in the prediction process are recorded by the test through
        # the features call below; predict itself only ever receives images.
        if not isinstance(images, np.ndarray) or images.ndim != 4:
            raise TypeError(f"predict got {type(images)} {getattr(images, 'shape', None)}")
        return super().predict(predictor, images, ctx)


class CrashingLearner(NearestMeanLearner):
    name = "crasher"

    def train(self, view, state, config, ctx):
        ctx.report_flops(1000)
        raise RuntimeError(f"boom on task {view.info.order}")


class MalformedLearner(NearestMeanLearner):
    name = "malformed"

    def predict(self, predictor, images, ctx):
        return np.zeros((len(images), 1))


def nearest_mean() -> NearestMeanLearner:
    return NearestMeanLearner()


def cheater() -> CheatingLearner:
    return CheatingLearner()


def crasher() -> CrashingLearner:
    return CrashingLearner()


def malformed() -> MalformedLearner:
    return MalformedLearner()


class SlowLearner(NearestMeanLearner):
    """Nearest mean, but each trial takes a while: leaves time to kill a run mid-task."""

    name = "slow"

    def train(self, view, state, config, ctx):
        import time

        time.sleep(2.0)
        return super().train(view, state, config, ctx)


def slow() -> SlowLearner:
    return SlowLearner()


class SlowPredictLearner(NearestMeanLearner):
    """Nearest mean whose predictions take a while: leaves time to kill whoever asked."""

    name = "slow-predict"

    def predict(self, predictor, images, ctx):
        import time

        time.sleep(2.0)
        return super().predict(predictor, images, ctx)


def slow_predict() -> SlowPredictLearner:
    return SlowPredictLearner()


class TwoWorkerLearner(NearestMeanLearner):
    """Nearest mean on a two-worker Ray Train group: each rank fits its half of the data."""

    name = "two-worker"

    def resources(self) -> Resources:
        return Resources(num_workers=2, cpus_per_worker=0.5)

    def train(self, view, state, config, ctx):
        if ctx.world_size != 2 or ctx.rank not in (0, 1):
            raise RuntimeError(f"expected a 2-worker group, got rank {ctx.rank} of {ctx.world_size}")
        return super().train(view, state, config, ctx)


def two_workers() -> TwoWorkerLearner:
    return TwoWorkerLearner()


class BadEvaluationLearner(NearestMeanLearner):
    """Scores the dev split fine, then fails when the harness evaluates on held-out images."""

    name = "bad-evaluation"

    def load_predictor(self, data, info, ctx):
        raise ValueError("cannot load my own checkpoint")


def bad_evaluation() -> BadEvaluationLearner:
    return BadEvaluationLearner()


class GradedLearner(NearestMeanLearner):
    """Nearest means blurred by a searched amount of noise: trials differ in dev error by
    their config, so early stopping has something to compare. Pays 1,000 FLOPs per step."""

    name = "graded"

    def search_space(self):
        return {"noise": Uniform(0.0, 3.0)}

    def train(self, view, state, config, ctx):
        data = view.train()
        x = _flat(data.images)
        y = data.labels if data.labels.ndim == 2 else np.eye(view.info.num_classes)[data.labels]
        means = (y.T @ x) / np.maximum(y.sum(axis=0), 1.0)[:, None]
        predictor = {"means": means, "noise": float(config["noise"]), "seed": ctx.seed}
        for step in range(ctx.steps + 1):
            ctx.report_flops(1000)
            ctx.progress(step, predictor, loss=1.0 / (step + 1))
        return TrainOutput(predictor=predictor, state=state)

    def predict(self, predictor, images, ctx):
        clean = super().predict(predictor["means"], images, ctx)
        rng = np.random.default_rng(predictor["seed"])
        return clean + predictor["noise"] * clean.std() * rng.standard_normal(clean.shape)


def graded() -> GradedLearner:
    return GradedLearner()


class DdpIndep(IndepLearner):
    """The built-in Indep network on a two-worker group with DistributedDataParallel; after
    training, every rank checks that all ranks hold the same weights (DDP's promise)."""

    name = "ddp-indep"

    def __init__(self) -> None:
        super().__init__("small_cnn", width=8, workers=2)

    def resources(self) -> Resources:
        return Resources(num_workers=2, cpus_per_worker=0.5)

    def train(self, view, state, config, ctx):
        import torch
        import torch.distributed as dist

        out = super().train(view, state, config, ctx)
        checksum = torch.stack([p.detach().double().sum() for p in out.predictor.model.parameters()]).sum()
        gathered = [torch.zeros((), dtype=torch.float64) for _ in range(ctx.world_size)]
        dist.all_gather(gathered, checksum.reshape(()))
        if len({float(g) for g in gathered}) != 1:
            raise RuntimeError(f"ranks disagree on the weights: {gathered}")
        return out


def ddp_indep() -> DdpIndep:
    return DdpIndep()


def one_worker_indep() -> IndepLearner:
    return IndepLearner("small_cnn", width=8)


def gpu_preferring_indep() -> IndepLearner:
    """The paper's ResNet-34 (narrow): asks for a GPU per trial, optionally."""
    return IndepLearner("resnet34", width=4)


class KilledMidway(NearestMeanLearner):
    """Trains a tracked torch layer for three steps, waits past one FLOP-report interval,
    reports progress (which sends its FLOPs so far to harness code), then kills its own
    process with SIGKILL: nothing of it survives but what the harness already heard."""

    name = "killed-midway"

    def train(self, view, state, config, ctx):
        import os
        import signal
        import time

        import torch

        from workers.sandbox.context import FLOP_REPORT_INTERVAL_S

        layer = ctx.track(torch.nn.Linear(64, 64))
        ctx.progress(0, None)
        for step in range(1, 4):
            layer(torch.randn(256, 64)).sum().backward()
            ctx.progress(step, None, loss=1.0)
        time.sleep(FLOP_REPORT_INTERVAL_S + 0.2)
        ctx.progress(4, None, loss=1.0)
        os.kill(os.getpid(), signal.SIGKILL)


def killed_midway() -> KilledMidway:
    return KilledMidway()


class FailingTwoWorkers(TwoWorkerLearner):
    """Each of two ranks reports 1,000 FLOPs of work (its first ``progress`` call sends them to
    harness code), waits for the other, then fails."""

    name = "failing-two-workers"

    def train(self, view, state, config, ctx):
        import torch.distributed as dist

        ctx.report_flops(1000)
        ctx.progress(0, None)
        dist.barrier()
        raise RuntimeError(f"rank {ctx.rank} gives up")


def failing_two_workers() -> FailingTwoWorkers:
    return FailingTwoWorkers()


class _NoTrack:
    """A trial context whose ``track`` does nothing; everything else is the real context's."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    def track(self, module: Any) -> Any:
        return module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


class UntrackedIndep(IndepLearner):
    """``one_worker_indep`` with every ``ctx.track`` call dropped: the harness must count
    its network anyway (tests/integration/test_untracked_flops.py)."""

    name = "untracked-indep"

    def __init__(self) -> None:
        super().__init__("small_cnn", width=8)

    def train(self, view, state, config, ctx):
        return super().train(view, state, config, _NoTrack(ctx))

    def predict(self, predictor, images, ctx):
        return super().predict(predictor, images, _NoTrack(ctx))

    def features(self, predictor, images, ctx):
        return super().features(predictor, images, _NoTrack(ctx))

    def load_predictor(self, data, info, ctx):
        return super().load_predictor(data, info, _NoTrack(ctx))


def untracked_indep() -> UntrackedIndep:
    return UntrackedIndep()


class HandCountedLinear(NearestMeanLearner):
    """A bias-free linear layer whose every FLOP can be counted by hand
    (tests/integration/test_flops_by_purpose.py): each step a forward with gradients on and a
    backward to the weight only (2·B·D·K each), the final weights validated on dev through the
    harness's ``ctx.dev_error`` (one ``predict`` pass, 2·N_dev·D·K, which is also the harness's
    dev scoring of the returned predictor), and ``predict`` with gradients off (2·N·D·K)."""

    name = "hand-counted-linear"
    batch = 8

    def search_space(self):
        return {}

    def train(self, view, state, config, ctx):
        import torch

        data = view.train()
        x = torch.as_tensor(_flat(data.images))
        y = torch.as_tensor(np.asarray(data.labels).reshape(len(data.labels), -1)[:, 0], dtype=torch.long)
        layer = ctx.track(torch.nn.Linear(x.shape[1], view.info.num_classes, bias=False))
        optimiser = torch.optim.SGD(layer.parameters(), lr=0.1)
        generator = torch.Generator().manual_seed(ctx.seed)
        for step in range(ctx.steps):
            index = torch.randint(0, len(x), (self.batch,), generator=generator)
            loss = torch.nn.functional.cross_entropy(layer(x[index]), y[index])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            ctx.progress(step + 1, None, loss=float(loss))
        predictor = layer.weight.detach().numpy().copy()
        seen = ctx.dev_error(predictor)  # the learner's validation is the harness's dev pass
        return TrainOutput(predictor=predictor, state={**state, "dev_error_seen": seen})

    def predict(self, predictor, images, ctx):
        import torch

        layer = ctx.track(torch.nn.Linear(predictor.shape[1], predictor.shape[0], bias=False))
        with torch.no_grad():
            layer.weight.copy_(torch.as_tensor(predictor))
            return layer(torch.as_tensor(_flat(images))).numpy()


def hand_counted_linear() -> HandCountedLinear:
    return HandCountedLinear()


class RankOneSpends(TwoWorkerLearner):
    """Two sandboxed ranks where rank 1 does (reports) nearly all the work and rank 0 next to
    none, slowly: a task cap reached only by rank 1's FLOPs must stop the trial (issue 46)."""

    name = "rank-one-spends"

    def train(self, view, state, config, ctx):
        import time

        if ctx.rank == 1:
            ctx.report_flops(10**12)
            ctx.progress(0, None)  # the first progress() sends the FLOPs so far to the harness
        time.sleep(8.0)  # rank 0 alone would finish well under the cap after this
        return super().train(view, state, config, ctx)


def rank_one_spends() -> RankOneSpends:
    return RankOneSpends()
