"""A trial against a hostile learner host: floods of checkpoints, forged final frames and a
harness that cannot record fail the trial, charged what the host reported, never 0 FLOPs;
the host left in the middle of a request is closed so no later request reads its frames.

The learner host is real (a subprocess); the task's harness actor is a plain object whose
methods answer ``.remote(...)`` at once, and ``ray.get`` hands that answer back.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost
from workers.trainer import trial_answers
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, TrialSpec, run_trial_in_host

LEARNER_SOURCE = '''
import struct
import numpy as np
from workers.learners.protocol import Resources, TrainOutput
from workers.sandbox import wire

class Hostile:
    """Trains 4 steps, reporting 1000 FLOPs at step 0; ``config["mode"]`` says what it forges."""
    name = "hostile"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx):
        host = ctx.on_checkpoint.__self__  # the Host serving this trial, and its pipes
        mode = config.get("mode", "ok")
        ctx.report_flops(1000)
        ctx.progress(0, None)  # sends the FLOPs so far, then the checkpoint at step 0
        if mode == "flood":
            for _ in range(20):
                host._checkpoint(0, b"c" * 100)
        elif mode == "undeclared":
            host._checkpoint(3, b"c")
        elif mode == "big":
            host._checkpoint(4, b"c" * 100)
        elif mode == "final":  # a result of its own, ahead of the real one
            header = {"op": "result", "status": "ok", "wall_time_s": 1.0, "peak_memory_bytes": 10,
                      "curve": [[0, None]], "missed_checkpoints": [], "flops_measured": 0,
                      "flops_reported": 2000, "flops_untracked": 0, **config["patch"]}
            wire.send(host.proto_out, header, [np.zeros((2, 2), np.float32), b"p", b"s"])
        elif mode == "shout":  # prints, then raises: its log keeps both
            print("shouting in trial", config["word"])
            raise ValueError("the learner gave up")
        elif mode == "chatty":  # 5 MB of prints: the host neither blocks nor keeps them all
            for i in range(5000):
                print(f"{i:06d}", "z" * 1000)
            print("the last line")
        elif mode == "raw":  # a header no honest host writes
            raw = config["raw"].encode()
            host.proto_out.write(struct.pack(">Q", len(raw)) + raw)
            host.proto_out.flush()
        for step in range(1, ctx.steps + 1):
            ctx.progress(step, None, loss=1.0 / step)
        return TrainOutput(predictor=None, state={"done": True})
    def predict(self, predictor, images, ctx): return np.tile(np.float32([1, 0]), (len(images), 1))
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"predictor"
    def load_predictor(self, data, info, ctx): return data

def make(): return Hostile()
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
    num_train=3,
    num_dev=2,
)


class Remote:
    """A method called the way a Ray actor's is (``method.remote(...)``), answered at once."""

    def __init__(self, method: Any) -> None:
        self.remote = method


class Harness:
    """The task harness actor's methods a trial calls, storing in a dict."""

    def __init__(self, refuse: str | None = None) -> None:
        self.stored: dict[str, bytes] = {}
        self.refuse = refuse  # a key fragment whose put raises, as a unique-key error would
        self.put, self.rung_report = Remote(self._put), Remote(self._rung_report)

    def _put(self, key: str, data: bytes) -> dict[str, Any]:
        if self.refuse and self.refuse in key:
            raise RuntimeError(f"duplicate key value violates unique constraint: {key}")
        self.stored[key] = data
        return {"key": key, "size": len(data), "sha256": "0" * 64}

    def _rung_report(self, trial_index: int, step: int, error: float) -> bool:
        return True


@pytest.fixture(autouse=True)
def harness_without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setattr(ray, "get", lambda answer: answer)


@pytest.fixture
def host(tmp_path: Path):
    (tmp_path / "nevis_hostile_trial.py").write_text(LEARNER_SOURCE)
    with LearnerHost(HostSpec("nevis_hostile_trial:make", import_paths=(str(tmp_path),))) as h:
        yield h


def _spec(harness: Harness) -> TrialSpec:
    split = LabelledData(np.zeros((3, 4, 4, 3), np.uint8), np.zeros(3, np.int64))
    dev = LabelledData(np.zeros((2, 4, 4, 3), np.uint8), np.zeros(2, np.int64))
    return TrialSpec(
        host=HostSpec("nevis_hostile_trial:make"),
        info=INFO,
        past=(),
        stream_length=1,
        steps=4,
        checkpoint_fractions=(0.0, 1.0),
        state=pickle.dumps(None),
        train=split,
        dev=dev,
        key_prefix="runs/r/t1/a1",
        harness=harness,
    )


def _run(host: LearnerHost, harness: Harness, **config: Any) -> dict[str, Any]:
    return run_trial_in_host(host, {TRIAL_INDEX: 0, TRIAL_SEED: 1, **config}, _spec(harness))


