"""A learner host's CPU quota (issue 44): a learner held to a tenth of a CPU that forks
spinning processes gets a tenth of a CPU's time, not the node's cores. The quota is the
host's control group's CFS quota (v1 ``cpu.cfs_quota_us``, v2 ``cpu.max``); the real-sandbox
test needs a writable cgroup hierarchy (this CI machine: v1)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from workers.learners.protocol import TaskInfo
from workers.sandbox.cgroup import CPU_PERIOD_US, CgroupLimits, create_host_cgroup
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.learner_calls import predict
from workers.sandbox.limits import HostLimits

SPINNER = '''
import os, time, numpy as np
from workers.learners.protocol import Resources

class Spinner:
    """Predicts after two forked processes each spin for ``predictor`` seconds of wall time."""
    name = "spinner"
    def search_space(self): return {}
    def resources(self): return Resources(cpus_per_worker=0.25)
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return float(data.decode())
    def features(self, predictor, images, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx):
        children = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                end = time.monotonic() + predictor
                while time.monotonic() < end:
                    pass
                os._exit(0)
            children.append(pid)
        for pid in children:
            os.waitpid(pid, 0)
        return np.zeros((len(images), 2))

def make(): return Spinner()
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
    image_size=8,
    num_train=0,
    num_dev=0,
)


@pytest.mark.parametrize(("cpus", "quota"), [(None, None), (0.0, None), (0.25, 25_000), (2, 200_000), (1e-6, 1000)])
def test_the_quota_is_the_declared_cpus_of_a_period(cpus, quota) -> None:
    assert CgroupLimits(cpus=cpus).quota_us() == quota


def test_a_v2_group_gets_cpu_max(tmp_path: Path) -> None:
    """A stand-in v2 tree: the group's ``cpu.max`` holds the quota and the period."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    group = create_host_cgroup(CgroupLimits(cpus=1.5), root=tmp_path)
    assert group is not None and group.version == 2
    assert (group.folders[""] / "cpu.max").read_text() == f"150000 {CPU_PERIOD_US}"


def test_a_v1_group_gets_its_cfs_quota(tmp_path: Path) -> None:
    """A stand-in v1 tree with a ``cpu`` hierarchy: quota and period are written there."""
    for controller in ("cpu", "cpuacct"):
        (tmp_path / controller).mkdir()
        (tmp_path / controller / "cgroup.procs").write_text("")
    own = Path(f"/proc/{os.getpid()}/cgroup").read_text()
    if any(
        line.split(":")[1] in ("cpu", "cpu,cpuacct", "cpuacct,cpu") and line.split(":")[2] != "/"
        for line in own.splitlines()
    ):
        pytest.fail("this test expects the process at the root of its cpu hierarchy (a CI container)")
    group = create_host_cgroup(CgroupLimits(cpus=0.5), root=tmp_path)
    assert group is not None and group.version == 1
    assert (group.folders["cpu"] / "cpu.cfs_quota_us").read_text() == "50000"
    assert (group.folders["cpu"] / "cpu.cfs_period_us").read_text() == str(CPU_PERIOD_US)


def test_a_host_that_declared_a_tenth_of_a_cpu_gets_a_tenth_of_a_cpus_time(tmp_path: Path) -> None:
    (tmp_path / "spinner_learner.py").write_text(SPINNER)
    limits = HostLimits(cpus=0.1)
    with LearnerHost(HostSpec("spinner_learner:make", (str(tmp_path),), "bwrap", limits=limits)) as host:
        group = host._cgroup
        if group is None or host.cpu_seconds() is None:
            pytest.fail("this machine offers no writable control group for learner hosts; the test needs one")
        folder = group.folders.get("cpu") or group.folders.get("")
        quota = (
            (folder / "cpu.cfs_quota_us").read_text().strip()
            if group.version == 1
            else (folder / "cpu.max").read_text().split()[0]
        )
        assert quota == "10000"
        before, started = host.cpu_seconds(), time.monotonic()
        predict(host, INFO, b"3.0", np.zeros((1, 8, 8, 3), np.uint8), seed=0)
        wall, used = time.monotonic() - started, host.cpu_seconds() - before
    assert wall >= 3.0
    assert used <= 0.1 * wall + 0.2, (used, wall)  # unquota'd, two spinners use 1.2 to 6 CPU-s here
