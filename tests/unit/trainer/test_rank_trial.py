"""A two-worker trial as sandboxed ranks (default settings: bubblewrap): two learner hosts
train one network with torch.distributed (gloo) over the trial's private loopback, rank 0's
trial is the one recorded, every rank's FLOPs and CPU time are summed, and a rank reaches
neither the machine's loopback nor its environment.

The learner hosts, bwrap, the network namespace and gloo are real; the task's harness actor
is a plain object whose methods answer ``.remote(...)`` at once (as in test_trial_in_host.py).
"""

from __future__ import annotations

import os
import pickle
import socket
from pathlib import Path

import numpy as np
import pytest

from tests.unit.trainer.test_trial_in_host import Harness
from workers.learners.protocol import LabelledData, Resources, TaskInfo
from workers.sandbox.client import HostSpec
from workers.trainer.rank_trial import run_ranked_trial, sandboxed_ranks
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, TrialSpec

SECRET = "nevis-rank-secret-4711"

LEARNER_SOURCE = '''
import os, socket
import numpy as np
from workers.learners.protocol import Resources, TrainOutput

class Ddp:
    """A linear layer under DistributedDataParallel, each rank on its half of the data; then
    it looks around: the first process's environment and the machine's loopback."""
    name = "ddp-linear"
    def search_space(self): return {}
    def resources(self): return Resources(num_workers=2, cpus_per_worker=0.5)
    def init_state(self): return None
    def train(self, view, state, config, ctx):
        import torch, torch.distributed as dist
        assert dist.is_initialized()  # by the host, env://: MASTER_ADDR 127.0.0.1, RANK, WORLD_SIZE
        assert (dist.get_rank(), dist.get_world_size()) == (ctx.rank, ctx.world_size) == (ctx.rank, 2)
        torch.manual_seed(0)
        model = ctx.track(torch.nn.Linear(48, 2))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        data = view.train()
        x = torch.tensor(data.images.reshape(len(data.images), -1)[ctx.rank::2] / 255.0, dtype=torch.float32)
        y = torch.tensor(data.labels[ctx.rank::2])
        for step in range(ctx.steps + 1):
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            ctx.progress(step, model, loss=float(loss.detach()))
        total = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
        gathered = [torch.zeros(1, dtype=torch.float64) for _ in range(2)]
        dist.all_gather(gathered, total)
        if float(gathered[0]) != float(gathered[1]):
            raise RuntimeError(f"ranks disagree on the weights: {gathered}")
        try:
            seen = open('/proc/1/environ', 'rb').read()
        except OSError as exc:
            seen = repr(exc)
        print(f"rank {ctx.rank} environ of pid 1: {seen!r}", flush=True)
        print(f"rank {ctx.rank} ray session folder: {os.path.exists('/tmp/ray')}", flush=True)
        for address in (("127.0.0.1", int(config["outside_port"])), ("1.1.1.1", 53)):
            try:
                socket.create_connection(address, timeout=2).close()
                print(f"rank {ctx.rank} REACHED {address}", flush=True)
            except OSError as exc:
                print(f"rank {ctx.rank} cannot reach {address}: {exc}", flush=True)
        return TrainOutput(predictor=model, state={"rank": ctx.rank})
    def predict(self, predictor, images, ctx):
        import torch
        with torch.no_grad():
            return predictor(torch.tensor(images.reshape(len(images), -1), dtype=torch.float32)).numpy()
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor):
        import io, torch
        out = io.BytesIO(); torch.save(predictor.state_dict(), out); return out.getvalue()
    def load_predictor(self, data, info, ctx): raise NotImplementedError

def make(): return Ddp()
'''

INFO = TaskInfo(
    order=1,
    key="t",
    dataset="t",
    title="t",
    year=2000,
    domain=None,
    kind="single",
    num_classes=2,
    class_names=("a", "b"),
    image_size=4,
    num_train=8,
    num_dev=2,
)


@pytest.fixture(autouse=True)
def harness_without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setattr(ray, "get", lambda answer: answer)


