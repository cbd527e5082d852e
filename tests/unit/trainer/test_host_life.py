"""A learner host's whole life is charged (issue 44): CPU burnt at import, in an idle thread
between calls, and in a trial that the harness ends by closing the host (a duplicate
checkpoint) is recorded and floored; a reading that comes back empty becomes an estimate,
marked, never 0. Real hosts in the real sandbox, in a real control group (this CI machine: v1).
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from services.store import key_layout
from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.metering.calibration import ALLOWANCE_S, FLOOR_FRACTION
from workers.trainer import host_usage
from workers.trainer.host_usage import call_cpu_seconds, measured_call
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, TrialSpec, run_trial_in_host

IMPORT_BURN_S = 1.0
LEARNER_SOURCE = f"""
import threading, time
import numpy as np
from workers.learners.protocol import Resources, TrainOutput

def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

burn({IMPORT_BURN_S})  # at import: before any measured call

class Burner:
    name = "burner"
    def search_space(self): return {{}}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx):
        mode = config.get("mode")
        if mode == "idle":  # a thread that works after the call has answered
            threading.Thread(target=lambda: (time.sleep(0.3), burn(config["seconds"])), daemon=True).start()
        elif mode == "duplicate":  # works, then breaks the protocol: the harness closes the host
            burn(config["seconds"])
            ctx.progress(0, None)
            ctx.on_checkpoint.__self__._checkpoint(0, b"again")
        for step in range(1, ctx.steps + 1):
            ctx.progress(step, None)
        return TrainOutput(predictor=None, state=None)
    def predict(self, predictor, images, ctx): return np.tile(np.float32([1, 0]), (len(images), 1))
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Burner()
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
    num_train=3,
    num_dev=2,
)


class Remote:
    """A method called the way a Ray actor's is (``method.remote(...)``), answered at once."""

    def __init__(self, method: Any) -> None:
        self.remote = method


class Harness:
    """The task harness actor's methods a trial calls, storing nothing."""

    def __init__(self) -> None:
        self.put = Remote(lambda key, data: {"key": key, "size": len(data), "sha256": "0" * 64})
        self.rung_report = Remote(lambda *args: True)


@pytest.fixture(autouse=True)
def harness_without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setattr(ray, "get", lambda answer: answer)


@pytest.fixture
def host(tmp_path: Path):
    (tmp_path / "nevis_burner.py").write_text(LEARNER_SOURCE)
    with LearnerHost(HostSpec("nevis_burner:make", import_paths=(str(tmp_path),), sandbox="bwrap")) as h:
        if h._cgroup is None:
            pytest.fail("this machine offers no control group for learner hosts; the test needs one")
        yield h


def _trial(host: LearnerHost, **config: Any) -> dict[str, Any]:
    split = LabelledData(np.zeros((3, 4, 4, 3), np.uint8), np.zeros(3, np.int64))
    dev = LabelledData(np.zeros((2, 4, 4, 3), np.uint8), np.zeros(2, np.int64))
    spec = TrialSpec(
        host=HostSpec("nevis_burner:make"),
        info=INFO,
        past=(),
        stream_length=1,
        steps=2,
        checkpoint_fractions=(0.0, 1.0),
        state=pickle.dumps(None),
        train=split,
        dev=dev,
        key_prefix="runs/r/t1/a1",
        harness=Harness(),
    )
    metrics, usage = measured_call(
        host, lambda: run_trial_in_host(host, {TRIAL_INDEX: 0, TRIAL_SEED: 1, **config}, spec)
    )
    return {**metrics, **usage}


def test_a_trial_ended_by_closing_its_host_is_charged_its_cpu_and_floor(host) -> None:
    """A duplicate checkpoint makes the harness close the host inside the call; its control
    group is read before it goes, so the work is recorded and floored, not 0 and NULL."""
    burn = ALLOWANCE_S + 1.0
    result = _trial(host, mode="duplicate", seconds=burn)
    assert result["status"] == "failed" and "second checkpoint" in result["error"], result["error"]
    assert not host.alive
    assert result["cpu_estimated"] is False
    assert result["cpu_seconds"] - result["cpu_outside_calls_s"] >= burn * 0.9
    assert result["flops_floor"] > 0.5 * result["flop_rate"] * FLOOR_FRACTION
    assert host.cpu_seconds() == pytest.approx(host._cgroup.final_cpu_seconds)


def test_import_and_idle_thread_compute_is_charged_to_the_next_call(host, monkeypatch) -> None:
    """The first call takes the host's start (the import's burn); a thread left working after
    a call is charged to the host's next call, and floored past the allowance."""
    monkeypatch.setattr(host_usage, "START_ALLOWANCE_S", 0.0)
    first = _trial(host)
    assert first["status"] == "ok" and first["cpu_outside_calls_s"] >= IMPORT_BURN_S * 0.9
    assert first["flops_floor"] >= int(IMPORT_BURN_S * 0.9 * first["flop_rate"] * FLOOR_FRACTION)
    idle = _trial(host, mode="idle", seconds=1.0)
    assert idle["status"] == "ok" and idle["cpu_outside_calls_s"] < 0.5  # the thread had not started
    reading, deadline = host.cpu_seconds(), time.monotonic() + 20
    while host.cpu_seconds() - reading < 0.95 and time.monotonic() < deadline:
        time.sleep(0.1)  # the thread burns between calls
    after = _trial(host)
    assert after["status"] == "ok" and after["cpu_outside_calls_s"] >= 0.9
    assert after["cpu_seconds"] >= after["cpu_outside_calls_s"]


