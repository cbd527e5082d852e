"""Symlinks of an unpacked image that would lead out of its root are removed.

Decided once every layer is in place, by resolving each link the way the kernel would
(following the links it passes through, ``..`` after a link going up from where the link
led), inside the root: a link whose resolution climbs above the root, loops, or takes more
than :data:`MAX_HOPS` links is removed. Nothing here follows a link on disk: links are read
with ``readlink`` and every folder on the way is checked with ``lstat``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

MAX_HOPS = 40  # the kernel's own limit on links in one lookup


def leaves_root(root: Path, link: tuple[str, ...]) -> bool:
    """Whether the link at ``root/<link parts>`` resolves above ``root`` (or cannot be
    resolved within :data:`MAX_HOPS` links)."""
    here = list(link[:-1])
    pending = _parts(os.readlink(root.joinpath(*link)))
    if pending is None:
        return True
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not here:
                return True
            here.pop()
            continue
        candidate = root.joinpath(*here, part)
        try:
            mode = os.lstat(candidate).st_mode
        except (FileNotFoundError, NotADirectoryError):
            here.append(part)  # the kernel stops here; nothing beyond it is reached
            continue
        if stat.S_ISLNK(mode):
            hops += 1
            more = _parts(os.readlink(candidate))
            if more is None or hops > MAX_HOPS:
                return True
            pending = more + pending
            continue
        here.append(part)
    return False


def remove_escaping_links(root: Path) -> int:
    """Remove every symlink under ``root`` that leads out of it; returns how many went."""
    removed = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel = Path(folder).relative_to(root).parts
        for name in [*files, *dirs]:
            path = Path(folder, name)
            if os.path.islink(path) and leaves_root(root, (*rel, name)):
                path.unlink()
                removed += 1
    return removed


def _parts(target: str) -> list[str] | None:
    """A link target's parts; ``None`` for an absolute one (layers made them relative)."""
    if target.startswith("/"):
        return None
    return [p for p in PurePosixPath(target).parts if p != "."]


__all__ = ["MAX_HOPS", "leaves_root", "remove_escaping_links"]
