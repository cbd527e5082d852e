"""An executor's learner hosts: the one that scored evaluation images never trains again, its
successor was started a task ahead (a spare), and a host that will train has imported what
training needs before it answers. Real hosts in the machine's sandbox; no Ray (the executor
classes are plain objects here)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec
from workers.trainer.executor import Evaluator, TrialExecutor

LEARNER_SOURCE = '''
import sys, numpy as np
from workers.learners.protocol import Resources

class Witness:
    """Its scores say whether training's imports were done in its host."""
    name = "witness"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data
    def features(self, predictor, images, ctx): return images.reshape(len(images), -1)
    def predict(self, predictor, images, ctx):
        return np.array([["torch._dynamo" in sys.modules]] * len(images), np.int64)

def make(): return Witness()
'''

INFO = TaskInfo(order=1, key="t", dataset="t", title="t", year=2000, domain=None, kind="single",
                num_classes=2, class_names=("a", "b"), image_size=4, num_train=0, num_dev=0)
IMAGES = np.zeros((2, 4, 4, 3), np.uint8)


@pytest.fixture
def spec(tmp_path: Path) -> HostSpec:
    (tmp_path / "nevis_witness.py").write_text(LEARNER_SOURCE)
    return HostSpec("nevis_witness:make", import_paths=(str(tmp_path),))


@pytest.mark.parametrize("kind", [Evaluator, TrialExecutor])
def test_only_hosts_that_train_import_what_training_needs_before_they_answer(spec, kind) -> None:
    executor = kind(spec)
    try:
        scores, _ = executor.predict(INFO, b"p", IMAGES, seed=0)
    finally:
        executor.close()
    assert bool(scores[0, 0]) is kind.trains


def test_a_host_that_scored_evaluation_images_never_trains_and_a_spare_takes_its_place(spec) -> None:
    executor = TrialExecutor(spec)
    try:
        scored = []
        for _ in range(2):  # two tasks, each followed by another
            executor.keep_spare()  # at the task's start
            spare = executor._spare  # noqa: SLF001
            scored.append(executor._live_host())  # noqa: SLF001 - the host that will score
            executor.predict(INFO, b"p", IMAGES, seed=0)
            trains_next = executor._live_host()  # noqa: SLF001 - the host the next trial gets
            assert all(trains_next is not host for host in scored)
            assert trains_next is spare.result()  # started at the task's start, not after its evaluation
        assert executor._spare is None  # noqa: SLF001 - none until the next task asks for one
        deadline = time.monotonic() + 30  # retirements happen off the caller's path
        while any(host.alive for host in scored) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(host.alive for host in scored)  # retired, evaluation images and all
    finally:
        executor.close()


def test_after_a_runs_last_evaluation_no_host_is_started_until_one_is_needed(spec) -> None:
    executor = TrialExecutor(spec)
    try:
        scored = executor._live_host()  # noqa: SLF001
        executor.predict(INFO, b"p", IMAGES, seed=0)  # no keep_spare: the run's last task
        assert executor._host is None and executor._spare is None  # noqa: SLF001 - nothing started
        fresh = executor._live_host()  # noqa: SLF001 - a later call starts one then
        assert fresh is not scored and fresh.alive
    finally:
        executor.close()
