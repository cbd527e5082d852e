"""Reading an uploaded bundle's archive, a zip (or wheel) or a .tar.gz, as a stream of entries.

Kept apart from the pass that consumes the entries (:mod:`workers.sandbox.bundles.unpack`)
because each format has hazards of its own, refused here as the archive is read: links,
devices, encrypted or sparse members, a zip's central directory over the member cap, sizes
declared beyond the budget, bytes after a tar's end. Whatever the archive libraries raise on
bad input becomes a :class:`~services.core.errors.BundleError`.
"""

from __future__ import annotations

import itertools
import lzma
import os
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.core.errors import BundleError
from workers.sandbox.bundles import limits as bundle_limits
from workers.sandbox.bundles.gzip_stream import CHUNK as _CHUNK
from workers.sandbox.bundles.gzip_stream import SingleGzipStream
from workers.sandbox.bundles.limits import UnpackBudget, check_count, tar_stream_limit

Entry = tuple[str, bool, Iterator[bytes]]
"""An archive entry as the pass sees it: its name, whether it is a folder, its bytes."""

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # one central directory header


def archive_entries(path: Path, *, kind: str, budget: UnpackBudget) -> Iterator[Entry]:
    """The entries of a ``"zip"`` or ``"tar"`` archive, checked as they are read."""
    return _zip_entries(path, budget) if kind == "zip" else _tar_entries(path, budget)


def zip_entry_count(path: Path, *, stop_after: int) -> int:
    """Entries in a zip's central directory, counted by walking their headers (not trusting
    the record's count field), stopping at ``stop_after``; 0 if the directory is not found
    (:mod:`zipfile` then says what is wrong).
    """
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        tail_start = max(0, end - (_EOCD.size + 0xFFFF))
        handle.seek(tail_start)
        tail = handle.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            return 0
        cd_size = _EOCD.unpack_from(tail, at)[5]
        cd_end = tail_start + at
        locator_at = at - _ZIP64_LOCATOR.size
        if locator_at >= 0 and tail[locator_at : locator_at + 4] == b"PK\x06\x07":
            cd_end = _ZIP64_LOCATOR.unpack_from(tail, locator_at)[2]  # the zip64 record
            handle.seek(cd_end)
            record = handle.read(_ZIP64_EOCD.size)
            if len(record) < _ZIP64_EOCD.size or record[:4] != b"PK\x06\x06":
                return 0
            cd_size = _ZIP64_EOCD.unpack(record)[8]
        handle.seek(max(0, cd_end - cd_size))
        directory = handle.read(min(cd_size, cd_end))
    count, offset = 0, 0
    while count < stop_after and offset + _CENTRAL.size <= len(directory):
        header = _CENTRAL.unpack_from(directory, offset)
        if header[0] != b"PK\x01\x02":
            break
        count += 1
        offset += _CENTRAL.size + header[12] + header[13] + header[14]
    return count


@contextmanager
def _readable(what: str) -> Iterator[None]:
    """Turn what the archive libraries raise on bad input into a :class:`BundleError`."""
    try:
        yield
    except BundleError:
        raise
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        zlib.error,
        lzma.LZMAError,
        EOFError,
        OSError,
        NotImplementedError,
    ) as exc:
        raise BundleError(f"The 'file' is not a readable {what} archive ({exc}).", field="file") from None


# --- zip --------------------------------------------------------------------------------------


def _zip_entries(path: Path, budget: UnpackBudget) -> Iterator[Entry]:
    """A zip's entries, counted from the central directory first (300,000 entries cost no
    more than 10,001) and their declared sizes summed before anything is inflated."""
    cap = bundle_limits.MAX_MEMBERS  # the module's, read now: the cap check_count applies
    check_count(zip_entry_count(path, stop_after=cap + 1))
    with _readable("zip"), zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        budget.expect(sum(info.file_size for info in infos))
        for info in infos:
            _check_zip_entry(info)
            yield info.filename, info.is_dir(), _zip_data(archive, info)


def _check_zip_entry(info: zipfile.ZipInfo) -> None:
    mode = (info.external_attr >> 16) & 0o170000
    if mode and mode not in (0o100000, 0o040000):
        raise BundleError(
            f"The 'file' entry {info.filename!r} is a link or device; only files and folders are allowed.", field="file"
        )
    if info.flag_bits & 0x1:
        raise BundleError(f"The 'file' entry {info.filename!r} is encrypted; bundles are not.", field="file")


def _zip_data(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    with _readable("zip"), archive.open(info) as data:
        while block := data.read(_CHUNK):
            yield block


# --- tar.gz -----------------------------------------------------------------------------------


def _tar_entries(path: Path, budget: UnpackBudget) -> Iterator[Entry]:
    """A .tar.gz's entries, read as one stream: each header as it comes (a 16 GiB member is
    refused at its header), then, after the last, the rest of the stream, which may hold
    only the end marker's zeros and must end where the file's one gzip member ends."""
    with _readable(".tar.gz"), open(path, "rb") as handle:
        stream = SingleGzipStream(handle, limit=tar_stream_limit(budget.max_bytes))
        with tarfile.TarFile(fileobj=stream, mode="r") as archive:
            for member in archive:
                _check_tar_entry(member)
                if member.isfile():
                    budget.expect(member.size)
                yield member.name, member.isdir(), _tar_data(archive, member)
            _check_tar_end(stream, archive.offset)


def _check_tar_entry(member: tarfile.TarInfo) -> None:
    if not (member.isfile() or member.isdir()):
        raise BundleError(
            f"The 'file' entry {member.name!r} is a link or device; only files and folders are allowed.", field="file"
        )
    if member.issparse():
        raise BundleError(
            f"The 'file' entry {member.name!r} is a sparse file; only plain files and folders are allowed.",
            field="file",
        )


def _tar_data(archive: tarfile.TarFile, member: tarfile.TarInfo) -> Iterator[bytes]:
    if member.isdir():
        return
    with _readable(".tar.gz"), archive.extractfile(member) as data:
        while block := data.read(_CHUNK):
            yield block


def _check_tar_end(stream: SingleGzipStream, end: int) -> None:
    """Only zeros may follow the last entry. :mod:`tarfile` stops at the first block that is
    no header (zeros, or garbage it does not report), so that block and all after it are
    read here: nothing in the upload goes unread."""
    looked_at = stream.recent(stream.tell() - end)
    for block in itertools.chain([looked_at], stream.rest()):
        if block.strip(b"\0"):
            raise BundleError(
                "The 'file' holds data after the end of its tar archive; "
                "only the end marker's zero padding may follow the last entry.",
                field="file",
            )


__all__ = ["Entry", "archive_entries", "zip_entry_count"]