def _ends(host: LearnerHost, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while host.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    return not host.alive


def test_a_trial_log_keeps_its_own_prints_and_the_learners_traceback(host) -> None:
    """A reused host's log is sliced per trial: the second trial's log has only its own words."""
    harness = Harness()
    logs = []
    for index, word in enumerate(("alpha", "beta")):
        result = run_trial_in_host(
            host, {TRIAL_INDEX: index, TRIAL_SEED: 1, "mode": "shout", "word": word}, _spec(harness)
        )
        assert result["status"] == "failed" and "the learner gave up" in result["error"]
        logs.append(harness.stored[f"runs/r/t1/a1/trial-{index:03d}/log.txt"].decode())
    assert "shouting in trial alpha" in logs[0] and "alpha" not in logs[1]
    assert "shouting in trial beta" in logs[1]
    assert "Traceback" in logs[1] and "ValueError: the learner gave up" in logs[1]
    assert "[nevis] trial 1 failed" in logs[1]


def test_a_flood_of_prints_keeps_only_the_last_mebibyte(host) -> None:
    harness = Harness()
    result = _run(host, harness, mode="chatty")
    assert result["status"] == "ok", result
    log = harness.stored["runs/r/t1/a1/trial-000/log.txt"]
    assert log.endswith(b"the last line\n") and b"earlier bytes dropped" in log.splitlines()[0]
    assert 1 << 20 <= len(log) < (1 << 20) + 200


def test_an_honest_trial_is_recorded_and_the_host_stays_warm(host) -> None:
    harness = Harness()
    for _ in range(2):  # the second trial reuses the host and the data it holds
        result = _run(host, harness)
        assert result["status"] == "ok", result
        assert [c["step"] for c in result["checkpoints"]] == [0, 4]
        assert result["flops_reported"] == 1000 and result["dev_error"] == 0.0
        assert result["missed_checkpoints"] == [] and len(result["curve"]) == 5
        assert result["peak_memory_bytes"] > 0 and result["wall_time_s"] >= 0
    assert host.alive
    assert harness.stored["runs/r/t1/a1/trial-000/predictor.bin"] == b"predictor"
    assert sorted(k for k in harness.stored if "ckpt" in k) == [
        "runs/r/t1/a1/trial-000/ckpt-0000000.bin",
        "runs/r/t1/a1/trial-000/ckpt-0000004.bin",
    ]


@pytest.mark.parametrize(("mode", "words"), [("flood", "second checkpoint at step 0"), ("undeclared", "step")])
def test_a_checkpoint_flood_fails_the_trial_charged_what_was_spent(host, mode, words) -> None:
    harness = Harness()
    result = _run(host, harness, mode=mode)
    assert result["status"] == "failed" and words in result["error"], result["error"]
    assert result["flops_reported"] == 1000  # the report sent before the flood
    assert [c["step"] for c in result["checkpoints"]] == [0]
    assert len([k for k in harness.stored if "ckpt" in k]) == 1
    assert _ends(host)  # it was mid-trial with frames on their way: never asked again


def test_a_checkpoint_over_the_size_limit_fails_the_trial(host, monkeypatch) -> None:
    monkeypatch.setattr(trial_answers, "CHECKPOINT_MAX_BYTES", 50)
    result = _run(host, Harness(), mode="big")
    assert result["status"] == "failed" and "over the 50-byte limit" in result["error"]
    assert result["flops_reported"] == 1000


@pytest.mark.parametrize(
    ("patch", "named", "reported"),
    [
        ({"missed_checkpoints": ["x"]}, "missed_checkpoints", 2000),  # its FLOPs are valid: charged
        ({"curve": [[0, 1.0]] * 100_000}, "curve", 2000),
        ({"flops_reported": -5}, "flops_reported", 1000),  # not valid: the last interim report
        ({"flops_reported": 10}, "", 1000),  # valid but lower than reported before: the most is kept
    ],
)
def test_a_forged_final_frame_fails_the_trial_naming_the_field(host, patch, named, reported) -> None:
    result = _run(host, Harness(), mode="final", patch=patch)
    if named:
        assert result["status"] == "failed" and named in result["error"], result["error"]
        assert _ends(host)  # the real result is still on its way
    assert result["flops_reported"] == reported


@pytest.mark.parametrize(
    "raw",
    [
        '{"op":"result","status":"ok","wall_time_s":NaN,"parts":[]}',
        '{"op":"result","status":"ok","peak_memory_bytes":1e400,"parts":[]}',
        "[" * 200_000,
    ],
)
def test_an_undecodable_final_frame_fails_the_trial_charged_the_last_report(host, raw) -> None:
    result = _run(host, Harness(), mode="raw", raw=raw)
    assert result["status"] == "failed" and "WireError" in result["error"], result["error"]
    assert result["flops_reported"] == 1000
    assert _ends(host)


def test_a_failed_put_fails_the_trial_with_its_spend_not_zero(host) -> None:
    result = _run(host, Harness(refuse="ckpt-0000000"))
    assert result["status"] == "failed" and "unique constraint" in result["error"]
    assert result["flops_reported"] == 1000
    assert _ends(host)


def test_a_failed_put_of_the_predictor_fails_the_trial_with_its_final_flops(host) -> None:
    result = _run(host, Harness(refuse="predictor"))
    assert result["status"] == "failed" and "unique constraint" in result["error"]
    assert result["flops_reported"] == 1000 and [c["step"] for c in result["checkpoints"]] == [0, 4]
