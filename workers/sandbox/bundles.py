"""Uploaded learner bundles: a wheel, a zip or a gzipped tar of Python sources.

A bundle is checked before it is stored (readable archive, safe member names, no links or
devices, bounded member count and unpacked size) and unpacked, by whatever needs to run the
learner (the worker harness, the probe pool), into a folder that its learner hosts get to
see read-only (:func:`unpack_stored_bundle`). The import root is the archive root, or its
single top-level folder (an sdist's ``name-1.0/``), or that folder's ``src/``. Nothing here
imports what a bundle holds.

Checking and unpacking are one pass (:func:`_unpack`), the check only dropping the bytes the
unpack writes: whatever two readers could disagree on (a second gzip member, bytes after an
archive's end, sizes a header understates) is refused or counted the same way by both.
"""

from __future__ import annotations

import hashlib
import itertools
import lzma
import os
import shutil
import struct
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from services.core.errors import BundleError
from services.store.objects import ObjectStore
from workers.sandbox.gzip_stream import CHUNK as _CHUNK, SingleGzipStream

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
    """Check an uploaded archive by unpacking it without writing anything; returns its kind.

    The check is the very pass :func:`extract_bundle` makes (:func:`_unpack`), with the
    bytes discarded instead of written, so what is checked is what a worker unpacks later:
    every gzip member and every byte after the archive's end is read, and members and
    unpacked bytes are counted as they are produced, stopping at the first cap breached.
    Declared sizes refuse most bombs before anything is inflated (a zip's entries are counted
    from its central directory before :mod:`zipfile` parses it, a tar's sizes as its headers
    come). Call it before taking any database lock.

    Raises:
        BundleError: (field ``file``) unreadable archive, unsafe member, too many
            members, too large once unpacked, or data after its end.
    """
    kind = bundle_kind(filename)
    _unpack(path, kind=kind, max_unpacked_bytes=max_unpacked_bytes, into=None)
    return kind


def extract_bundle(path: Path, dest: Path, *, kind: str,
                   max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES) -> Path:
    """Unpack a bundle into ``dest`` (atomically) and return its import root.

    Checked while unpacking (the pass :func:`check_bundle` makes); a failure of any kind
    leaves no partial folder behind, and ``dest`` appears only once fully unpacked.
    """
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-{os.getpid()}-",
                                        dir=dest.parent))
        try:
            partial.chmod(0o755)  # learner hosts (maybe another uid) read it once renamed
            _unpack(path, kind=kind, max_unpacked_bytes=max_unpacked_bytes, into=partial)
            _rename_unless_done(partial, dest)
        finally:
            shutil.rmtree(partial, ignore_errors=True)  # already gone after a rename
    return import_root(dest)


def _rename_unless_done(partial: Path, dest: Path) -> None:
    try:
        partial.rename(dest)
    except OSError:
        if not dest.is_dir():  # not a worker that unpacked it first: a real failure
            raise


