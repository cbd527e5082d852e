"""The object-store contract shared by every backend.

Guarantees every backend keeps:
- a write is atomic: readers see the old object or the whole new one, never a part;
- every object's sha256 is recorded at write time and verified on every read
  (:class:`~services.core.errors.DataIntegrityError` on mismatch);
- keys are relative, ``/``-separated paths checked by :func:`validate_key`
  (:class:`~services.core.errors.InvalidKeyError` otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ObjectInfo:
    """What the store knows about one object."""

    key: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ListedObject:
    """One object as a listing sees it: enough to size and age it without reading it."""

    key: str
    size: int
    modified: float  # when the key was last written, in POSIX seconds (time.time())


@runtime_checkable
class ObjectStore(Protocol):
    """A flat key → bytes store with recorded checksums."""

    url: str

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store ``data`` under ``key`` atomically, replacing any object there."""
        ...

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        """Store a local file's bytes under ``key`` atomically (streams large files)."""
        ...

    def get_bytes(self, key: str, *, max_bytes: int | None = None) -> bytes:
        """Return the object's bytes after verifying their sha256; an object over
        ``max_bytes`` raises ObjectTooLargeError before a byte of it is read."""
        ...

    def get_file(self, key: str, path: Path) -> ObjectInfo:
        """Write the object to a local file (verified; the file appears atomically)."""
        ...

    def info(self, key: str) -> ObjectInfo:
        """Size and recorded sha256, without reading the bytes."""
        ...

    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""
        ...

    def verify(self, key: str) -> ObjectInfo:
        """Re-read the object and check its sha256; raise DataIntegrityError on mismatch."""
        ...

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under ``prefix`` (a key prefix ending at a segment), sorted."""
        ...

    def list_objects(self, prefix: str = "") -> Iterator[ListedObject]:
        """The objects under ``prefix`` with their size and last write time, sorted by key.

        One listing, no object read: what garbage collection needs to tell an old object
        from one whose write is still in flight.
        """
        ...

    def delete(self, key: str) -> None:
        """Remove the object; a missing key is not an error."""
        ...


__all__ = ["ListedObject", "ObjectInfo", "ObjectStore"]
