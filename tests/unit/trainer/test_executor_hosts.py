"""An executor's learner hosts: trials run in one training host kept for the run, which never
sees evaluation images; each evaluation gets a host started ahead of it (after the previous
evaluation), retired afterwards; only the training host imports what training needs before it
answers. Real hosts in the machine's sandbox; no Ray (the executor classes are plain objects
here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec, predict
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


def imported_training(host) -> bool:
    """Whether ``host`` had imported training's modules (the witness's scores say)."""
    scores, _ = predict(host, INFO, b"p", IMAGES, seed=0)
    return bool(scores[0, 0])


@pytest.mark.parametrize("kind", [Evaluator, TrialExecutor])
def test_evaluation_hosts_import_nothing_for_training_and_training_hosts_do(spec, kind) -> None:
    executor = kind(spec)
    try:
        scores, _ = executor.predict(INFO, b"p", IMAGES, seed=0)
        assert not bool(scores[0, 0])
        if kind is TrialExecutor:
            assert imported_training(executor._training_host())  # noqa: SLF001
    finally:
        executor.close()


def test_evaluation_images_go_to_a_fresh_host_each_time_never_to_the_training_host(spec) -> None:
    executor = TrialExecutor(spec)
    try:
        trainer = executor._training_host()  # noqa: SLF001
        scored = []
        for _ in range(2):  # two tasks' evaluations
            upcoming = executor._scorer  # noqa: SLF001 - started before this evaluation was asked for
            assert upcoming is not None
            scored.append(upcoming.result())
            executor.predict(INFO, b"p", IMAGES, seed=0)
            assert executor._training_host() is trainer  # noqa: SLF001 - kept, warm, across tasks
            assert all(host is not trainer for host in scored)
        assert scored[0] is not scored[1]
        executor._scorer.result()  # noqa: SLF001 - the last retirement was queued before this start
        assert not any(host.alive for host in scored)  # retired, evaluation images and all
        assert trainer.alive
    finally:
        executor.close()
    assert not trainer.alive