def unpack_stored_bundle(store: ObjectStore, *, key: str, sha256: str, root: Path,
                         max_unpacked_bytes: int) -> Path:
    """The import root of the bundle stored at ``key``, unpacked once under ``root/<sha256>``.

    The archive is fetched (its recorded checksum verified) and checked again as it is
    unpacked (the upload's check, same pass): the store is not trusted more than the upload was.
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
        return extract_bundle(archive, dest, kind=bundle_kind(name),
                              max_unpacked_bytes=max_unpacked_bytes)


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


# --- the one pass: read, check, count, and (when unpacking) write --------------------------

_HEADER_ALLOWANCE = 4096  # per entry, beyond its data: its headers (pax, long names), padding
_END_ALLOWANCE = 1024 * 1024  # zeros after a tar's end marker (a large blocking factor)
MAX_NAME_CHARS = 1024
MAX_DEPTH = 32
_FILE = "file"  # a file's mark in :class:`_Layout`'s tree (folders are dicts)

_Entry = tuple[str, bool, Iterator[bytes]]
"""An archive entry as the pass sees it: its name, whether it is a folder, its bytes."""


def _unpack(path: Path, *, kind: str, max_unpacked_bytes: int, into: Path | None) -> None:
    """The pass behind both :func:`check_bundle` (``into`` is None: bytes are read, counted
    and dropped) and :func:`extract_bundle` (bytes are written under ``into``).

    One code path, so the check cannot see less than the unpack writes: entries are counted
    and their bytes measured as the archive yields them, and the first cap breached stops it.
    """
    budget, layout = UnpackBudget(max_unpacked_bytes), _Layout()
    entries = _zip_entries(path, budget) if kind == "zip" else _tar_entries(path, budget)
    for name, is_dir, data in entries:
        budget.count_member()
        parts = layout.add(name, is_dir=is_dir)
        target = into.joinpath(*parts) if into is not None else None
        if is_dir:
            if target is not None:
                target.mkdir(parents=True, exist_ok=True)
        else:
            copy_member(data, target, budget)
    if not layout.has_python:
        raise BundleError("The 'file' holds no .py file; a bundle carries Python code.",
                          field="file")


def copy_member(data: Iterator[bytes], target: Path | None, budget: UnpackBudget) -> None:
    """Count a member's bytes as they are inflated (not as declared), before keeping them."""
    with _sink(target) as write:
        for block in data:
            budget.spend(len(block))
            write(block)


@contextmanager
def _sink(target: Path | None) -> Iterator[Callable[[bytes], object]]:
    """Where a member's bytes go: a new file when unpacking, nowhere when only checking."""
    if target is None:
        yield lambda block: None
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as out:  # the layout was checked: nothing can be there already
        yield out.write


class UnpackBudget:
    """Entries and unpacked bytes so far; raises at the first cap breached."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.members = 0
        self.bytes = 0

    def count_member(self) -> None:
        self.members += 1
        _check_count(self.members)

    def expect(self, declared: int) -> None:
        """Refuse what headers declare before inflating it (a bomb costs nothing to refuse);
        the bytes are still counted as they come, since a header may lie."""
        if self.bytes + declared > self.max_bytes:
            raise self._too_large(self.bytes + declared)

    def spend(self, produced: int) -> None:
        self.bytes += produced
        if self.bytes > self.max_bytes:
            raise self._too_large(self.bytes)

    def _too_large(self, at_least: int) -> BundleError:
        return BundleError(
            f"The 'file' unpacks to more than {self.max_bytes} bytes (at least {at_least}); "
            f"at most {self.max_bytes} are allowed.", field="file")


def _check_count(count: int) -> None:
    if count > MAX_MEMBERS:
        raise BundleError(
            f"The 'file' holds more than {MAX_MEMBERS} entries (at least {count}); at most "
            f"{MAX_MEMBERS} are allowed.", field="file")


class _Layout:
    """The tree the entries make, so that a check refuses whatever the unpack could not
    write: a path both file and folder, a file twice, an unsafe or overlong name."""

    def __init__(self) -> None:
        self._root: dict[str, object] = {}
        self.has_python = False

    def add(self, name: str, *, is_dir: bool) -> tuple[str, ...]:
        parts = _member_parts(name)
        if not parts:
            if is_dir:
                return parts  # "./": the archive root
            raise BundleError(f"The 'file' entry {name!r} is a file without a name.", field="file")
        folder = self._root
        for part in parts[:-1]:
            child = folder.setdefault(part, {})
            if not isinstance(child, dict):
                raise _clash(name)
            folder = child
        present = folder.get(parts[-1])
        if is_dir:
            if present is _FILE:
                raise _clash(name)
            folder.setdefault(parts[-1], {})
        else:
            if present is not None:
                raise _clash(name)
            folder[parts[-1]] = _FILE
            self.has_python = self.has_python or parts[-1].endswith(".py")
        return parts


def _clash(name: str) -> BundleError:
    return BundleError(f"The 'file' entry {name!r} clashes with an earlier entry (the same "
                       "file twice, or a file where a folder is); each path may appear once.",
                       field="file")


def _member_parts(name: str) -> tuple[str, ...]:
    """The path parts an entry unpacks to; refuses what would land outside the folder or
    that a file system would refuse (so that checking and unpacking agree)."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise BundleError(
            f"The 'file' entry {name!r} would unpack outside its folder; use relative paths.",
            field="file")
    too_long = any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in parts)
    if too_long or len(name) > MAX_NAME_CHARS or len(parts) > MAX_DEPTH:
        raise BundleError(
            f"The 'file' entry {name[:80]!r}… has too long a path; at most {MAX_NAME_CHARS} "
            f"characters, {MAX_DEPTH} levels and 255 bytes a level are allowed.", field="file")
    return parts


