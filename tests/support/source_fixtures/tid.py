"""Tiny TID2008 / TID2013 RAR archives, written by hand in the RAR 4 format with stored
(uncompressed) members, which ``rarfile`` reads without an external tool."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes

_MARK = b"Rar!\x1a\x07\x00"


def _block(kind: int, flags: int, body: bytes) -> bytes:
    raw = struct.pack("<BHH", kind, flags, 7 + len(body)) + body
    return struct.pack("<H", zlib.crc32(raw) & 0xFFFF) + raw


def stored_rar(members: Mapping[str, bytes]) -> bytes:
    """A RAR 4 archive of the members, stored (method 0x30), in the given order."""
    out = [_MARK, _block(0x73, 0, b"\x00" * 6)]
    for name, data in members.items():
        encoded = name.replace("/", "\\").encode()
        body = (
            struct.pack(
                "<IIBIIBBHI", len(data), len(data), 2, zlib.crc32(data), 0x5A000000, 20, 0x30, len(encoded), 0x20
            )
            + encoded
        )
        out += [_block(0x74, 0x8000, body), data]
    out.append(_block(0x7B, 0x4000, b""))
    return b"".join(out)


def write_tid(folder: Path, year: int) -> dict[str, tuple[int, None]]:
    """All MSSIM values (distinct, descending) and a few distorted images, some upper-case as
    in TID2013; returns each image's expected bucket."""
    types, levels = (17, 4) if year == 2008 else (24, 5)
    names = [
        f"i{s:02d}_{t:02d}_{lv}.bmp" for s in range(1, 26) for t in range(1, types + 1) for lv in range(1, levels + 1)
    ]
    values = {n: 1.0 - i / len(names) for i, n in enumerate(names)}
    per = len(names) // 5
    rank = {n: i for i, n in enumerate(sorted(names, key=values.get))}
    picked = names[:: len(names) // 9][:9]
    members = {"readme": b"TID", "reference_images/I01.BMP": image_bytes(6, 6, fmt="BMP")}
    value_file = "MSSIM.TXT" if year == 2008 else "MSSIM.txt"
    members[value_file] = "".join(f"{values[n]:.6f}\r\n" for n in names).encode()
    expected = {}
    for i, name in enumerate(picked):
        stored = name.upper().replace(".BMP", ".bmp") if i % 2 and year == 2013 else name
        members[f"distorted_images/{stored}"] = image_bytes(12, 8 + i, seed=i, fmt="BMP")
        expected[name] = (rank[name] // per, None)
    (folder / f"tid{year}.rar").write_bytes(stored_rar(members))
    return expected


def write_tid2008(folder: Path) -> dict[str, tuple[int, None]]:
    return write_tid(folder, 2008)


def write_tid2013(folder: Path) -> dict[str, tuple[int, None]]:
    return write_tid(folder, 2013)


__all__ = ["stored_rar", "write_tid2008", "write_tid2013"]
