"""The wire between harness code and a learner host carries JSON and numbers, never code."""

from __future__ import annotations

import io
import json
import pickle
import struct

import numpy as np
import pytest

from workers.sandbox import wire


def _roundtrip(header, parts=()):
    buffer = io.BytesIO()
    wire.send(buffer, header, parts)
    buffer.seek(0)
    return wire.receive(buffer)


def test_headers_bytes_and_arrays_round_trip() -> None:
    images = np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3)
    header, parts = _roundtrip({"op": "x", "n": 3}, [b"abc", images, np.float32([1.5])])
    assert header == {"op": "x", "n": 3}
    assert parts[0] == b"abc"
    np.testing.assert_array_equal(parts[1], images)
    assert parts[1].dtype == np.uint8 and parts[2].dtype == np.float32


def _frame(header: dict, payloads: list[bytes]) -> io.BytesIO:
    head = json.dumps(header).encode()
    return io.BytesIO(struct.pack(">Q", len(head)) + head + b"".join(payloads))


def test_a_pickled_object_array_is_refused_not_unpickled() -> None:
    class Boom:
        def __reduce__(self):
            return (print, ("this must never run",))

    buffer = io.BytesIO()
    np.save(buffer, np.array([Boom()], dtype=object), allow_pickle=True)
    data = buffer.getvalue()
    with pytest.raises(wire.WireError, match="numeric"):
        wire.receive(_frame({"op": "result", "parts": [["a", len(data)]]}, [data]))


@pytest.mark.parametrize(
    ("header", "payloads", "words"),
    [
        ({"op": "r"}, [], "parts"),  # no parts list
        ({"op": "r", "parts": [["x", 1]]}, [b"1"], "descriptor"),
        ({"op": "r", "parts": [["b", -1]]}, [], "descriptor"),
        ({"op": "r", "parts": [["b", 2**62]]}, [], "descriptor"),
        ({"op": "r", "parts": [["b", 10]]}, [b"short"], "closed the pipe"),
    ],
)
def test_malformed_frames_are_refused(header, payloads, words) -> None:
    with pytest.raises(wire.WireError, match=words):
        wire.receive(_frame(header, payloads))


def test_an_oversized_header_is_refused_before_it_is_read() -> None:
    stream = io.BytesIO(struct.pack(">Q", wire.MAX_HEADER_BYTES + 1))
    with pytest.raises(wire.WireError, match="over"):
        wire.receive(stream)


def test_sending_refuses_anything_but_bytes_and_numeric_arrays() -> None:
    with pytest.raises(wire.WireError):
        wire.send(io.BytesIO(), {"op": "x"}, [np.array([object()], dtype=object)])
    with pytest.raises(wire.WireError):
        wire.send(io.BytesIO(), {"op": "x"}, [pickle])  # a module is no part
