"""A learner host's caps and deadlines, tried by hostile learners in the real sandbox: RAM
folders stop at their size, a fork bomb at the process cap, a big file at the file-size
cap, a silent learner at its deadline; the CPU time it burns is counted outside its reach."""

from __future__ import annotations

import time

import numpy as np
import pytest

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostDeadlineError, HostSpec, LearnerHost
from workers.sandbox.learner_calls import describe, predict
from workers.sandbox.limits import MIB, HostLimits

HOSTILE_SOURCE = """
import os, time, errno, numpy as np
from workers.learners.protocol import Resources

def fill(folder, cap):
    written = 0
    try:
        with open(os.path.join(folder, "fill"), "wb") as out:
            while written < cap:
                out.write(b"x" * (1 << 20))
                out.flush()
                written += 1 << 20
    except OSError as exc:
        return written, exc.errno
    return written, 0

def fork_bomb(count):
    children, refused = [], 0
    for _ in range(count):
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            continue
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return len(children), refused

def burn(seconds):
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1
    return x

class Hostile:
    name = "hostile"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data.decode()
    def features(self, predictor, images, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx):
        what = predictor
        if what == "fill":
            tmp, shm = fill("/tmp", 256 << 20), fill("/dev/shm", 256 << 20)
            return np.array([[tmp[0], tmp[1]], [shm[0], shm[1]]], dtype=np.float64)
        if what == "bigfile":
            size, code = fill("/tmp", 64 << 20)
            return np.array([[size, code]], dtype=np.float64)
        if what == "forks":
            made, refused = fork_bomb(200)
            return np.array([[made, refused]], dtype=np.float64)
        if what == "burn":
            burn(1.5)
            return np.zeros((1, 2))
        if what == "hang":
            time.sleep(3600)
        return np.zeros((1, 2))

class Silent(Hostile):
    def search_space(self):
        time.sleep(3600)

def make(): return Hostile()
def silent(): return Silent()
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
    image_size=8,
    num_train=0,
    num_dev=0,
)
IMAGES = np.zeros((1, 8, 8, 3), np.uint8)


@pytest.fixture
def learner_dir(tmp_path):
    (tmp_path / "hostile_limits.py").write_text(HOSTILE_SOURCE)
    return str(tmp_path)


def _ask(host: LearnerHost, what: str) -> np.ndarray:
    scores, _ = predict(host, INFO, what.encode(), IMAGES, seed=0)
    return scores


def test_ram_folders_stop_at_their_size_and_big_files_at_the_file_cap(learner_dir):
    limits = HostLimits(tmpfs_bytes=32 * MIB, file_bytes=16 * MIB)
    with LearnerHost(HostSpec("hostile_limits:make", (learner_dir,), "bwrap", limits=limits)) as host:
        (tmp_written, tmp_errno), (shm_written, shm_errno) = _ask(host, "fill")
        assert tmp_written <= 16 * MIB and tmp_errno != 0  # the file cap comes first
        assert shm_written <= 16 * MIB and shm_errno != 0
    limits = HostLimits(tmpfs_bytes=8 * MIB)
    with LearnerHost(HostSpec("hostile_limits:make", (learner_dir,), "bwrap", limits=limits)) as host:
        ((written, code),) = _ask(host, "bigfile")
        assert written <= 8 * MIB and code == 28  # ENOSPC: the folder is full, the node is not


def test_a_fork_bomb_stops_at_the_process_cap(learner_dir):
    limits = HostLimits(pids=48)
    with LearnerHost(HostSpec("hostile_limits:make", (learner_dir,), "bwrap", limits=limits)) as host:
        if host.cpu_seconds() is None or host._cgroup is None:
            pytest.fail("this machine offers no control group for learner hosts; the test needs one")
        ((made, refused),) = _ask(host, "forks")
        assert made < 48 and refused > 150


def test_cpu_time_is_counted_outside_the_sandbox(learner_dir):
    with LearnerHost(HostSpec("hostile_limits:make", (learner_dir,), "bwrap")) as host:
        before = host.cpu_seconds()
        _ask(host, "burn")
        after = host.cpu_seconds()
        assert before is not None and after is not None
        assert 1.3 <= after - before <= 5.0


def test_a_silent_declaration_ends_at_its_deadline_naming_it(learner_dir):
    limits = HostLimits(declare_deadline_s=10.0)  # start-up (imports) must fit in it too
    started = time.monotonic()
    with LearnerHost(HostSpec("hostile_limits:silent", (learner_dir,), "bwrap", limits=limits)) as host:
        with pytest.raises(HostDeadlineError, match="'describe' sent nothing for 10 s .the declaration deadline"):
            describe(host)
    assert time.monotonic() - started < 60


def test_a_silent_prediction_ends_at_the_silence_deadline(learner_dir):
    limits = HostLimits(silence_deadline_s=2.0)
    with LearnerHost(HostSpec("hostile_limits:make", (learner_dir,), "bwrap", limits=limits)) as host:
        with pytest.raises(HostDeadlineError, match="silence deadline"):
            _ask(host, "hang")
        assert not host.alive
