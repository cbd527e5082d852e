"""Uploaded learner bundles: a wheel, a zip or a gzipped tar of Python sources.

A bundle is checked before it is stored (readable archive, safe member names, no links or
devices, bounded member count and unpacked size) and unpacked, by whatever needs to run the
learner (the worker harness, the probe pool), into a folder that its learner hosts get to
see read-only (:func:`unpack_stored_bundle`). The import root is the archive root, or its
single top-level folder (an sdist's ``name-1.0/``), or that folder's ``src/``. Nothing here
imports what a bundle holds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import tempfile

from services.core.errors import BundleError
from services.store.objects import ObjectStore

SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz")
MAX_MEMBERS = 10_000
UNPACK_FACTOR = 20  # unpacked size may be at most this many times the upload limit
DEFAULT_MAX_UNPACKED_BYTES = UNPACK_FACTOR * 50 * 1024 * 1024
"""For readers without the coordinator's NEVIS_BUNDLE_MAX_BYTES (the probe pool): its default."""


def bundle_kind(filename: str) -> str:
    """``"zip"`` or ``"tar"`` from the file name; anything else is refused."""
    lower = filename.lower()
    if lower.endswith((".whl", ".zip")):
        return "zip"
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar"
    raise BundleError(
        f"The 'file' must be a wheel (.whl), a .zip or a .tar.gz / .tgz of Python sources. "
        f"Got {filename!r} instead.", field="file")


def safe_filename(filename: str) -> str:
    """The upload's base name, restricted to a safe character set for object keys."""
    base = PurePosixPath(filename.replace("\\", "/")).name
    cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in base).lstrip(".")
    return cleaned[:200] or "bundle"


def check_bundle(path: Path, *, filename: str, max_unpacked_bytes: int) -> str:
    """Check an uploaded archive; returns its kind.

    Cheap whatever the archive holds: the checks read member headers only, never inflate a
    member, and stop at the first member past a cap. A zip's entry count is read from its
    central directory before :mod:`zipfile` parses it (so 300,000 entries cost no more than
    10,001), and a tar is read as a stream whose declared sizes are summed as they come (a
    16 GiB member is refused at its header). Call it before taking any database lock.

    Raises:
        BundleError: (field ``file``) unreadable archive, unsafe member, too many
            members, or too large once unpacked.
    """
    kind = bundle_kind(filename)
    if kind == "zip":
        _check_count(zip_entry_count(path, stop_after=MAX_MEMBERS + 1))
    members = _zip_members(path) if kind == "zip" else _tar_members(path)
    count = total = 0
    has_python = False
    for name, size in members:
        count += 1
        _check_count(count)
        _check_member_name(name)
        total += size
        if total > max_unpacked_bytes:
            raise BundleError(
                f"The 'file' unpacks to more than {max_unpacked_bytes} bytes (at least {total}); "
                f"at most {max_unpacked_bytes} are allowed.", field="file")
        has_python = has_python or name.endswith(".py")
    if not has_python:
        raise BundleError("The 'file' holds no .py file; a bundle carries Python code.",
                                field="file")
    return kind


def _check_count(count: int) -> None:
    if count > MAX_MEMBERS:
        raise BundleError(
            f"The 'file' holds more than {MAX_MEMBERS} entries (at least {count}); at most "
            f"{MAX_MEMBERS} are allowed.", field="file")


def extract_bundle(path: Path, dest: Path, *, kind: str) -> Path:
    """Unpack a checked bundle into ``dest`` (atomically) and return its import root."""
    if not dest.exists():
        partial = dest.with_name(dest.name + f".partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                archive.extractall(partial)
        else:
            with tarfile.open(path, "r:gz") as archive:
                archive.extractall(partial, filter="data")
        try:
            partial.rename(dest)
        except OSError:  # another worker unpacked it first
            shutil.rmtree(partial, ignore_errors=True)
    return import_root(dest)


def unpack_stored_bundle(store: ObjectStore, *, key: str, sha256: str, root: Path,
                         max_unpacked_bytes: int) -> Path:
    """The import root of the bundle stored at ``key``, unpacked once under ``root/<sha256>``.

    The archive is fetched (its recorded checksum verified) and checked again before it is
    unpacked: the store is not trusted more than the upload was.
    """
    dest = root / sha256
    if dest.exists():
        return import_root(dest)  # unpacked by an earlier task or job
    name = key.rsplit("/", 1)[-1]
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        archive = Path(scratch) / name
        store.get_file(key, archive)  # verifies the store's own checksum
        digest = hashlib.sha256()
        with archive.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != sha256:  # the database's record is what was reviewed
            raise BundleError(f"The stored bundle {key!r} is not the one registered (sha256 "
                              f"{digest.hexdigest()[:12]}… instead of {sha256[:12]}…).", field="file")
        kind = check_bundle(archive, filename=name, max_unpacked_bytes=max_unpacked_bytes)
        return extract_bundle(archive, dest, kind=kind)


def import_root(folder: Path) -> Path:
    """The folder to put on ``sys.path`` for an unpacked bundle."""
    entries = [e for e in folder.iterdir() if not e.name.startswith(".")]
    root = folder
    if len(entries) == 1 and entries[0].is_dir() and not (entries[0] / "__init__.py").exists():
        root = entries[0]
    if (root / "src").is_dir() and not any(root.glob("*.py")):
        root = root / "src"
    return root


_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # one central directory header


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
        if locator_at >= 0 and tail[locator_at:locator_at + 4] == b"PK\x06\x07":
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


def _zip_members(path: Path) -> Iterator[tuple[str, int]]:
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode not in (0o100000, 0o040000):
                    raise BundleError(
                        f"The 'file' entry {info.filename!r} is a link or device; only files "
                        "and folders are allowed.", field="file")
                yield info.filename, info.file_size
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleError(f"The 'file' is not a readable zip archive ({exc}).",
                                field="file") from None


def _tar_members(path: Path) -> Iterator[tuple[str, int]]:
    """Members as a stream (``r|gz``): each header is read as it comes, and the caller can
    stop before the next member's data is inflated."""
    try:
        with tarfile.open(path, "r|gz") as archive:
            for member in archive:
                if not (member.isfile() or member.isdir()):
                    raise BundleError(
                        f"The 'file' entry {member.name!r} is a link or device; only files "
                        "and folders are allowed.", field="file")
                yield member.name, member.size
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise BundleError(f"The 'file' is not a readable .tar.gz archive ({exc}).",
                                field="file") from None


def _check_member_name(name: str) -> None:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise BundleError(
            f"The 'file' entry {name!r} would unpack outside its folder; use relative paths.",
            field="file")


__all__ = [
    "DEFAULT_MAX_UNPACKED_BYTES", "MAX_MEMBERS", "SUFFIXES", "UNPACK_FACTOR", "bundle_kind", "check_bundle", "extract_bundle",
    "import_root", "safe_filename", "unpack_stored_bundle", "zip_entry_count",
]
