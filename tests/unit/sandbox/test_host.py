"""A learner host in its sandbox: what it answers, and what it cannot reach."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import ConfigError, LearnerError, UnknownNameError
from workers.learners.protocol import LogUniform, Resources, TaskInfo, Uniform
from workers.sandbox.client import HostSpec, LearnerHost, LearnerHostDied
from workers.sandbox.launch import host_launch, resolve_sandbox
from workers.sandbox.learner_calls import SandboxedLearner, describe, predict
from workers.sandbox.ops import Features

LEARNER_SOURCE = """
import os, numpy as np
from workers.learners.protocol import Resources, TrainOutput, Uniform

class Spy:
    name = "spy"
    def search_space(self): return {"x": Uniform(0.0, 1.0)}
    def resources(self): return Resources()
    def init_state(self): return {"env": sorted(os.environ), "pids": sorted(p for p in os.listdir("/proc") if p.isdigit())}
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx):
        print("a print must not break the protocol")
        ctx.report_flops(7)
        return np.zeros((len(images), 2), np.float32)
    def features(self, predictor, images, ctx): return images.reshape(len(images), -1).astype(np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx):
        if data == b"die": os._exit(3)
        return data

def make(): return Spy()
"""

TORCH_LEARNER_SOURCE = """
import numpy as np, torch
from workers.learners.protocol import Resources

class Net:
    name = "net"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return torch.nn.Linear(48, 5)
    def features(self, predictor, images, ctx):  # never tracked: the watch counts it
        with torch.no_grad():
            return predictor(torch.as_tensor(images.reshape(len(images), -1), dtype=torch.float32)).numpy()
    def predict(self, predictor, images, ctx):
        ctx.report_flops(7)
        x = torch.as_tensor(images.reshape(len(images), -1), dtype=torch.float32)
        return ctx.track(predictor)(x).detach().numpy()

