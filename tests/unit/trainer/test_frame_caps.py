"""Per-message caps on what a learner host sends during a trial, held before any byte is read.

A real learner host (a subprocess) announces a forged oversized rung report, an oversized
state or predictor, then sends nothing more: a harness that tried to read the bytes would
wait out the silence deadline; one that checks the announced sizes refuses at once.
"""

from __future__ import annotations

import io
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox import wire
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.limits import MIB, HostLimits
from workers.trainer.frame_caps import array_bytes, trial_frame_caps
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, TrialSpec, run_trial_in_host

LEARNER_SOURCE = '''
import json, struct, time
import numpy as np
from workers.learners.protocol import Resources, TrainOutput

class Forger:
    """Announces one frame whose parts ``config["parts"]`` declares, then sends no bytes."""
    name = "forger"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx):
        host = ctx.on_checkpoint.__self__
        head = json.dumps({**config["header"], "parts": config["parts"]}).encode()
        host.proto_out.write(struct.pack(">Q", len(head)) + head)
        host.proto_out.flush()
        time.sleep(60)  # the bytes never come: only a harness that reads them would wait
        return TrainOutput(predictor=None, state=None)
    def predict(self, predictor, images, ctx): return np.zeros((len(images), 2), np.float32)
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Forger()
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
LIMITS = HostLimits(silence_deadline_s=20.0, predictor_bytes=MIB, state_bytes=2 * MIB, proxy_max_dim=64)
PROXY = {"n": 4, "q": 2, "seed": 0}


class Remote:
    def __init__(self, method: Any) -> None:
        self.remote = method


class Harness:
    """The harness actor's methods a trial calls; a rung report or a put here means a frame was read."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.put = Remote(lambda key, data: self.heard.append(key) or {"key": key, "size": len(data), "sha256": ""})
        self.rung_report = Remote(lambda *args: self.heard.append("rung") or True)


@pytest.fixture(autouse=True)
def harness_without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setattr(ray, "get", lambda answer: answer)


@pytest.fixture(scope="module")
def learner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("forger")
    (folder / "nevis_forger.py").write_text(LEARNER_SOURCE)
    return folder


def _spec(folder: Path, harness: Harness) -> TrialSpec:
    split = LabelledData(np.zeros((3, 4, 4, 3), np.uint8), np.zeros(3, np.int64))
    dev = LabelledData(np.zeros((2, 4, 4, 3), np.uint8), np.zeros(2, np.int64))
    host = HostSpec("nevis_forger:make", import_paths=(str(folder),), limits=LIMITS)
    return TrialSpec(
        host=host,
        info=INFO,
        past=(),
        stream_length=1,
        steps=8,
        checkpoint_fractions=(1.0,),
        state=pickle.dumps(None),
        train=split,
        dev=dev,
        key_prefix="runs/r/t1/a1",
        harness=harness,
        rungs=(1, 2),
        rung_proxy=PROXY,
    )


@pytest.mark.parametrize(
    ("header", "parts", "named"),
    [
        ({"op": "rung", "step": 1}, [["a", array_bytes(4096, 4096)]], "rung report"),  # the review's forged rung
        ({"op": "rung", "step": 1}, [["a", array_bytes(8, 65)]], "rung report"),  # one column over the cap
        ({"op": "checkpoint", "step": 8}, [["b", MIB + 1]], "checkpoint"),
        ({"op": "result", "status": "ok"}, [["a", 100], ["b", 10], ["b", 3 * MIB]], "result of trial (ok)"),
    ],
)
def test_an_oversized_frame_is_refused_before_its_bytes_are_read(learner_dir, header, parts, named) -> None:
    harness = Harness()
    spec = _spec(learner_dir, harness)
    with LearnerHost(spec.host) as host:
        started = time.monotonic()
        result = run_trial_in_host(host, {TRIAL_INDEX: 0, TRIAL_SEED: 1, "header": header, "parts": parts}, spec)
        took = time.monotonic() - started
        assert not host.alive  # mid-frame: never asked again
    assert result["status"] == "failed" and named in result["error"] and "refused unread" in result["error"]
    assert took < 10.0  # not the 20 s silence deadline a read would wait out
    assert "rung" not in harness.heard


def test_the_caps_follow_the_task_and_the_host_limits() -> None:
    caps = trial_frame_caps(num_dev=100, num_classes=10, limits=LIMITS, proxy=PROXY, checkpoint_bytes=512)
    assert caps.rung_bytes == array_bytes(8, 64)
    assert caps.checkpoint_bytes == 512 and caps.result_bytes == (array_bytes(100, 10), MIB, 2 * MIB)
    assert trial_frame_caps(num_dev=100, num_classes=10, limits=LIMITS).rung_bytes == array_bytes(100, 10)


class _Counted(io.BytesIO):
    """A stream that counts the bytes read from it."""

    taken = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.taken += len(chunk)
        return chunk


def _framed(shape: tuple[int, int]) -> _Counted:
    buffer = io.BytesIO()
    wire.send(buffer, {"op": "rung", "step": 1}, [np.ones(shape, np.float64)])
    return _Counted(buffer.getvalue())


def test_an_honest_float64_rung_at_the_widest_passes_its_cap() -> None:
    caps = trial_frame_caps(num_dev=2, num_classes=2, limits=LIMITS, proxy=PROXY)
    header, parts = wire.receive(_framed((8, 64)), announce=caps)
    assert header["op"] == "rung" and parts[0].shape == (8, 64)


def test_a_rung_over_its_cap_is_refused_with_its_parts_unread() -> None:
    caps = trial_frame_caps(num_dev=2, num_classes=2, limits=LIMITS, proxy=PROXY)
    stream = _framed((8, 200))
    with pytest.raises(wire.WireError, match="refused unread"):
        wire.receive(stream, announce=caps)
    assert stream.taken < 1024 < 8 * 200 * 8  # the header only
