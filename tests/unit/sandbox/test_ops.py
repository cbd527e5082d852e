"""The learner-host boundary has one vocabulary: every request the host serves is declared,
every reply is read through its declaration, and a hostile probe reply is a WireError."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import LearnerError
from workers.learners.protocol import TaskInfo
from workers.sandbox import messages, ops, wire
from workers.sandbox.client import HostSpec, LearnerHost, LearnerHostDied
from workers.sandbox.host import Host
from workers.sandbox.learner_calls import SandboxedLearner
from workers.sandbox.replies import BrokenReply, read_checked

ROOT = Path(__file__).resolve().parents[3]
OP_KEY = re.compile(r"""["']op["']\s*[:\])]""")  # {"op": ...}, x["op"], x.get("op")


def _request_classes() -> list[type[ops.Request]]:
    found, todo = [], [ops.Request]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "op" in vars(cls):
            found.append(cls)
    return found


def test_the_declared_requests_are_the_ones_the_host_serves() -> None:
    served = {name.removeprefix("_op_") for name in dir(Host) if name.startswith("_op_")}
    assert served == set(ops.SERVED)
    assert set(messages.REPLIES) | {ops.Op.TRIAL} == set(ops.SERVED)  # each result declared
    assert {cls.op for cls in _request_classes()} == set(ops.Op)  # each request typed


def test_a_host_messages_are_declared_by_their_op() -> None:
    assert set(messages.REQUESTS) == set(ops.HostOp)


def test_requests_are_frozen_and_their_headers_cross_the_wire() -> None:
    request = ops.AugmentViews(handle=3, q=2, seed=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.q = 5  # type: ignore[misc]
    buffer = io.BytesIO()
    wire.send(buffer, request.header())
    buffer.seek(0)
    header, _ = wire.receive(buffer)
    assert header == {ops.OP: "augment_views", "handle": 3, "q": 2, "seed": 7}


def test_no_op_key_is_written_outside_the_declarations() -> None:
    offenders = []
    for folder in ("services", "workers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "workers/sandbox/ops.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if OP_KEY.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    hint = "build frames with workers.sandbox.ops (Request, frame, op_of):\n"
    assert offenders == [], hint + "\n".join(offenders)


def test_a_reply_that_breaks_its_declaration_is_refused_by_name() -> None:
    flops = {"flops_measured": 4, "flops_reported": 0, "flops_untracked": 0}
    result = {ops.OP: "result", **flops}
    assert read_checked(ops.Op.FEATURES_AND_PREDICT, result, [np.zeros(2), np.zeros(2)])["flops_measured"] == 4
    with pytest.raises(BrokenReply, match="features_and_predict: expects parts") as caught:
        read_checked(ops.Op.FEATURES_AND_PREDICT, result, [np.zeros(2)])
    assert caught.value.header == result  # kept: its FLOP fields may still be charged
    with pytest.raises(BrokenReply, match="field 'handle'"):
        read_checked(ops.Op.LOAD_PREDICTOR, {**result, "handle": 0}, [])  # 0 names no predictor
    with pytest.raises(BrokenReply, match="field 'error'"):
        read_checked(messages.ERROR, {ops.OP: "error", "message": "m"}, [])


@pytest.mark.parametrize("op", sorted(ops.SERVED))
def test_every_served_op_s_result_is_read_through_its_declaration(op: ops.Op) -> None:
    """No served request's reply is taken as sent: a ``result`` that breaks its declaration
    (here: parts it does not declare) is refused naming the request."""
    with pytest.raises(BrokenReply, match=f"result of {op}"):
        read_checked(op, {ops.OP: "result", "status": "failed", "error": "e"}, [b"x"] * 7)


def test_an_undeclared_field_never_comes_out_of_a_reply() -> None:
    flops = {"flops_measured": 4, "flops_reported": 0, "flops_untracked": 0}
    read = read_checked(ops.Op.FEATURES, {ops.OP: "result", **flops, "smuggled": "x" * 10**6}, [np.zeros(2)])
    assert read == flops
    ready = read_checked(messages.READY, {ops.OP: "ready", "device": "cpu", "smuggled": 1}, [])
    assert ready == {"device": "cpu"}


def test_harness_code_reads_frames_only_through_the_learner_host_client() -> None:
    """``wire.receive`` on the harness side is called by :class:`LearnerHost` alone, whose
    ``call`` reads every reply through :func:`read_checked` (``messages.read_reply``); the host
    side (host.py) is the other reader."""
    readers = set()
    for folder in ("services", "workers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if re.search(
                r"\bwire\.receive\(|^from workers\.sandbox\.wire import .*\breceive\b", path.read_text(), re.M
            ):
                readers.add(str(path.relative_to(ROOT)))
    assert readers == {"workers/sandbox/client.py", "workers/sandbox/host.py"}


FORGER_SOURCE = '''
import gc, json, struct
import numpy as np
from workers.learners.protocol import Resources

def _forge(header):
    """A frame of its own on the host's protocol pipe, ahead of the real reply."""
    pipe = next(o for o in gc.get_objects() if type(o).__name__ == "Host").proto_out
    head = json.dumps({**header, "parts": []}).encode()
    pipe.write(struct.pack(">Q", len(head)) + head)
    pipe.flush()

class Forger:
    name = "forger"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx): return np.zeros((len(images), 2), np.float32)
    def features(self, predictor, images, ctx):
        if predictor.startswith(b"frame:"):  # a message of the host's own, in the middle of a call
            _forge(json.loads(predictor[6:]))
        return np.zeros((len(images), 1), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx):
        if data.startswith(b"handle:"):
            _forge({"op": "result", "handle": json.loads(data[7:]), "flops_measured": 0, "flops_reported": 0})
        return data

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
    num_train=0,
    num_dev=0,
)


@pytest.mark.parametrize("handle", ['"1"', "-1", "true"])
def test_a_probe_reply_with_a_bad_handle_is_a_wire_error_and_kills_the_host(tmp_path: Path, handle: str) -> None:
    (tmp_path / "nevis_handle_forger.py").write_text(FORGER_SOURCE)
    images = np.zeros((2, 4, 4, 3), np.uint8)
    with LearnerHost(HostSpec("nevis_handle_forger:make", import_paths=(str(tmp_path),))) as host:
        learner = SandboxedLearner(host)
        honest = learner.load_predictor(b"honest", INFO)
        assert learner.features(honest, images).shape == (2, 1)  # the host works
        with pytest.raises(wire.WireError, match="result of load_predictor: field 'handle'"):
            learner.load_predictor(b"handle:" + handle.encode(), INFO)
        assert not host.alive  # killed before the call raised
        with pytest.raises(LearnerHostDied):  # not the forged call's real reply, still in the pipe
            learner.features(honest, images)


@pytest.mark.parametrize(
    ("frame", "raised", "named"),
    [
        (
            '{"op": "flops", "flops_measured": -1, "flops_reported": 0}',
            wire.WireError,
            "flops report: field 'flops_measured'",
        ),
        ('{"op": "past_train", "order": 1}', LearnerError, "unexpected 'past_train' frame"),  # nothing asked for it
    ],
)
def test_a_host_message_is_read_through_its_declaration_and_an_unasked_one_ends_the_host(
    tmp_path: Path, frame: str, raised: type[Exception], named: str
) -> None:
    (tmp_path / "nevis_message_forger.py").write_text(FORGER_SOURCE)
    images = np.zeros((2, 4, 4, 3), np.uint8)
    with LearnerHost(HostSpec("nevis_message_forger:make", import_paths=(str(tmp_path),))) as host:
        learner = SandboxedLearner(host)
        forged = learner.load_predictor(b"frame:" + frame.encode(), INFO)
        with pytest.raises(raised, match=named):
            learner.features(forged, images)
        assert not host.alive  # it waits for an answer, or sends its real reply next: out of step