def test_an_empty_reading_is_wall_time_times_declared_cpus_marked() -> None:
    assert call_cpu_seconds(1.0, 3.5, 10.0, 1.0) == (2.5, False)
    assert call_cpu_seconds(None, 3.5, 10.0, 2.0) == (20.0, True)
    assert call_cpu_seconds(1.0, None, 4.0, 0.0) == (4.0, True)  # no declaration: one CPU


FAILING_PREPARER = """
import time
import numpy as np
from workers.learners.protocol import Resources

class Preparer:
    name = "failing-preparer"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def prepare_task(self, view, state, ctx):
        print("preparing task", view.info.order)
        self.predict(None, None, ctx)
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx):
        end = time.thread_time() + SECONDS
        while time.thread_time() < end:
            pass
        raise RuntimeError("prepare gave up")
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Preparer()
"""


class StoringHarness(Harness):
    """A harness actor that keeps what is put."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: dict[str, bytes] = {}
        self.put = Remote(self._put)

    def _put(self, key: str, data: bytes) -> dict[str, Any]:
        self.stored[key] = data
        return {"key": key, "size": len(data), "sha256": "0" * 64}


def test_a_failed_prepare_task_is_charged_its_cpu_floor_and_its_output_is_logged(tmp_path: Path) -> None:
    from workers.trainer.executor import TrialExecutor
    from workers.trainer.task_prepare import PrepareFailed

    burn = ALLOWANCE_S + 1.0
    (tmp_path / "nevis_failing_preparer.py").write_text(FAILING_PREPARER.replace("SECONDS", str(burn)))
    host_spec = HostSpec("nevis_failing_preparer:make", import_paths=(str(tmp_path),), sandbox="bwrap")
    harness = StoringHarness()
    split = LabelledData(np.zeros((3, 4, 4, 3), np.uint8), np.zeros(3, np.int64))
    spec = TrialSpec(
        host=host_spec,
        info=INFO,
        past=(),
        stream_length=1,
        steps=1,
        checkpoint_fractions=(),
        state=pickle.dumps(None),
        train=split,
        dev=split,
        key_prefix=key_layout.attempt_prefix(1, 1, 1),
        harness=harness,
    )
    executor = TrialExecutor(host_spec)
    try:
        with pytest.raises(PrepareFailed, match="prepare gave up") as failed:
            executor.prepare(spec)
    finally:
        executor.close()
    assert failed.value.cpu_seconds is not None and failed.value.cpu_seconds >= burn * 0.9
    assert failed.value.floored and failed.value.flops > 0  # the learner reported ~0: its CPU time is charged
    restored = pickle.loads(pickle.dumps(failed.value))  # it crosses Ray as a task error's cause
    assert (restored.flops, restored.cpu_seconds, restored.floored) == (
        failed.value.flops,
        failed.value.cpu_seconds,
        True,
    )
    log = harness.stored[key_layout.prepare_log_key(spec.key_prefix)].decode()
    assert "preparing task 1" in log and "prepare gave up" in log


def test_a_paused_host_burns_nothing_between_calls(tmp_path: Path) -> None:
    """A host of the executors is stopped after each measured call: the thread a trial left
    working burns nothing while the host waits, and resumes with the next request."""
    from workers.sandbox.pause import PausingHost

    (tmp_path / "nevis_burner.py").write_text(LEARNER_SOURCE)
    with PausingHost(HostSpec("nevis_burner:make", import_paths=(str(tmp_path),), sandbox="bwrap")) as host:
        assert host._cgroup is not None
        idle = _trial(host, mode="idle", seconds=1.0)
        assert idle["status"] == "ok" and host.paused
        reading = host.cpu_seconds()
        time.sleep(2.0)  # the thread would have burnt its second by now
        assert host.cpu_seconds() - reading < 0.05
        after = _trial(host)  # resumed: the thread burns on, within this call or after it
        assert after["status"] == "ok" and host.paused
        host.resume()
        deadline = time.monotonic() + 20
        while host.cpu_seconds() - reading < 0.95 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert host.cpu_seconds() - reading >= 0.95


def test_a_failed_evaluation_carries_its_cpu_floor_to_the_failed_task(tmp_path: Path) -> None:
    """An evaluation whose ``predict`` burns CPU, then raises: the error (as it crosses Ray,
    pickled) carries the floor the task is charged for it (stream_runner adds it)."""
    from workers.trainer.executor import Evaluator
    from workers.trainer.host_usage import failed_call_floor

    burn = ALLOWANCE_S + 1.0
    (tmp_path / "nevis_failing_preparer.py").write_text(FAILING_PREPARER.replace("SECONDS", str(burn)))
    evaluator = Evaluator(HostSpec("nevis_failing_preparer:make", import_paths=(str(tmp_path),), sandbox="bwrap"))
    try:
        with pytest.raises(Exception, match="prepare gave up") as failed:
            evaluator.predict(INFO, b"p", np.zeros((2, 4, 4, 3), np.uint8), seed=1)
    finally:
        evaluator.close()
    floor = failed_call_floor(pickle.loads(pickle.dumps(failed.value)))
    assert floor > 0.5 * failed.value.usage["flop_rate"] * FLOOR_FRACTION
    assert failed.value.usage["cpu_seconds"] >= burn * 0.9