def test_two_gloo_ranks_train_in_learner_hosts_on_a_loopback_of_their_own(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NEVIS_TEST_SECRET", SECRET)  # in the harness's environment, never a rank's
    (tmp_path / "nevis_ddp_ranks.py").write_text(LEARNER_SOURCE)
    rng = np.random.default_rng(0)
    train = LabelledData(rng.integers(0, 255, (8, 4, 4, 3), dtype=np.uint8), np.arange(8) % 2)
    dev = LabelledData(rng.integers(0, 255, (2, 4, 4, 3), dtype=np.uint8), np.arange(2) % 2)
    harness = Harness()
    host = HostSpec("nevis_ddp_ranks:make", import_paths=(str(tmp_path),))  # sandbox "auto": bwrap here
    resources = Resources(num_workers=2, cpus_per_worker=0.5)
    assert sandboxed_ranks(resources, host.sandbox)
    spec = TrialSpec(
        host=host,
        info=INFO,
        past=(),
        stream_length=1,
        steps=3,
        checkpoint_fractions=(1.0,),
        state=pickle.dumps(None),
        train=train,
        dev=dev,
        key_prefix="runs/r/t1/a1",
        harness=harness,
    )
    with socket.socket() as outside:  # a service on the machine's own loopback
        outside.bind(("127.0.0.1", 0))
        outside.listen()
        config = {TRIAL_INDEX: 0, TRIAL_SEED: 1, "outside_port": outside.getsockname()[1]}
        metrics = run_ranked_trial(config, spec, resources)
    logs = {k.rsplit("/", 1)[1]: v.decode() for k, v in harness.stored.items() if "/log" in k}
    assert metrics["status"] == "ok", (metrics.get("error"), logs)
    assert metrics["num_workers"] == 2 and [c["step"] for c in metrics["checkpoints"]] == [3]
    assert "runs/r/t1/a1/trial-000/predictor.bin" in harness.stored
    # both ranks trained the same steps on half the rows each: the sum is about twice rank 0's
    assert metrics["flops_measured"] > 0 and metrics["cpu_seconds"] > 0
    assert set(logs) == {"log.txt", "log-rank-1.txt"}
    for rank, log in enumerate((logs["log.txt"], logs["log-rank-1.txt"])):
        assert f"rank {rank} environ of pid 1" in log and SECRET not in log
        assert f"rank {rank} cannot reach ('127.0.0.1'" in log and f"rank {rank} cannot reach ('1.1.1.1'" in log
        assert "REACHED" not in log
        assert f"rank {rank} ray session folder: False" in log  # the machine's /tmp is not the rank's
    assert not [p for p in os.listdir("/dev/shm") if p.startswith("nevis-ranks-")]  # the group's /dev/shm is gone


def test_a_rank_that_fails_ends_its_group_and_the_trial_names_it(tmp_path: Path) -> None:
    """Rank 1 raises before any collective: rank 0, waiting for it in one, is closed at once
    rather than at a deadline, and the trial's error leads with rank 1's."""
    source = LEARNER_SOURCE.replace(
        "        torch.manual_seed(0)\n",
        "        if ctx.rank == 1:\n            raise ValueError('rank one gives up')\n        torch.manual_seed(0)\n",
        1,
    )
    (tmp_path / "nevis_ddp_quitter.py").write_text(source)
    data = LabelledData(np.zeros((4, 4, 4, 3), np.uint8), np.arange(4) % 2)
    harness = Harness()
    spec = TrialSpec(
        host=HostSpec("nevis_ddp_quitter:make", import_paths=(str(tmp_path),)),
        info=INFO,
        past=(),
        stream_length=1,
        steps=2,
        checkpoint_fractions=(1.0,),
        state=pickle.dumps(None),
        train=data,
        dev=data,
        key_prefix="runs/r/t1/a1",
        harness=harness,
    )
    metrics = run_ranked_trial(
        {TRIAL_INDEX: 0, TRIAL_SEED: 1, "outside_port": 1}, spec, Resources(num_workers=2, cpus_per_worker=0.5)
    )
    assert metrics["status"] == "failed"
    assert metrics["error"].startswith("rank 1: ValueError: rank one gives up"), metrics["error"]
    assert "predictor" not in metrics and metrics["host_wall_s"] < 120


def test_each_rank_of_a_gpu_trial_is_given_its_own_card(monkeypatch) -> None:
    """No GPU here: what is checked is the launch, which cards a rank's host is shown."""
    from workers.sandbox.launch import host_launch
    from workers.sandbox.rank_net import RankSlot

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    launch = host_launch(sandbox="bwrap", gpu=True, rank=RankSlot(1, 2, holder_pid=1))
    launch.close_fds()  # the seccomp program's descriptor: no host is started here
    argv = launch.argv
    assert argv[argv.index("CUDA_VISIBLE_DEVICES") + 1] == "5"
    assert "--share-net" in argv and "--net=/proc/1/ns/net" in argv and argv[argv.index("WORLD_SIZE") + 1] == "2"
    assert RankSlot(0, 4).own_gpus("2,5") == "2,5"  # four ranks on two cards share them
