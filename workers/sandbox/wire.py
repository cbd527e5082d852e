"""Frames between harness code and a learner host: a JSON header and binary parts.

A frame is an 8-byte big-endian length of the header, the header (UTF-8 JSON object), then
the parts the header's ``parts`` list announces: raw bytes (``"b"``) or a numeric array
(``"a"``, NumPy's ``.npy`` format). Nothing is ever unpickled on the harness side, so a
hostile learner that writes its own frames can send wrong numbers, never code.

Everything a frame claims is checked before anything is allocated for it: the header's size
and nesting depth (scanned on the raw bytes, so no recursive parser sees a deep one), how
many parts and how large, and an array's shape and dtype against the bytes that carry it.
Any failure to decode, whatever Python raised for it, is a :class:`WireError`, after which
the stream is closed and the client kills the host (the rest of the frame is still in the
pipe), so a hostile frame can never make the next request read the previous one's reply. What the fields of a
header mean is :mod:`workers.sandbox.messages`' business.
"""

from __future__ import annotations

import io
import json
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, TypeVar

import numpy as np
from numpy.lib import format as npy

from services.core.errors import LearnerError

MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_HEADER_DEPTH = 32  # honest headers nest a few levels (a search space's choices: 5)
MAX_PARTS = 16  # a trial request carries at most 7 (dev, train with originals, state)
MAX_PART_BYTES = 4 * 1024**3  # one part from a learner host (a predictor, a learner state)
MAX_FRAME_BYTES = 8 * 1024**3  # all parts of one frame from a learner host
HARNESS_PART_BYTES = 16 * 1024**3  # what a host accepts from harness code: a task's splits are large
ARRAY_KINDS = "biuf"  # bool, signed and unsigned ints, floats: nothing with fields, text or objects
MAX_ARRAY_DIMS = 32
_LENGTH = struct.Struct(">Q")
_CHUNK = 1 << 24
_SCAN_BLOCK = 1 << 20
_QUOTE, _BACKSLASH, _OPENERS, _CLOSERS = ord('"'), ord("\\"), (ord("["), ord("{")), (ord("]"), ord("}"))

Part = bytes | np.ndarray
T = TypeVar("T")


class WireError(LearnerError):
    """The other side broke the frame format, sent too much, or went away."""


def send(stream: BinaryIO, header: dict[str, Any], parts: Sequence[Part] = ()) -> None:
    """Write one frame and flush it."""
    encoded = [_encode(p) for p in parts]
    head = json.dumps(
        {**header, "parts": [[kind, len(data)] for kind, data in encoded]}, allow_nan=False, separators=(",", ":")
    ).encode()
    stream.write(_LENGTH.pack(len(head)))
    stream.write(head)
    for _, data in encoded:
        stream.write(data)
    stream.flush()


Announce = Callable[[dict[str, Any], list[tuple[str, int]]], None]
"""A per-message check of a frame's header and announced parts (kind, bytes), run before any
part is read; it raises (ValueError or WireError) to refuse the frame unread."""


def receive(
    stream: BinaryIO,
    *,
    max_part_bytes: int = MAX_PART_BYTES,
    max_frame_bytes: int | None = MAX_FRAME_BYTES,
    announce: Announce | None = None,
) -> tuple[dict[str, Any], list[Part]]:
    """Read one frame; raises :class:`WireError` on a closed pipe or a malformed frame.

    ``max_part_bytes`` and ``max_frame_bytes`` (all parts together; None: no total) bound
    what the frame may announce; the defaults are for frames from a learner host, and a
    caller expecting less passes less, and ``announce`` holds each message to its own caps
    (:mod:`workers.trainer.frame_caps`) before its bytes are read. A stream that delivered a broken frame is closed:
    the rest of that frame is still in the pipe, and whatever is read after it would be out
    of step (the next request would get this one's reply).
    """
    try:
        return _receive(stream, max_part_bytes, max_frame_bytes, announce)
    except WireError:
        stream.close()
        raise


def _receive(
    stream: BinaryIO, max_part_bytes: int, max_frame_bytes: int | None, announce: Announce | None = None
) -> tuple[dict[str, Any], list[Part]]:
    (length,) = _LENGTH.unpack(_read(stream, _LENGTH.size))
    if length > MAX_HEADER_BYTES:
        raise WireError(f"frame header of {length} bytes is over the {MAX_HEADER_BYTES}-byte limit")
    header = _decoding("frame header", _parse_header, _read(stream, length))
    sizes = _part_sizes(header, max_part_bytes, max_frame_bytes)
    if announce is not None:
        try:
            announce(header, sizes)
        except ValueError as exc:
            raise WireError(str(exc)[:400]) from None
    parts: list[Part] = []
    for kind, size in sizes:
        if kind == "a":
            parts.append(_decoding("array part", _decode_array, _read(stream, size, into=bytearray)))
        else:
            parts.append(_read(stream, size))
    return header, parts


def _decoding(what: str, decode: Callable[[Any], T], data: Any) -> T:
    """``decode(data)``, with whatever it raises (MemoryError, RecursionError, ValueError...)
    turned into a :class:`WireError`: a frame that cannot be read is the sender's fault."""
    try:
        return decode(data)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure to decode hostile bytes is one error
        raise WireError(f"the {what} could not be decoded: {type(exc).__name__}: {str(exc)[:200]}") from None


