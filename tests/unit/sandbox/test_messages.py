"""The messages harness code accepts from a learner host: an honest host's frames pass their
declarations, and a forged field is refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workers.learners.protocol import TaskInfo
from workers.sandbox import messages, ops
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.declaration import info_to_json
from workers.sandbox.messages import Limits
from workers.sandbox.wire import WireError

SPY_SOURCE = """
import numpy as np
from workers.learners.protocol import Choice, Resources, Uniform

class Spy:
    name = "spy"
    def search_space(self): return {"x": Uniform(0.0, 1.0), "c": Choice(([1, 2], [3]))}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx): return np.zeros((len(images), 2), np.float32)
    def features(self, predictor, images, ctx): return np.zeros((len(images), 3), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Spy()
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
    num_train=0,
    num_dev=0,
)
LIMITS = Limits(steps=4, checkpoint_at=(0, 4), rungs=(2,))
FLOPS = {"flops_measured": 10, "flops_reported": 5, "flops_untracked": 2}
SCORES = np.zeros((2, 2), np.float32)


def test_an_honest_hosts_replies_pass_their_declarations(tmp_path: Path) -> None:
    (tmp_path / "nevis_spy_messages.py").write_text(SPY_SOURCE)
    images = np.zeros((2, 4, 4, 3), np.uint8)
    with LearnerHost(HostSpec("nevis_spy_messages:make", import_paths=(str(tmp_path),))) as host:
        calls = [
            (ops.Describe(), []),
            (ops.Predict(info_to_json(INFO), 0), [b"p", images]),
            (ops.LoadPredictor(info_to_json(INFO), 0), [b"p"]),
            (ops.Features(1), [images]),
            (ops.PredictLoaded(1), [images]),
            (ops.FeaturesAndPredict(1), [images]),
            (ops.AugmentViews(1, 2, 0), [images]),
            (
                ops.AugmentViews(1, 2, 0),  # cut from the stored originals
                [images, np.zeros((2, 6, 5, 3), np.uint8), np.full((2, 2), 5, np.int32)],
            ),
            (ops.FreshPredictor(1, 0), []),  # handle 0: none for this learner
            (ops.Release(1), []),
        ]
        for request, parts in calls:
            reply, out = host.call(request, parts)  # read through its declaration, or it raises
            assert set(reply) == set(messages.REPLIES[request.op].fields), request


def test_an_honest_trial_result_passes_and_only_declared_fields_come_out() -> None:
    header = {
        "op": "result",
        "status": "ok",
        "wall_time_s": 1.5,
        "peak_memory_bytes": 1024,
        "curve": [[0, None], [1, 2.5], [2, "inf"], [4, 1]],
        "missed_checkpoints": [4],
        "smuggled": "x" * 100,
        **FLOPS,
    }
    read = messages.read_reply("trial", header, [SCORES, b"p", b"s"], LIMITS)
    assert read["curve"] == [[0, None], [1, 2.5], [2, "inf"], [4, 1.0]]
    assert "smuggled" not in read and read["flops_untracked"] == 2


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"missed_checkpoints": ["x"]}, "missed_checkpoints"),
        ({"missed_checkpoints": [3]}, "missed_checkpoints"),  # not a declared step
        ({"missed_checkpoints": [0, 4, 0]}, "missed_checkpoints"),  # more than were declared
        ({"peak_memory_bytes": 2**51}, "peak_memory_bytes"),
        ({"peak_memory_bytes": 1.5}, "peak_memory_bytes"),
        ({"peak_memory_bytes": True}, "peak_memory_bytes"),
        ({"wall_time_s": -1}, "wall_time_s"),
        ({"wall_time_s": "1"}, "wall_time_s"),
        ({"curve": [[0, 1.0]] * 6}, "curve"),  # longer than steps + 1
        ({"curve": [[5, 1.0]]}, "curve"),  # past the last step
        ({"curve": [[0, "nan"]]}, "curve"),
        ({"curve": [[0]]}, "curve"),
        ({"curve": {"0": 1}}, "curve"),
        ({"flops_measured": -1}, "flops_measured"),
        ({"flops_reported": 2**63}, "flops_reported"),
        ({"flops_untracked": 11}, "flops_untracked"),
        ({"status": "great"}, "status"),
        ({"wall_time_s": None}, "wall_time_s"),
    ],
)
def test_a_bad_field_of_a_trial_result_is_named(fields, named) -> None:
    header = {
        "op": "result",
        "status": "ok",
        "wall_time_s": 1.0,
        "peak_memory_bytes": 0,
        "curve": [],
        "missed_checkpoints": [],
        **FLOPS,
        **fields,
    }
    with pytest.raises(WireError, match=named):
        messages.read_reply("trial", header, [SCORES, b"p", b"s"], LIMITS)


def test_a_missing_field_or_the_wrong_parts_are_refused() -> None:
    with pytest.raises(WireError, match="'wall_time_s' is missing"):
        messages.read_reply(
            "trial", {"op": "result", "status": "stopped", "stopped_at": 2, "curve": [], **FLOPS}, [], LIMITS
        )
    with pytest.raises(WireError, match="parts"):
        messages.read_reply("trial", {"op": "result", "status": "failed", "error": "e", **FLOPS}, [SCORES], LIMITS)
    with pytest.raises(WireError, match="parts"):
        messages.read_reply("predict", {"op": "result", **FLOPS}, [b"not an array"])


def test_long_text_is_cut_not_refused() -> None:
    header = {"op": "result", "status": "failed", "error": "e" * 10**6, "traceback": "t" * 10**6, **FLOPS}
    read = messages.read_reply("trial", header, [], LIMITS)
    assert len(read["error"]) == messages.MESSAGE_CHARS and len(read["traceback"]) == messages.TRACEBACK_CHARS


@pytest.mark.parametrize(
    ("header", "parts", "named"),
    [
        ({"op": "checkpoint", "step": 3}, [b"c"], "step"),  # not a declared checkpoint step
        ({"op": "checkpoint", "step": "0"}, [b"c"], "step"),
        ({"op": "checkpoint", "step": 0}, [SCORES], "parts"),
        ({"op": "rung", "step": 4}, [SCORES], "step"),
        ({"op": "flops", "flops_measured": 1, "flops_reported": -1}, [], "flops_reported"),
        ({"op": "flops", "flops_measured": 1, "flops_reported": 0, "flops_untracked": 2}, [], "untracked"),
        ({"op": "past_train", "order": -1}, [], "order"),
        ({"op": "past_train"}, [], "order"),
        ({"op": "result"}, [], "unexpected"),
        ({"op": ["checkpoint"]}, [], "unexpected"),
    ],
)
def test_a_bad_message_during_a_trial_is_refused(header, parts, named) -> None:
    with pytest.raises(WireError, match=named):
        messages.read_request(header, parts, LIMITS)


def test_messages_during_a_trial_are_read() -> None:
    assert messages.read_request({"op": "checkpoint", "step": 4}, [b"c"], LIMITS) == {"op": "checkpoint", "step": 4}
    assert messages.read_request({"op": "pretrained", "order": None}, [], LIMITS)["order"] is None
    older = messages.read_request({"op": "flops", "flops_measured": 3, "flops_reported": 0}, [], LIMITS)
    assert older["flops_untracked"] == 0  # a host from before the field existed