def make(): return Net()
"""

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
    num_train=0,
    num_dev=0,
)


@pytest.fixture
def spy_dir(tmp_path: Path) -> Path:
    (tmp_path / "nevis_spy.py").write_text(LEARNER_SOURCE)
    return tmp_path


@pytest.fixture(params=["bwrap", "none"])
def sandbox(request) -> str:
    if request.param == "bwrap":
        assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
    return request.param


def test_a_builtin_learner_is_described_without_importing_it_here(sandbox: str) -> None:
    import sys

    before = "workers.learners.indep" in sys.modules
    with LearnerHost(HostSpec("indep", sandbox=sandbox)) as host:
        declared = describe(host)
    assert declared.name == "indep"
    assert declared.search_space == {"learning_rate": LogUniform(1e-4, 1e-1), "label_smoothing": Uniform(0.0, 0.3)}
    assert declared.resources == Resources(gpus_per_worker=1.0, gpu_optional=True)  # the ResNet-34 prefers a GPU
    assert pickle.loads(declared.init_state) is None
    assert ("workers.learners.indep" in sys.modules) == before


def test_an_unsandboxed_host_leaves_no_scratch_folder_behind(spy_dir) -> None:
    host = LearnerHost(HostSpec("nevis_spy:make", import_paths=(str(spy_dir),), sandbox="none"))
    scratch = Path(os.readlink(f"/proc/{host.pid}/cwd"))  # unsandboxed, the host's cwd, home and TMPDIR
    (scratch / "kept-by-the-learner.npy").write_bytes(b"test images")
    assert scratch.is_dir() and scratch.name.startswith("nevis-learner-")
    host.close()
    assert not scratch.exists()


def test_the_host_sees_a_clean_environment_and_in_bwrap_no_other_process(spy_dir, sandbox, monkeypatch) -> None:
    monkeypatch.setenv("NEVIS_DATABASE_URL", "postgresql://user:secret@db/nevis")
    with LearnerHost(HostSpec("nevis_spy:make", import_paths=(str(spy_dir),), sandbox=sandbox)) as host:
        state = pickle.loads(describe(host).init_state)
    assert not [k for k in state["env"] if k.startswith(("NEVIS_", "AWS_", "PG"))]
    if sandbox == "bwrap":
        assert len(state["pids"]) <= 3  # bwrap's init and the host


def test_predictions_flops_and_prints(spy_dir) -> None:
    with LearnerHost(HostSpec("nevis_spy:make", import_paths=(str(spy_dir),))) as host:
        scores, flops = predict(host, INFO, b"p", np.zeros((3, 4, 4, 3), np.uint8), seed=0)
        assert scores.shape == (3, 2) and flops == {"flops_measured": 0, "flops_reported": 7, "flops_untracked": 0}
        learner = SandboxedLearner(host)
        handle = learner.load_predictor(b"p", INFO)
        feats = learner.features(handle, np.ones((2, 4, 4, 3), np.uint8))
        assert feats.shape == (2, 48)
        views, source = learner.augment_views(handle, np.ones((2, 4, 4, 3), np.uint8), 3, seed=1)
        assert views.shape == (2, 3, 4, 4, 3) and "fallback" in source


def test_the_probe_pools_calls_are_metered_like_a_prediction_job(tmp_path) -> None:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from workers.probe.runtime.context import AnalysisFlops, ProbeContext

    (tmp_path / "nevis_net.py").write_text(TORCH_LEARNER_SOURCE)
    with FlopCounterMode(display=False) as mode:
        torch.nn.Linear(48, 5)(torch.zeros(3, 48))
    one_pass = mode.get_total_flops()
    images = np.ones((3, 4, 4, 3), np.uint8)
    with LearnerHost(HostSpec("nevis_net:make", import_paths=(str(tmp_path),))) as host:
        learner, ctx = SandboxedLearner(host), ProbeContext(seed=0)
        handle = learner.load_predictor(b"p", INFO, ctx)
        assert ctx.flops == AnalysisFlops()  # loading ran no pass
        learner.features(handle, images, ctx)
        assert ctx.flops == AnalysisFlops(measured=one_pass, untracked=one_pass)
        learner.predict(handle, images, ctx)
        learner.augment_views(handle, images, 2, seed=0, ctx=ctx)  # harness crops: no module
        assert ctx.flops == AnalysisFlops(measured=2 * one_pass, reported=7, untracked=one_pass)
        assert ctx.flops.total == 2 * one_pass + 7
        learner.features(handle, images)  # without a tally the figure is dropped, not an error
    assert ctx.flops.total == 2 * one_pass + 7


def test_a_host_that_dies_is_reported_as_such(spy_dir) -> None:
    with LearnerHost(HostSpec("nevis_spy:make", import_paths=(str(spy_dir),))) as host:
        with pytest.raises(LearnerHostDied, match="exit code 3"):
            SandboxedLearner(host).load_predictor(b"die", INFO)
        assert not host.alive


def test_unknown_learners_and_learner_errors_keep_their_kind(spy_dir) -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'indep'"):
        LearnerHost(HostSpec("indepp"))
    with LearnerHost(HostSpec("nevis_spy:make", import_paths=(str(spy_dir),))) as host:
        with pytest.raises(LearnerError, match="features failed: LearnerError: predictor handle 99"):
            host.call(Features(99), [np.zeros((1, 4, 4, 3), np.uint8)])


def test_the_sandbox_setting_resolves_and_refuses_what_is_missing(monkeypatch) -> None:
    assert resolve_sandbox("none") == "none"
    with pytest.raises(ConfigError, match="NEVIS_SANDBOX"):
        resolve_sandbox("docker")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match="bubblewrap"):
        resolve_sandbox("bwrap")
    assert resolve_sandbox("auto") == "none"


def test_bwrap_gets_no_environment_and_binds_only_what_it_needs(tmp_path) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
    launch = host_launch(sandbox="bwrap", import_paths=[str(tmp_path), "/nonexistent"])
    assert launch.env == {"PATH": "/usr/bin:/bin"}
    argv = list(launch.argv)
    assert "--unshare-all" in argv and "--clearenv" in argv
    binds = {argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}
    assert str(tmp_path) in binds and "/nonexistent" not in binds
    assert not any(b == "/" or b == os.path.expanduser("~") for b in binds)


def test_learner_code_cannot_make_a_user_namespace_of_its_own(tmp_path) -> None:
    """bwrap needs user namespaces (so the pods' seccomp profile allows them); code inside it
    must not get any: the kernel's namespace code stays out of a learner's reach."""
    import subprocess
    import sys

    from workers.sandbox.launch import can_disable_userns

    assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
    assert can_disable_userns(shutil.which("bwrap")), "bubblewrap >= 0.8.0 is needed (--disable-userns)"
    launch = host_launch(sandbox="bwrap", import_paths=[str(tmp_path)])
    argv = list(launch.argv)
    assert "--disable-userns" in argv
    probe = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        "print(libc.unshare(0x10000000), ctypes.get_errno())"
    )  # CLONE_NEWUSER
    command_at = len(argv) - argv[::-1].index("--")  # after bwrap's own "--" (prlimit has one before it)
    try:
        inside = subprocess.run(
            [*argv[:command_at], sys.executable, "-c", probe],
            env=launch.env,
            cwd=launch.cwd,
            pass_fds=launch.pass_fds,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        launch.close_fds()
    result, errno = map(int, inside.stdout.split())
    assert result == -1 and errno != 0, inside.stdout
    outside = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert outside.stdout.split()[0] == "0"  # the same call is allowed here: the flag is what refuses it
