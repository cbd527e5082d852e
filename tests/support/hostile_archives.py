"""Archives a hostile submitter would upload, built cheaply: a zip bomb written raw from one
compressed block, and archives of 300,000 members."""

from __future__ import annotations

import gzip
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path


def zip_bomb(path: Path, *, members: int = 1024, member_bytes: int = 16 * 1024 * 1024) -> Path:
    """``members`` deflated members of ``member_bytes`` zeros each (16 GiB from ~16 MB),
    written raw from one compressed block so that building it inflates nothing."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = compressor.compress(bytes(member_bytes)) + compressor.flush()
    crc = zlib.crc32(bytes(member_bytes))
    central, offset = [], 0
    with open(path, "wb") as out:
        for index in range(members):
            name = f"pkg/m{index}.py".encode()
            local = (
                struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), member_bytes, len(name), 0)
                + name
            )
            central.append(
                struct.pack(
                    "<4s4B4HL2L5H2L",
                    b"PK\x01\x02",
                    20,
                    3,
                    20,
                    0,
                    0,
                    8,
                    0,
                    0,
                    crc,
                    len(data),
                    member_bytes,
                    len(name),
                    0,
                    0,
                    0,
                    0,
                    0o100644 << 16,
                    offset,
                )
                + name
            )
            out.write(local)
            out.write(data)
            offset += len(local) + len(data)
        directory = b"".join(central)
        out.write(directory)
        out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, members, members, len(directory), offset, 0))
    return path


def many_members_tar(path: Path, count: int = 300_000) -> Path:
    """A gzipped tar of ``count`` empty members, headers only (cheap to write, costly to list)."""
    with gzip.open(path, "wb", compresslevel=1) as out:
        for index in range(count):
            out.write(tarfile.TarInfo(f"pkg/m{index}.py").tobuf(format=tarfile.USTAR_FORMAT))
        out.write(bytes(1024))
    return path


def many_members_zip(path: Path, count: int = 300_000) -> Path:
    """A zip of ``count`` empty members (a large central directory)."""
    with zipfile.ZipFile(path, "w") as archive:
        for index in range(count):
            archive.writestr(zipfile.ZipInfo(f"{index}.py"), b"")
    return path
