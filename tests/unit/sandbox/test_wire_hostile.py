"""Hostile frames: whatever a learner writes into the pipe decodes or raises WireError, quickly and
without allocating what the frame claims; through a real pipe, the host that sent it is killed
so the next request cannot read a stale reply."""

from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy

from workers.learners.protocol import TaskInfo
from workers.sandbox import wire
from workers.sandbox.client import HostSpec, LearnerHost, LearnerHostDied
from workers.sandbox.learner_calls import SandboxedLearner


def _frame(head: bytes | dict, *payloads: bytes) -> io.BytesIO:
    raw = head if isinstance(head, bytes) else json.dumps(head).encode()
    return io.BytesIO(struct.pack(">Q", len(raw)) + raw + b"".join(payloads))


def _array_frame(data: bytes) -> io.BytesIO:
    return _frame({"op": "result", "parts": [["a", len(data)]]}, data)


def _npy(shape: tuple, descr: str = "<f8", payload: bytes = b"", fortran: bool = False) -> bytes:
    """An .npy part with a header written by hand: it may claim anything."""
    buffer = io.BytesIO()
    npy.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": fortran, "shape": shape})
    return buffer.getvalue() + payload


def _refused(stream: io.BytesIO, words: str, **limits: int) -> None:
    """The frame raises WireError naming ``words``, in well under a second, allocating little."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(wire.WireError, match=words):
            wire.receive(stream, **limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0
    assert peak < 64 * 1024 * 1024, f"decoding a refused frame allocated {peak} bytes"


def test_an_array_claiming_two_to_the_forty_elements_is_refused_before_allocation() -> None:
    _refused(_array_frame(_npy((2**40,), payload=b"\0" * 64)), "claims shape")
    _refused(_array_frame(_npy((2**31, 2**31, 2**31))), "claims shape")


def test_an_array_whose_payload_is_short_or_long_is_refused() -> None:
    _refused(_array_frame(_npy((10,), payload=b"\0" * 40)), "carries 40 bytes")
    _refused(_array_frame(_npy((1,), payload=b"\0" * 16)), "carries 16 bytes")


@pytest.mark.parametrize(
    "array",
    [
        np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]),  # structured
        np.array(["abc", "de"]),  # str
        np.array([b"abc"]),  # bytes
        np.zeros(2, dtype="V8"),  # void
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.array([1, 2], dtype="timedelta64[s]"),
        np.zeros(2, dtype=np.complex64),
    ],
)
def test_only_plain_numeric_dtypes_are_accepted(array: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    _refused(_array_frame(buffer.getvalue()), "numeric")


@pytest.mark.parametrize("descr", ["|O", "<U5", "|V4", "<M8[s]", "<c8", [("a", "<i4")], ("<f4", (1000000,))])
def test_hand_written_headers_with_other_dtypes_are_refused(descr) -> None:
    _refused(_array_frame(_npy((1,), descr=descr, payload=b"\0" * 4)), "numeric|carries|decoded")


def test_other_npy_versions_and_garbage_are_refused() -> None:
    _refused(_array_frame(b"\x93NUMPY\x03\x00" + b"\0" * 64), "version")
    _refused(_array_frame(b"not an array at all"), "could not be decoded")
    _refused(_array_frame(_npy((-1,))), "shape|decoded")


def test_arrays_come_back_writable_in_either_order() -> None:
    matrix = np.asfortranarray(np.arange(12, dtype=">i4").reshape(3, 4))
    buffer = io.BytesIO()
    wire.send(buffer, {"op": "x"}, [matrix, np.zeros((0, 5), np.float32), np.bool_([True, False])])
    buffer.seek(0)
    _, (back, empty, flags) = wire.receive(buffer)
    np.testing.assert_array_equal(back, matrix)
    assert empty.shape == (0, 5) and flags.tolist() == [True, False]
    back[0, 0] = 7  # learners may work in place on what they are sent
    assert back[0, 0] == 7


def test_deep_nesting_is_refused_without_recursion() -> None:
    _refused(_frame(b"[" * 200_000), "deeper")
    _refused(_frame(b'{"a":' * 100_000), "deeper")
    nested = {"op": "x", "parts": []}
    for _ in range(wire.MAX_HEADER_DEPTH):
        nested = {"v": nested, "parts": []}
    _refused(_frame(nested), "deeper")


def test_brackets_inside_strings_do_not_count() -> None:
    header = {"op": "x", "s": "[{" * 5000, "t": '\\"[[[' * 1000, "u": "\\" * 7 + '"' + "[" * 100}
    back, _ = wire.receive(_frame({**header, "parts": []}))
    assert back == header


def test_strings_across_scan_blocks_keep_their_escapes() -> None:
    """The scan reads a long header a block at a time: a string spanning blocks, full of
    escaped quotes, backslashes and brackets, still hides its brackets, and depth still counts."""
    text = 'x\\"[{\\' * 300_000  # over a MiB once JSON-escaped
    shallow, deep = {"v": 1}, {"v": 1}
    for _ in range(10):
        shallow = {"v": [shallow]}
    for _ in range(wire.MAX_HEADER_DEPTH):
        deep = {"v": [deep]}
    header = {"op": "x", "s": text, "n": shallow}
    assert wire.receive(_frame({**header, "parts": []}))[0] == header
    _refused(_frame({"op": "x", "s": text, "n": deep, "parts": []}), "deeper")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"op":"r","v":NaN,"parts":[]}',
        b'{"op":"r","v":Infinity,"parts":[]}',
        b'{"op":"r","v":-Infinity,"parts":[]}',
        b'{"op":"r","v":1e400,"parts":[]}',
    ],
)
def test_numbers_must_be_finite(raw: bytes) -> None:
    _refused(_frame(raw), "finite")


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"\xff\xfe{}", "decoded"),  # not UTF-8
        ('{"op":"r","parts":[]}'.encode("utf-16"), "decoded"),
        (b'{"op": "r", "parts": [], ', "decoded"),  # truncated JSON
        (b'{"op":"r","n":' + b"9" * 5000 + b',"parts":[]}', "decoded"),  # an int Python will not parse
        (b'"just a string"', "object"),
        (b'{"op":"r","parts":{}}', "parts"),
    ],
)
def test_headers_that_are_not_json_objects_are_refused(raw: bytes, words: str) -> None:
    _refused(_frame(raw), words)


def test_part_counts_and_sizes_are_bounded() -> None:
    _refused(_frame({"op": "r", "parts": [["b", 0]] * (wire.MAX_PARTS + 1)}), "parts")
    _refused(_frame({"op": "r", "parts": [["b", wire.MAX_PART_BYTES + 1]]}), "descriptor")
    _refused(_frame({"op": "r", "parts": [["b", True]]}), "descriptor")
    _refused(_frame({"op": "r", "parts": [["b", wire.MAX_PART_BYTES]] * 3}), "total")
    _refused(_frame({"op": "r", "parts": [["b", 20]]}, b"x" * 20), "descriptor", max_part_bytes=10)
    _refused(_frame({"op": "r", "parts": [["b", 6]] * 2}, b"x" * 12), "total", max_frame_bytes=10)
    _refused(_frame({"op": "r", "parts": [["b", 10]]}, b"short"), "closed the pipe")
    assert wire.MAX_PART_BYTES < 16 * 1024**3


def test_any_failure_to_decode_is_a_wire_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(np, "frombuffer", no_memory)
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3))
    _refused(_array_frame(buffer.getvalue()), "MemoryError")


# --- through a real pipe -------------------------------------------------------------------

HOSTILE_SOURCE = '''
import gc, struct
import numpy as np
from workers.learners.protocol import Resources

def _pipe():
    """The host's own protocol pipe: learner code can always find it."""
    return next(o for o in gc.get_objects() if type(o).__name__ == "Host").proto_out