@contextmanager
def _readable(what: str) -> Iterator[None]:
    """Turn what the archive libraries raise on bad input into a :class:`BundleError`."""
    try:
        yield
    except BundleError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError,
            OSError, NotImplementedError) as exc:
        raise BundleError(f"The 'file' is not a readable {what} archive ({exc}).",
                          field="file") from None


# --- zip --------------------------------------------------------------------------------------

def _zip_entries(path: Path, budget: UnpackBudget) -> Iterator[_Entry]:
    """A zip's entries, counted from the central directory first (300,000 entries cost no
    more than 10,001) and their declared sizes summed before anything is inflated."""
    _check_count(zip_entry_count(path, stop_after=MAX_MEMBERS + 1))
    with _readable("zip"), zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        budget.expect(sum(info.file_size for info in infos))
        for info in infos:
            _check_zip_entry(info)
            yield info.filename, info.is_dir(), _zip_data(archive, info)


def _check_zip_entry(info: zipfile.ZipInfo) -> None:
    mode = (info.external_attr >> 16) & 0o170000
    if mode and mode not in (0o100000, 0o040000):
        raise BundleError(f"The 'file' entry {info.filename!r} is a link or device; only files "
                          "and folders are allowed.", field="file")
    if info.flag_bits & 0x1:
        raise BundleError(f"The 'file' entry {info.filename!r} is encrypted; bundles are not.",
                          field="file")


def _zip_data(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    with _readable("zip"), archive.open(info) as data:
        while block := data.read(_CHUNK):
            yield block


# --- tar.gz -----------------------------------------------------------------------------------

def _tar_entries(path: Path, budget: UnpackBudget) -> Iterator[_Entry]:
    """A .tar.gz's entries, read as one stream: each header as it comes (a 16 GiB member is
    refused at its header), then, after the last, the rest of the stream, which may hold
    only the end marker's zeros and must end where the file's one gzip member ends."""
    with _readable(".tar.gz"), open(path, "rb") as handle:
        stream = SingleGzipStream(handle, limit=_tar_stream_limit(budget.max_bytes))
        with tarfile.TarFile(fileobj=stream, mode="r") as archive:
            for member in archive:
                _check_tar_entry(member)
                if member.isfile():
                    budget.expect(member.size)
                yield member.name, member.isdir(), _tar_data(archive, member)
            _check_tar_end(stream, archive.offset)


def _tar_stream_limit(max_bytes: int) -> int:
    return max_bytes + (MAX_MEMBERS + 1) * _HEADER_ALLOWANCE + _END_ALLOWANCE


def _check_tar_entry(member: tarfile.TarInfo) -> None:
    if not (member.isfile() or member.isdir()):
        raise BundleError(f"The 'file' entry {member.name!r} is a link or device; only files "
                          "and folders are allowed.", field="file")
    if member.issparse():
        raise BundleError(f"The 'file' entry {member.name!r} is a sparse file; only plain "
                          "files and folders are allowed.", field="file")


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
            raise BundleError("The 'file' holds data after the end of its tar archive; "
                              "only the end marker's zero padding may follow the last entry.",
                              field="file")


__all__ = [
    "DEFAULT_MAX_UNPACKED_BYTES", "MAX_MEMBERS", "SUFFIXES", "UNPACK_FACTOR", "bundle_kind", "check_bundle", "extract_bundle",
    "MAX_DEPTH", "MAX_NAME_CHARS", "import_root", "safe_filename", "unpack_stored_bundle",
    "zip_entry_count", "UnpackBudget", "copy_member",
]
