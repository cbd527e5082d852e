"""What a learner bundle may hold: its caps and a layout every path of which can be written.

Kept apart from the archive readers (:mod:`workers.sandbox.bundles.archives`) and the pass that
drives them (:mod:`workers.sandbox.bundles.unpack`) because both enforce these rules, and the
upload's check and a worker's unpack must agree on them: members and unpacked bytes are counted
as they come (:class:`UnpackBudget`), names are checked and placed as they come
(:class:`MemberLayout`).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from services.core.errors import BundleError

MAX_MEMBERS = 10_000
MAX_NAME_CHARS = 1024
MAX_DEPTH = 32
_HEADER_ALLOWANCE = 4096  # per entry, beyond its data: its headers (pax, long names), padding
_END_ALLOWANCE = 1024 * 1024  # zeros after a tar's end marker (a large blocking factor)
_FILE = "file"  # a file's mark in :class:`MemberLayout`'s tree (folders are dicts)


class UnpackBudget:
    """Entries and unpacked bytes so far; raises at the first cap breached."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.members = 0
        self.bytes = 0

    def count_member(self) -> None:
        self.members += 1
        check_count(self.members)

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
            f"at most {self.max_bytes} are allowed.",
            field="file",
        )


def check_count(count: int) -> None:
    """Refuse a bundle with more than :data:`MAX_MEMBERS` entries (``count`` so far)."""
    if count > MAX_MEMBERS:
        raise BundleError(
            f"The 'file' holds more than {MAX_MEMBERS} entries (at least {count}); at most {MAX_MEMBERS} are allowed.",
            field="file",
        )


def tar_stream_limit(max_bytes: int) -> int:
    """Inflated bytes a tar may take to unpack to at most ``max_bytes``: its data, the headers
    and padding of as many entries as may come, and the end marker's zeros."""
    return max_bytes + (MAX_MEMBERS + 1) * _HEADER_ALLOWANCE + _END_ALLOWANCE


class MemberLayout:
    """The tree the entries make, so that a check refuses whatever the unpack could not
    write: a path both file and folder, a file twice, an unsafe or overlong name."""

    def __init__(self) -> None:
        self._root: dict[str, object] = {}
        self.has_python = False

    def add(self, name: str, *, is_dir: bool) -> tuple[str, ...]:
        """Place one entry; returns the path parts it unpacks to."""
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
    return BundleError(
        f"The 'file' entry {name!r} clashes with an earlier entry (the same "
        "file twice, or a file where a folder is); each path may appear once.",
        field="file",
    )


def _member_parts(name: str) -> tuple[str, ...]:
    """The path parts an entry unpacks to; refuses what would land outside the folder or
    that a file system would refuse (so that checking and unpacking agree)."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise BundleError(
            f"The 'file' entry {name!r} would unpack outside its folder; use relative paths.", field="file"
        )
    too_long = any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in parts)
    if too_long or len(name) > MAX_NAME_CHARS or len(parts) > MAX_DEPTH:
        raise BundleError(
            f"The 'file' entry {name[:80]!r}… has too long a path; at most {MAX_NAME_CHARS} "
            f"characters, {MAX_DEPTH} levels and 255 bytes a level are allowed.",
            field="file",
        )
    return parts


__all__ = [
    "MAX_DEPTH",
    "MAX_MEMBERS",
    "MAX_NAME_CHARS",
    "MemberLayout",
    "UnpackBudget",
    "check_count",
    "tar_stream_limit",
]
