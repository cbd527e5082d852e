"""The stored originals reach a sandboxed learner beside the task images, on its own task
and on earlier tasks' train splits, through the host's wire."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox import ops
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.declaration import info_to_json
from workers.sandbox.messages import Limits
from workers.stream.task_info import Originals
from workers.trainer.trial import task_parts

LEARNER_SOURCE = """
import numpy as np
from workers.learners.protocol import Resources, TrainOutput

def shapes(data):
    o = data.originals
    return [data.images.shape, None if o is None else (o.images.shape, o.extents.tolist()[0])]

class Spy:
    name = "spy"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx):
        seen = {"train": shapes(view.train()), "dev": shapes(view.dev()),
                "past": shapes(view.past_train(1))}
        return TrainOutput(predictor=None, state=seen)
    def predict(self, predictor, images, ctx): return np.zeros((len(images), 2), np.float32)
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Spy()
"""


def _info(order: int) -> TaskInfo:
    return TaskInfo(
        order=order,
        key=f"t{order}",
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


def _split(n: int, canvas: tuple[int, int] | None) -> LabelledData:
    originals = None
    if canvas is not None:
        originals = Originals(np.zeros((n, *canvas, 3), np.uint8), np.tile(np.array([canvas], np.int32), (n, 1)))
    return LabelledData(np.zeros((n, 4, 4, 3), np.uint8), np.zeros(n, np.int64), originals)


@pytest.fixture
def spy_dir(tmp_path: Path) -> Path:
    (tmp_path / "nevis_spy_originals.py").write_text(LEARNER_SOURCE)
    return tmp_path


def test_a_trial_sees_task_images_and_originals_of_its_train_and_past_splits(spy_dir):
    past = _split(5, (9, 6))

    def answer(header, parts):  # the harness's side of past_train (trial_answers.answer_past)
        assert header["op"] == "past_train" and header["order"] == 1
        return ops.frame(ops.HostOp.PAST_TRAIN, ok=True), past.to_arrays()

    request = ops.Trial(
        data_key="k", info=info_to_json(_info(2)), past=[info_to_json(_info(1))], stream_length=2, steps=1, seed=0
    )
    parts = task_parts(_split(3, (6, 8)), _split(2, (6, 8)))
    with LearnerHost(HostSpec("nevis_spy_originals:make", import_paths=(str(spy_dir),))) as host:
        header, out = host.call(request, [*parts, pickle.dumps(None)], on_message=answer, limits=Limits(steps=1))
    assert header["status"] == "ok", header
    seen = pickle.loads(out[2])
    assert seen["train"] == [(3, 4, 4, 3), ((3, 6, 8, 3), [6, 8])]
    assert seen["dev"] == [(2, 4, 4, 3), None]  # dev is scored on task images only
    assert seen["past"] == [(5, 4, 4, 3), ((5, 9, 6, 3), [9, 6])]
