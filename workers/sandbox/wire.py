"""Frames between harness code and a learner host: a JSON header and binary parts.

A frame is an 8-byte big-endian length of the header, the header (UTF-8 JSON object), then
the parts the header's ``parts`` list announces: raw bytes (``"b"``) or a numeric array
(``"a"``, NumPy's ``.npy`` format read with ``allow_pickle=False``). Nothing is ever
unpickled on the harness side, so a hostile learner that writes its own frames can send
wrong numbers, never code. Sizes are capped before anything is allocated.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np

from services.core.errors import LearnerError

MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_PART_BYTES = 16 * 1024**3
_LENGTH = struct.Struct(">Q")

Part = bytes | np.ndarray


class WireError(LearnerError):
    """The other side broke the frame format, sent too much, or went away."""


def send(stream: BinaryIO, header: dict[str, Any], parts: Sequence[Part] = ()) -> None:
    """Write one frame and flush it."""
    encoded = [_encode(p) for p in parts]
    head = json.dumps({**header, "parts": [[kind, len(data)] for kind, data in encoded]},
                      allow_nan=False, separators=(",", ":")).encode()
    stream.write(_LENGTH.pack(len(head)))
    stream.write(head)
    for _, data in encoded:
        stream.write(data)
    stream.flush()


def receive(stream: BinaryIO) -> tuple[dict[str, Any], list[Part]]:
    """Read one frame; raises :class:`WireError` on a closed pipe or a malformed frame."""
    (length,) = _LENGTH.unpack(_read(stream, _LENGTH.size))
    if length > MAX_HEADER_BYTES:
        raise WireError(f"frame header of {length} bytes is over the {MAX_HEADER_BYTES}-byte limit")
    try:
        header = json.loads(_read(stream, length))
    except ValueError as exc:
        raise WireError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("parts"), list):
        raise WireError("frame header must be an object with a 'parts' list")
    parts: list[Part] = []
    for item in header.pop("parts"):
        if (not isinstance(item, list) or len(item) != 2 or item[0] not in ("a", "b")
                or not isinstance(item[1], int) or not 0 <= item[1] <= MAX_PART_BYTES):
            raise WireError(f"bad part descriptor {str(item)[:80]}")
        data = _read(stream, item[1])
        parts.append(_decode_array(data) if item[0] == "a" else data)
    return header, parts


def _encode(part: Part) -> tuple[str, bytes]:
    if isinstance(part, np.ndarray):
        if part.dtype.hasobject:
            raise WireError(f"arrays on the wire must be numeric; got dtype {part.dtype}")
        buffer = io.BytesIO()
        np.save(buffer, part, allow_pickle=False)
        return "a", buffer.getvalue()
    if isinstance(part, (bytes, bytearray, memoryview)):
        return "b", bytes(part)
    raise WireError(f"a frame part must be bytes or a numeric array; got {type(part).__name__}")


def _decode_array(data: bytes) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        raise WireError(f"an array part does not hold a numeric .npy array: {exc}") from None


def _read(stream: BinaryIO, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(min(left, 1 << 24))
        if not chunk:
            raise WireError("the learner host closed the pipe (it exited or was killed)")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


__all__ = ["MAX_HEADER_BYTES", "MAX_PART_BYTES", "Part", "WireError", "receive", "send"]
