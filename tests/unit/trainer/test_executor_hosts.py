"""An executor's learner hosts: evaluation images are scored by a host that never trains and
stays for the run (no host is restarted between tasks to forget them), every host has done
its first call's imports before it answers, and a host whose process died is replaced. Real hosts in the machine's sandbox; no Ray (the executor classes are plain objects
here)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec
from workers.sandbox.learner_calls import predict
from workers.trainer.executor import Evaluator, TrialExecutor

LEARNER_SOURCE = '''
import sys, numpy as np
from workers.learners.protocol import Resources

class Witness:
    """Its scores say whether the first call's imports were done in its host."""
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
IMAGES = np.zeros((2, 4, 4, 3), np.uint8)


@pytest.fixture
def spec(tmp_path: Path) -> HostSpec:
    (tmp_path / "nevis_witness.py").write_text(LEARNER_SOURCE)
    return HostSpec("nevis_witness:make", import_paths=(str(tmp_path),))


def _warm(scores: np.ndarray) -> bool:
    return bool(scores[0, 0])


def test_each_evaluation_has_a_warm_host_of_its_own_which_never_trains_and_is_killed(spec) -> None:
    """Issue 44 item 6: one evaluation per host (start, predict, kill), started when the task
    begins so its imports are done before it answers; never the host that trains."""
    executor = TrialExecutor(spec)
    try:
        scored = []
        for _ in range(3):  # three tasks' evaluations
            executor.start_predictor()  # each task's start: a fresh host, warming while trials run
            host = executor._predictor.live()
            scores, _ = executor.predict(INFO, b"p", IMAGES, seed=0)
            assert _warm(scores)  # its first call's imports done before it answered
            assert not host.alive  # killed once it has predicted
            scored.append(host)
        assert len({host.pid for host in scored}) == 3  # a host of its own per evaluation
        trains = executor._trainer.live()
        assert trains.pid not in {host.pid for host in scored}
        assert _warm(predict(trains, INFO, b"p", IMAGES, seed=0)[0])
    finally:
        executor.close()
    assert not trains.alive


def test_an_evaluator_of_its_own_predicts_in_a_host_warmed_before_it_answered(spec) -> None:
    evaluator = Evaluator(spec)  # multi-worker runs: its host started with the actor
    try:
        scores, _ = evaluator.predict(INFO, b"p", IMAGES, seed=0)
    finally:
        evaluator.close()
    assert _warm(scores)


def test_a_predicting_host_whose_process_died_is_replaced(spec) -> None:
    evaluator = Evaluator(spec)
    try:
        first = evaluator._predictor.live()
        os.kill(first.pid, signal.SIGKILL)  # an out-of-memory kill, say
        deadline = time.monotonic() + 30
        while first.alive and time.monotonic() < deadline:
            time.sleep(0.05)
        scores, _ = evaluator.predict(INFO, b"p", IMAGES, seed=0)
        assert scores.shape == (2, 1) and evaluator._predictor.live() is not first
    finally:
        evaluator.close()


def test_the_evaluating_executor_starts_its_predicting_host_beside_its_training_host(spec) -> None:
    # Started at a task's start instead, its imports competed with the run's first trial.
    evaluating, other = TrialExecutor(spec, evaluates=True), TrialExecutor(spec)
    try:
        assert evaluating._predictor._host is not None
        assert other._predictor._host is None
        started = evaluating._predictor.live()
        evaluating.start_predictor()  # a task begins: the same host, no second one
        assert evaluating._predictor.live() is started and started.alive
        assert started.pid != evaluating._trainer.live().pid
    finally:
        evaluating.close()
        other.close()
