"""The evaluation host lives for one evaluation (issue 44, "No channel between hosts"): it is
started, asked to predict, and killed, so whatever a learner kept while it saw test images
(a module global here) is gone when the next evaluation starts. A real host in the sandbox."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.learners.protocol import TaskInfo
from workers.sandbox.client import HostSpec
from workers.trainer.executor import Evaluator

LEARNER_SOURCE = """
import numpy as np
from workers.learners.protocol import Resources, TrainOutput

SEEN = []  # images of every evaluation this process has scored

class Keeper:
    name = "keeper"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): return TrainOutput(predictor=None, state=None)
    def predict(self, predictor, images, ctx):
        SEEN.append(len(images))
        return np.tile(np.float32([len(SEEN), 0]), (len(images), 1))
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Keeper()
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


def test_each_evaluation_gets_a_fresh_host_that_saw_no_earlier_images(tmp_path: Path) -> None:
    (tmp_path / "nevis_keeper.py").write_text(LEARNER_SOURCE)
    evaluator = Evaluator(HostSpec("nevis_keeper:make", import_paths=(str(tmp_path),), sandbox="bwrap"))
    images = np.zeros((5, 4, 4, 3), np.uint8)
    try:
        first, usage = evaluator.predict(INFO, b"p", images, seed=0)
        evaluator.start_predictor()  # the next task begins: its host starts
        second, _ = evaluator.predict(INFO, b"p", images, seed=1)
    finally:
        evaluator.close()
    assert first.shape == (5, 2) and usage["cpu_seconds"] is not None
    assert first[0, 0] == 1.0  # the first evaluation its host made
    assert second[0, 0] == 1.0  # a host that kept the first task's images would say 2
