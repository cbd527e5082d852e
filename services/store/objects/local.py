"""A local-folder object store with atomic writes and checksums that cannot drift.

Layout under ``root``::

    blobs/ab/<sha256>        object bytes, named by their own sha256, never modified
    refs/<dirs>.d/<name>.ref JSON {"key", "sha256", "size"}: which blob a key points to
    tmp/                     half-written files; never listed, removed by gc()

A write streams the bytes to ``tmp/``, fsyncs them and renames the finished file into
``blobs/`` (``os.replace`` is atomic), then replaces the key's ref the same way. A reader
therefore sees either the old ref and its blob or the new ref and its blob: bytes and
recorded checksum never disagree, even while a key is overwritten. A write that fails
midway leaves the old object untouched. Ref folders end in ``.d`` and ref files in
``.ref``, so the keys ``a`` and ``a/b`` can both exist, as they can on S3. ``delete`` only
drops the ref; :meth:`LocalObjectStore.gc` removes blobs no ref points to.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from services.core.errors import DataIntegrityError, ObjectNotFoundError, ObjectTooLargeError
from services.store.objects.atomic import FILE_MODE, read_chunks, replace_durably, write_file_atomically
from services.store.objects.base import ListedObject, ObjectInfo
from services.store.objects.keys import validate_key, validate_prefix

DIR_SUFFIX = ".d"
REF_SUFFIX = ".ref"
# A blob younger than this may belong to a write whose ref is not in place yet.
DEFAULT_GC_MIN_AGE_S = 3600.0
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class GcStats:
    """What one :meth:`LocalObjectStore.gc` pass removed."""

    blobs_removed: int
    bytes_freed: int
    temp_files_removed: int


class LocalObjectStore:
    """An :class:`~services.store.objects.base.ObjectStore` in a local folder.

    Args:
        root: The store's folder; created on the first write.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.url = self.root.as_uri()
        self._blobs = self.root / "blobs"
        self._refs = self.root / "refs"
        self._tmp = self.root / "tmp"

    def __repr__(self) -> str:
        return f"LocalObjectStore(root={str(self.root)!r})"

    # -- writes ------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store ``data`` under ``key`` atomically, replacing any object there."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"The 'data' parameter of put_bytes must be bytes; got {type(data).__name__}.")
        return self.put_stream(key, [bytes(data)])

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        """Store a local file's bytes under ``key`` atomically, streaming them."""
        validate_key(key)
        try:
            source = open(path, "rb")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise DataIntegrityError(
                f"Cannot store {key!r} from {str(path)!r}: the file cannot be read ({exc})."
            ) from None
        with source:
            return self.put_stream(key, read_chunks(source))

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> ObjectInfo:
        """Store the concatenated ``chunks`` under ``key`` atomically.

        If iterating ``chunks`` raises, the error propagates and the key keeps its old
        object (or stays absent).
        """
        validate_key(key)
        digest, size = self._write_blob(chunks)
        info = ObjectInfo(key=key, size=size, sha256=digest)
        record = {"key": key, "sha256": digest, "size": size}
        write_file_atomically(self._ref_path(key), [json.dumps(record).encode("utf-8")], tmp_dir=self._tmp)
        return info

    def delete(self, key: str) -> None:
        """Drop the key's ref; a missing key is not an error. Blobs go in :meth:`gc`."""
        with suppress(FileNotFoundError):
            os.unlink(self._ref_path(validate_key(key)))

    # -- reads -------------------------------------------------------------------------

    def get_bytes(self, key: str, *, max_bytes: int | None = None) -> bytes:
        """Return the object's bytes after verifying their sha256; an object over
        ``max_bytes`` (its recorded size) raises ObjectTooLargeError unread."""
        info, blob = self._open_blob(key)
        with blob:
            if max_bytes is not None and info.size > max_bytes:
                raise ObjectTooLargeError(
                    f"Object {key!r} has {info.size} bytes, over the {max_bytes}-byte limit of its reader: not read."
                )
            data = blob.read() if max_bytes is None else blob.read(max_bytes + 1)
        _check(self, info, hashlib.sha256(data).hexdigest(), len(data))
        return data

    def get_file(self, key: str, path: Path) -> ObjectInfo:
        """Write the verified object to ``path``; the file appears only when complete."""
        info, blob = self._open_blob(key)
        with blob:

            def verified_chunks() -> Iterator[bytes]:
                hasher, size = hashlib.sha256(), 0
                for chunk in read_chunks(blob):
                    hasher.update(chunk)
                    size += len(chunk)
                    yield chunk
                _check(self, info, hasher.hexdigest(), size)

            write_file_atomically(Path(path), verified_chunks())
        return info

    def info(self, key: str) -> ObjectInfo:
        """Size and recorded sha256, read from the ref without touching the bytes."""
        return self._read_ref(key)

    def exists(self, key: str) -> bool:
        """Whether a ref is stored under ``key``."""
        return self._ref_path(validate_key(key)).is_file()

    def verify(self, key: str) -> ObjectInfo:
        """Re-hash the object's bytes; raise DataIntegrityError if they changed."""
        info, blob = self._open_blob(key)
        with blob:
            hasher, size = hashlib.sha256(), 0
            for chunk in read_chunks(blob):
                hasher.update(chunk)
                size += len(chunk)
        _check(self, info, hasher.hexdigest(), size)
        return info

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under the folder ``prefix`` (``"a/b"`` matches ``"a/b/..."``), sorted."""
        return iter([key for key, _ in self._refs_under(prefix)])

    def list_objects(self, prefix: str = "") -> Iterator[ListedObject]:
        """The objects under ``prefix``, sorted by key: size from each ref, and the ref's
        mtime as the last write (every put replaces the ref). Keys deleted meanwhile are
        left out.

        Raises:
            DataIntegrityError: if a ref cannot be read.
        """
        return self._listed(self._refs_under(prefix))

    def _listed(self, refs: list[tuple[str, Path]]) -> Iterator[ListedObject]:
        for key, path in refs:
            try:
                modified = path.stat().st_mtime
                info = self._read_ref_file(path, key=key)
            except FileNotFoundError:  # deleted meanwhile
                continue
            yield ListedObject(key=key, size=info.size, modified=modified)

    # -- maintenance -------------------------------------------------------------------

    def gc(self, *, min_age_s: float = DEFAULT_GC_MIN_AGE_S) -> GcStats:
        """Remove blobs no ref points to, stale temp files and empty folders.

        Args:
            min_age_s: Leave blobs and temp files younger than this alone, so that a write
                running at the same time (blob stored, ref not yet) keeps its bytes.

        Raises:
            DataIntegrityError: if a ref cannot be read (nothing is removed then).
        """
        cutoff = time.time() - min_age_s
        candidates = [p for p in _files(self._blobs) if _mtime(p) <= cutoff]
        referenced: set[str] = set()
        for ref in _files(self._refs):
            if ref.name.endswith(REF_SUFFIX):
                with suppress(FileNotFoundError):  # deleted meanwhile
                    referenced.add(self._read_ref_file(ref).sha256)
        removed = freed = 0
        for blob in candidates:
            if blob.name in referenced:
                continue
            with suppress(FileNotFoundError):
                stat = blob.stat()
                if stat.st_mtime <= cutoff:  # re-check: a write may have just renewed it
                    blob.unlink()
                    removed += 1
                    freed += stat.st_size
        temps = 0
        for temp in _files(self._tmp):
            with suppress(FileNotFoundError):
                if _mtime(temp) <= cutoff:
                    temp.unlink()
                    temps += 1
        for folder in (self._refs, self._blobs):
            _prune_empty_dirs(folder)
        return GcStats(blobs_removed=removed, bytes_freed=freed, temp_files_removed=temps)

    # -- internals ---------------------------------------------------------------------

    def _refs_under(self, prefix: str) -> list[tuple[str, Path]]:
        """(key, ref file) of every key under the folder ``prefix``, sorted by key."""
        prefix = validate_prefix(prefix)
        base = self._refs.joinpath(*(s + DIR_SUFFIX for s in prefix.split("/") if s))
        refs: list[tuple[str, Path]] = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d.endswith(DIR_SUFFIX)]
            rel = Path(dirpath).relative_to(self._refs).parts
            folder = "".join(part[: -len(DIR_SUFFIX)] + "/" for part in rel)
            refs.extend(
                (folder + name[: -len(REF_SUFFIX)], Path(dirpath) / name)
                for name in filenames
                if name.endswith(REF_SUFFIX) and len(name) > len(REF_SUFFIX)
            )
        return sorted(refs)

    def _ref_path(self, key: str) -> Path:
        *folders, name = key.split("/")
        return self._refs.joinpath(*(f + DIR_SUFFIX for f in folders), name + REF_SUFFIX)

    def _blob_path(self, sha256: str) -> Path:
        return self._blobs / sha256[:2] / sha256

    def _write_blob(self, chunks: Iterable[bytes]) -> tuple[str, int]:
        """Stream ``chunks`` into a blob; return its sha256 and size."""
        hasher = hashlib.sha256()
        size = 0

        def hashed() -> Iterator[bytes]:
            nonlocal size
            for chunk in chunks:
                hasher.update(chunk)
                size += len(chunk)
                yield chunk

        # The final name is known only once every byte is hashed.
        self._tmp.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=self._tmp, prefix=".blob.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in hashed():
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp_name, FILE_MODE)
            digest = hasher.hexdigest()
            # Replacing an identical blob renews its mtime, which keeps gc() off it.
            replace_durably(tmp_name, self._blob_path(digest))
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
        return digest, size

    def _read_ref(self, key: str) -> ObjectInfo:
        path = self._ref_path(validate_key(key))
        try:
            return self._read_ref_file(path, key=key)
        except FileNotFoundError:
            raise ObjectNotFoundError(f"No object {key!r} in store {self.url}.") from None

    def _read_ref_file(self, path: Path, key: str | None = None) -> ObjectInfo:
        """Parse one ref file; FileNotFoundError passes through for the caller."""
        raw = path.read_bytes()
        try:
            record = json.loads(raw)
            info = ObjectInfo(key=str(record["key"]), size=int(record["size"]), sha256=str(record["sha256"]))
            if not _SHA256_HEX.fullmatch(info.sha256) or (key is not None and info.key != key):
                raise ValueError("the recorded key or sha256 does not fit")
        except (ValueError, KeyError, TypeError) as exc:
            raise DataIntegrityError(
                f"The record of object {key or path.name!r} in store {self.url} is "
                f"unreadable ({path}: {exc}). Delete the key and store the object again."
            ) from None
        return info

    def _open_blob(self, key: str) -> tuple[ObjectInfo, BinaryIO]:
        """Open the blob a key points to, following the ref if it moves meanwhile."""
        info = self._read_ref(key)
        for _ in range(3):
            try:
                return info, open(self._blob_path(info.sha256), "rb")
            except FileNotFoundError:
                again = self._read_ref(key)
                if again == info:
                    break
                info = again  # overwritten while we looked; read the new object
        raise DataIntegrityError(
            f"Object {key!r} in store {self.url} is corrupted: its bytes (sha256 "
            f"{info.sha256}) are missing from {self._blobs}. Store the object again."
        )


def _check(store: LocalObjectStore, info: ObjectInfo, actual: str, size: int) -> None:
    """Raise DataIntegrityError if what was read is not what was recorded."""
    if actual != info.sha256 or size != info.size:
        raise DataIntegrityError(
            f"Object {info.key!r} in store {store.url} is corrupted: expected sha256 "
            f"{info.sha256} ({info.size} bytes), got {actual} ({size} bytes). "
            "Store the object again or restore it from a copy."
        )


def _files(folder: Path) -> Iterator[Path]:
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            yield Path(dirpath) / name


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return float("inf")  # gone already: never a candidate


def _prune_empty_dirs(folder: Path) -> None:
    for dirpath, _dirnames, _filenames in os.walk(folder, topdown=False):
        if Path(dirpath) != folder:
            with suppress(OSError):
                os.rmdir(dirpath)


__all__ = ["DEFAULT_GC_MIN_AGE_S", "DIR_SUFFIX", "REF_SUFFIX", "GcStats", "LocalObjectStore"]