FRAMES = {
    "deep": b"[" * 200000,
    "nan": b'{"op":"result","x":NaN,"parts":[]}',
    "huge_array": None,
}

class Hostile:
    name = "hostile"
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self): return None
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx): return np.zeros((len(images), 2), np.float32)
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data.decode()
    def features(self, predictor, images, ctx):
        out = _pipe()
        if predictor == "huge_array":
            from numpy.lib import format as npy
            import io
            b = io.BytesIO()
            npy.write_array_header_1_0(b, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)})
            part = b.getvalue() + bytes(64)
            head = ('{"op":"result","parts":[["a",%d]]}' % len(part)).encode()
            out.write(struct.pack(">Q", len(head)) + head + part)
        elif predictor in FRAMES:
            raw = FRAMES[predictor]
            out.write(struct.pack(">Q", len(raw)) + raw)
        out.flush()
        return np.full((len(images), 1), 5.0, np.float32)  # the real reply follows the forged frame

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
    num_train=0,
    num_dev=0,
)


@pytest.fixture
def hostile_dir(tmp_path: Path) -> Path:
    (tmp_path / "nevis_hostile_wire.py").write_text(HOSTILE_SOURCE)
    return tmp_path


@pytest.mark.parametrize("forged", ["deep", "nan", "huge_array"])
def test_a_forged_frame_kills_the_host_and_the_next_call_gets_no_stale_reply(hostile_dir, forged) -> None:
    images = np.zeros((2, 4, 4, 3), np.uint8)
    with LearnerHost(HostSpec("nevis_hostile_wire:make", import_paths=(str(hostile_dir),))) as host:
        learner = SandboxedLearner(host)
        honest = learner.load_predictor(b"honest", INFO)
        assert learner.features(honest, images).tolist() == [[5.0], [5.0]]  # the host works
        handle = learner.load_predictor(forged.encode(), INFO)
        with pytest.raises(wire.WireError):
            learner.features(handle, images)
        with pytest.raises(LearnerHostDied):  # not the forged call's real reply, still in the pipe
            learner.features(honest, images)
        assert _ends(host)  # killed (SIGKILL lands a moment later)


def _ends(host: LearnerHost, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while host.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    return not host.alive