def _parse_header(raw: bytes) -> dict[str, Any]:
    """The header object: UTF-8 JSON, nested at most MAX_HEADER_DEPTH deep, numbers finite."""
    text = raw.decode("utf-8")
    _check_depth(raw, MAX_HEADER_DEPTH)
    header = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    if not isinstance(header, dict) or not isinstance(header.get("parts"), list):
        raise WireError("frame header must be an object with a 'parts' list")
    return header


def _check_depth(raw: bytes, limit: int) -> None:
    """Refuse JSON whose arrays and objects nest deeper than ``limit``, in linear time, a block
    at a time and without recursion, before a recursive parser sees it.

    A quote opens or closes a string unless an odd run of backslashes comes before it; brackets
    count only outside strings. UTF-8 puts no ASCII byte inside a multi-byte character, so
    scanning bytes is exact.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return
    data = np.frombuffer(raw, np.uint8)
    inside, depth, backslashes = False, 0, 0
    for start in range(0, len(data), _SCAN_BLOCK):
        block = data[start : start + _SCAN_BLOCK]
        escaped, backslashes = _escaped(block, backslashes)
        in_string = np.logical_xor.accumulate((block == _QUOTE) & ~escaped) ^ inside
        opens = np.isin(block, _OPENERS) & ~in_string
        closes = np.isin(block, _CLOSERS) & ~in_string
        running = np.cumsum(opens.astype(np.int8) - closes.astype(np.int8), dtype=np.int32) + depth
        if int(running.max()) > limit:
            raise WireError(f"frame header nests deeper than {limit} levels")
        inside, depth = bool(in_string[-1]), int(running[-1])


def _escaped(block: np.ndarray, carried: int) -> tuple[np.ndarray, int]:
    """Which bytes of ``block`` follow an odd run of backslashes (``carried`` of them ended the
    block before), and how many backslashes end this one."""
    index = np.arange(len(block), dtype=np.int64)
    last_other = np.maximum.accumulate(np.where(block == _BACKSLASH, -1, index))
    run = index - last_other + np.where(last_other < 0, carried, 0)  # backslashes ending at each byte
    before = np.concatenate(([carried], run[:-1]))
    return (before & 1).astype(bool), int(run[-1])


def _no_constant(name: str) -> Any:
    raise WireError(f"frame header holds {name}: numbers on the wire must be finite")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise WireError(f"frame header holds {text[:40]}, which is not a finite number")
    return value


def _part_sizes(header: dict[str, Any], max_part_bytes: int, max_frame_bytes: int | None) -> list[tuple[str, int]]:
    """The parts the header announces, checked against the limits before any is read."""
    items = header.pop("parts")
    if len(items) > MAX_PARTS:
        raise WireError(f"frame announces {len(items)} parts; at most {MAX_PARTS} are allowed")
    sizes = []
    for item in items:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or item[0] not in ("a", "b")
            or not isinstance(item[1], int)
            or isinstance(item[1], bool)
            or not 0 <= item[1] <= max_part_bytes
        ):
            raise WireError(
                f'bad part descriptor {str(item)[:80]}: a part is ["a" or "b", bytes], at most {max_part_bytes} bytes'
            )
        sizes.append((item[0], item[1]))
    total = sum(size for _, size in sizes)
    if max_frame_bytes is not None and total > max_frame_bytes:
        raise WireError(f"frame parts total {total} bytes, over the {max_frame_bytes}-byte limit")
    return sizes


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


def _decode_array(data: bytearray) -> np.ndarray:
    """An ``.npy`` part as an array over its own buffer (writable, not copied): the header is
    read and its shape × itemsize matched against the payload before anything is allocated."""
    stream = io.BytesIO(data)
    version = npy.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = npy.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran, dtype = npy.read_array_header_2_0(stream)
    else:
        raise WireError(f"array part has .npy version {version}; only 1.0 and 2.0 are read")
    _check_array_type(shape, dtype)
    offset = stream.tell()
    count = math.prod(shape)
    if count * dtype.itemsize != len(data) - offset:
        raise WireError(
            f"array part claims shape {shape} of {dtype} ({count * dtype.itemsize} bytes) "
            f"but carries {len(data) - offset} bytes"
        )
    if count == 0:
        return np.empty(shape, dtype)
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


def _check_array_type(shape: Any, dtype: np.dtype) -> None:
    if dtype.kind not in ARRAY_KINDS or dtype.names is not None or dtype.subdtype is not None or dtype.hasobject:
        raise WireError(f"arrays on the wire must be numeric (bool, int, uint, float); got dtype {dtype}")
    if (
        not isinstance(shape, tuple)
        or len(shape) > MAX_ARRAY_DIMS
        or not all(isinstance(d, int) and d >= 0 for d in shape)
    ):
        raise WireError(f"array part has a bad shape {str(shape)[:80]}")


def _read(stream: BinaryIO, size: int, *, into: type[bytes] | type[bytearray] = bytes) -> Any:
    """Exactly ``size`` bytes, read as they arrive (nothing is allocated for a size claimed
    but not sent)."""
    if stream.closed:
        raise WireError("harness code closed the pipe after a broken frame: nothing after it is read")
    chunks, left = [], size
    while left:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            raise WireError("the learner host closed the pipe (it exited or was killed)")
        chunks.append(chunk)
        left -= len(chunk)
    return into().join(chunks)


__all__ = [
    "ARRAY_KINDS",
    "Announce",
    "HARNESS_PART_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_HEADER_DEPTH",
    "MAX_PARTS",
    "MAX_PART_BYTES",
    "Part",
    "WireError",
    "receive",
    "send",
]
