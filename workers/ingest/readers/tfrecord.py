"""TFRecord files and ``tf.train.Example`` messages, read without TensorFlow.

The reference implementation (dm_nevis) keeps its prepared datasets as TFRecord files; reading
them here lets its users import what they already prepared instead of downloading again
(:mod:`workers.ingest.readers.reference_tfrecords`).

A TFRecord file is a sequence of records, each framed as: the payload's length (uint64,
little-endian), the masked CRC-32C of those 8 bytes (uint32), the payload, and the masked
CRC-32C of the payload (uint32). Both checksums are verified, so a damaged or truncated file is
an error naming the file and the record, never a wrong image. Records are read one at a time:
memory is one record, whatever the file's size.

``tf.train.Example`` is parsed from its protobuf wire form by hand (three small messages; no
generated code, no TensorFlow): ``Example{features=1}``, ``Features{map<string, Feature>
feature=1}``, ``Feature{oneof bytes_list=1 | float_list=2 | int64_list=3}``, each list holding
its values in field 1 (packed or not).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from services.core.errors import DataIntegrityError

_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")

FeatureValues = list[bytes] | list[int] | list[float]


class TFRecordError(DataIntegrityError):
    """A TFRecord file is truncated, fails a checksum, or holds a record that is not an Example."""


def _crc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # reflected Castagnoli polynomial
        table.append(crc)
    return tuple(table)


_TABLE = _crc_table()


def crc32c_bytewise(data: bytes | memoryview) -> int:
    """CRC-32C one byte at a time: the definition, used for short inputs."""
    state, table = 0xFFFFFFFF, _TABLE
    for byte in bytes(data):
        state = table[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state ^ 0xFFFFFFFF


_TABLE_NP = np.asarray(_TABLE, dtype=np.uint32)
_BLOCK_POWER = 4  # blocks of 16 bytes in the vectorised path


@functools.cache
def _zeros(power: int) -> np.ndarray:
    """``[4, 256]`` tables of the linear map "run 2**power zero bytes through the register",
    one table per byte of the register, so applying the map is four look-ups."""
    basis = np.left_shift(np.uint32(1), np.arange(32, dtype=np.uint32))
    if power == 0:
        columns = _TABLE_NP[basis & 0xFF] ^ (basis >> 8)
    else:
        half = _zeros(power - 1)
        columns = _apply(half, _apply(half, basis))
    values = np.arange(256)
    tables = np.zeros((4, 256), dtype=np.uint32)
    for part in range(4):
        for bit in range(8):
            tables[part, (values >> bit) & 1 == 1] ^= columns[8 * part + bit]
    return tables


def _apply(tables: np.ndarray, state: np.ndarray) -> np.ndarray:
    return (
        tables[0][state & 0xFF]
        ^ tables[1][(state >> 8) & 0xFF]
        ^ tables[2][(state >> 16) & 0xFF]
        ^ tables[3][state >> 24]
    )


def crc32c_vectorised(data: bytes | memoryview) -> int:
    """CRC-32C with numpy: the same values as the byte loop, tens of times faster on images.

    The register is linear over GF(2), so the CRC of a message is (the initial register run
    through as many zero bytes) XOR (the message's CRC from a zero register), and that of two
    halves is (the first's run through as many zero bytes as the second has) XOR (the
    second's). Zero bytes in front change nothing from a zero register. So: pad the front to
    16-byte blocks, compute every block's CRC side by side (16 vector steps), combine
    neighbours pairwise (log2 of the block count vector steps), then add the initial
    register's part.
    """
    raw = bytes(data)
    if len(raw) < 512:
        return crc32c_bytewise(raw)
    block = 1 << _BLOCK_POWER
    padded = np.frombuffer(bytes(-len(raw) % block) + raw, dtype=np.uint8).reshape(-1, block)
    state = np.zeros(len(padded), dtype=np.uint32)
    for column in padded.T.copy():
        state = _TABLE_NP[(state ^ column) & 0xFF] ^ (state >> 8)
    power = _BLOCK_POWER
    while len(state) > 1:
        if len(state) % 2:
            state = np.concatenate((np.zeros(1, dtype=np.uint32), state))
        state = _apply(_zeros(power), state[0::2]) ^ state[1::2]
        power += 1
    initial = np.full(1, 0xFFFFFFFF, dtype=np.uint32)
    for bit in range(len(raw).bit_length()):
        if len(raw) >> bit & 1:
            initial = _apply(_zeros(bit), initial)
    return int(state[0] ^ initial[0]) ^ 0xFFFFFFFF


try:  # optional C implementation, where installed: the same values, faster still
    import google_crc32c as _fast  # type: ignore[import-not-found]

    def crc32c(data: bytes | memoryview) -> int:
        """CRC-32C (Castagnoli) of ``data``."""
        return int(_fast.value(bytes(data)))
except ImportError:  # pragma: no cover - depends on what is installed
    crc32c = crc32c_vectorised


def masked_crc32c(data: bytes | memoryview) -> int:
    """The checksum TFRecord stores: CRC-32C rotated right by 15 bits plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def iter_records(path: Path) -> Iterator[bytes]:
    """The payloads of the TFRecord file at ``path``, in order, each checked against its CRCs.

    Raises:
        TFRecordError: the file ends inside a record, or a length or payload fails its CRC; the
            message names the file, the record (0-based) and its byte offset.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        number, offset = 0, 0
        while True:
            header = handle.read(_HEADER.size)
            if not header:
                return
            where = f"{path}: record {number} (byte {offset})"
            if len(header) < _HEADER.size:
                raise TFRecordError(
                    f"{where}: the file is truncated inside the record's header "
                    f"({len(header)} of {_HEADER.size} bytes)."
                )
            length, length_crc = _HEADER.unpack(header)
            if masked_crc32c(header[:8]) != length_crc:
                raise TFRecordError(
                    f"{where}: the record's length fails its CRC-32C check: the file is "
                    "corrupt (or not a TFRecord file)."
                )
            end = offset + _HEADER.size + length + _FOOTER.size
            if end > size:
                raise TFRecordError(
                    f"{where}: the file is truncated: the record needs {length} bytes of "
                    f"data and its checksum, the file ends {end - size} bytes short."
                )
            payload = handle.read(length)
            (payload_crc,) = _FOOTER.unpack(handle.read(_FOOTER.size))
            if masked_crc32c(payload) != payload_crc:
                raise TFRecordError(
                    f"{where}: the record's data ({length} bytes) fails its CRC-32C check: the file is corrupt."
                )
            yield payload
            number, offset = number + 1, end


# --- protobuf wire format -------------------------------------------------------------------


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ValueError("a varint runs past the end of the message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("a varint is longer than 10 bytes")


def _fields(data: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """``(field number, wire type, value)`` of each field: ints for varints and fixed-width
    values, memoryviews for length-delimited ones. Groups (wire types 3, 4) are refused."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"field {number} has wire type {wire}, which Example does not use")
        if pos > len(data):
            raise ValueError(f"field {number} runs past the end of the message")
        yield number, wire, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature(data: memoryview) -> FeatureValues:
    values: list = []
    for kind, wire, body in _fields(data):
        if wire != 2 or not isinstance(body, memoryview):
            continue
        for number, item_wire, item in _fields(body):
            if number != 1:
                continue
            if kind == 1 and isinstance(item, memoryview):
                values.append(bytes(item))
            elif kind == 3 and item_wire == 0:
                values.append(_signed64(int(item)))  # type: ignore[arg-type]
            elif kind == 3 and isinstance(item, memoryview):  # packed int64s
                pos = 0
                while pos < len(item):
                    raw, pos = _varint(item, pos)
                    values.append(_signed64(raw))
            elif kind == 2 and item_wire == 5:
                values.append(struct.unpack("<f", int(item).to_bytes(4, "little"))[0])  # type: ignore[arg-type]
            elif kind == 2 and isinstance(item, memoryview):  # packed floats
                values.extend(v for (v,) in struct.iter_unpack("<f", item))
    return values


def parse_example(payload: bytes) -> dict[str, FeatureValues]:
    """The features of a serialised ``tf.train.Example``: name -> its list of values.

    Raises:
        ValueError: the bytes are not a well-formed protobuf message.
    """
    features: dict[str, FeatureValues] = {}
    for number, wire, body in _fields(memoryview(payload)):
        if number != 1 or wire != 2 or not isinstance(body, memoryview):
            continue
        for entry_number, entry_wire, entry in _fields(body):
            if entry_number != 1 or entry_wire != 2 or not isinstance(entry, memoryview):
                continue
            name, values = "", []
            for part, part_wire, value in _fields(entry):
                if part == 1 and part_wire == 2 and isinstance(value, memoryview):
                    name = bytes(value).decode("utf-8")
                elif part == 2 and part_wire == 2 and isinstance(value, memoryview):
                    values = _feature(value)
            features[name] = values
    return features


__all__ = [
    "FeatureValues",
    "TFRecordError",
    "crc32c",
    "crc32c_bytewise",
    "crc32c_vectorised",
    "iter_records",
    "masked_crc32c",
    "parse_example",
]
