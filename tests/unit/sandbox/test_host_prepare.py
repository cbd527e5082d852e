"""``prepare_task`` in a learner host: once per task, on a trial's causal view, metered, its
result handed to the trials as ``view.prepared``; its reply checked like any metered one."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import LearnerError
from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox import messages, ops
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.declaration import info_to_json
from workers.sandbox.learner_calls import describe
from workers.sandbox.wire import WireError
from workers.trainer import task_prepare
from workers.trainer.trial import TrialSpec

LEARNER_SOURCE = """
import numpy as np, torch
from workers.learners.protocol import Resources, TrainOutput

class Preparer:
    name = "preparer"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return {"carried": 1}
    def prepare_task(self, view, state, ctx):
        if state.get("peek"):
            view.test()  # refused: the hook sees a trial's causal view, no test split
        with torch.no_grad():  # an untracked pass: metered like any other
            torch.nn.Linear(48, 5)(torch.zeros(len(view.train()), 48))
        return {"train": len(view.train()), "dev": len(view.dev()), "past": len(view.past_train(1)),
                "state": state, "seed": ctx.seed}
    def train(self, view, state, config, ctx):
        return TrainOutput(predictor=None, state=view.prepared)
    def predict(self, predictor, images, ctx): return np.zeros((len(images), 2), np.float32)
    def features(self, predictor, images, ctx): return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Preparer()
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


def _split(n: int) -> LabelledData:
    return LabelledData(np.zeros((n, 4, 4, 3), np.uint8), np.zeros(n, np.int64))


def _spec(host_spec: HostSpec, state: dict) -> TrialSpec:
    return TrialSpec(
        host=host_spec,
        info=_info(2),
        past=(_info(1),),
        stream_length=2,
        steps=1,
        checkpoint_fractions=(),
        state=pickle.dumps(state),
        train=_split(3),
        dev=_split(2),
        key_prefix="runs/1/task-2",
        harness=None,
    )


@pytest.fixture
def host_spec(tmp_path: Path, monkeypatch) -> HostSpec:
    (tmp_path / "nevis_preparer.py").write_text(LEARNER_SOURCE)

    def answer_past(harness, op, order):  # the harness actor's side (trial_answers.answer_past)
        assert (op, order) == ("past_train", 1)
        return ops.frame(op, ok=True), _split(5).to_arrays()

    monkeypatch.setattr(task_prepare, "answer_past", answer_past)
    return HostSpec("nevis_preparer:make", import_paths=(str(tmp_path),))


def test_the_hook_is_declared_run_once_metered_and_read_by_every_trial(host_spec) -> None:
    spec = _spec(host_spec, {"carried": 1})
    with LearnerHost(host_spec) as host:
        assert describe(host).prepares_task
        prepared, flops = task_prepare.prepare_in_host(host, spec)
        assert flops["flops_measured"] == flops["flops_untracked"] == 2 * 3 * 48 * 5
        assert pickle.loads(prepared) == {"train": 3, "dev": 2, "past": 5, "state": {"carried": 1}, "seed": 2}
        request = ops.Trial(
            data_key=spec.key_prefix,
            info=info_to_json(spec.info),
            past=[info_to_json(_info(1))],
            stream_length=2,
            steps=1,
            seed=0,
            prepared=True,
        )
        header, out = host.call(
            request,
            [prepared, spec.state],  # the data went with the preparation
            limits=messages.Limits(steps=1),
        )
    assert header["status"] == "ok", header
    assert pickle.loads(out[2]) == pickle.loads(prepared)


def test_the_hook_sees_no_test_split(host_spec) -> None:
    with LearnerHost(host_spec) as host, pytest.raises(LearnerError, match="CausalityError"):
        task_prepare.prepare_in_host(host, _spec(host_spec, {"peek": True}))


def test_a_learner_without_the_hook_declares_none() -> None:
    with LearnerHost(HostSpec("indep_small")) as host:
        assert not describe(host).prepares_task


def test_the_reply_is_checked_like_any_metered_one() -> None:
    good = {"op": "result", "wall_time_s": 0.5, "flops_measured": 10, "flops_reported": 0, "flops_untracked": 4}
    assert messages.read_reply("prepare_task", good, [b"x"])["flops_measured"] == 10
    with pytest.raises(WireError, match="flops_untracked cannot exceed"):
        messages.read_reply("prepare_task", {**good, "flops_untracked": 11}, [b"x"])
    with pytest.raises(WireError, match="flops_measured"):
        messages.read_reply("prepare_task", {**good, "flops_measured": -1}, [b"x"])
    with pytest.raises(WireError, match="expects parts"):
        messages.read_reply("prepare_task", good, [np.zeros(2)])
