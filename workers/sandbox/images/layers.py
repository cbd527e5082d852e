"""Applying one image layer (an uncompressed tar stream) onto a root folder, never trusting it.

An image's layer is the submitter's: every entry is placed without following any link already
on disk (a parent that is not a real folder is refused), whiteouts (``.wh.NAME``) and opaque
folders (``.wh..wh..opq``) remove what lower layers put there, and what the host must not get
is neutralised rather than kept: device nodes, FIFOs and sockets are dropped, setuid, setgid
and sticky bits are cleared (files are written read-only, 0444 or 0555), hard links become
copies of their (already placed, regular) source, absolute symlinks are made relative to the
root. Whether a relative symlink leaves the root is decided once all layers are in place
(:mod:`.links`).
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from workers.sandbox.images.limits import ImageBudget, ImageError

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
_CHUNK = 1 << 20


def entry_parts(name: str) -> tuple[str, ...]:
    """The path parts of a layer entry, relative to the root; ``..`` is refused."""
    parts = tuple(p for p in PurePosixPath(name).parts if p not in ("/", "."))
    if ".." in parts:
        raise ImageError(f"The image's layer entry {name[:200]!r} climbs out of the root ('..').")
    if any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in parts) or len(parts) > 64:
        raise ImageError(f"The image's layer entry {name[:200]!r} has too long a path.")
    return parts


def apply_layer(stream: BinaryIO, root: Path, budget: ImageBudget) -> None:
    """Unpack one layer's tar ``stream`` onto ``root`` (lower layers already there)."""
    written: set[str] = set()
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                budget.count_file()
                _apply(tar, member, root, budget, written)
    except (tarfile.TarError, EOFError) as exc:
        raise ImageError(f"The image has a layer that is not a readable tar stream ({exc}).") from None


def _apply(tar: tarfile.TarFile, member: tarfile.TarInfo, root: Path, budget: ImageBudget, written: set[str]) -> None:
    parts = entry_parts(member.name)
    if not parts:
        return  # the root folder itself
    base = parts[-1]
    if base == OPAQUE:
        folder = _parent(root, parts)
        _make_opaque(folder, "/".join(parts[:-1]), written)
        return
    if base.startswith(WHITEOUT):
        hidden = _parent(root, parts) / base[len(WHITEOUT) :]
        _remove(hidden)
        return
    target = _parent(root, parts) / base
    rel = "/".join(parts)
    if member.isdir():
        if not _is_real_dir(target):
            _remove(target)
            target.mkdir(mode=0o755)
        target.chmod(0o755)
    elif member.isreg() and not member.issparse():
        budget.expect(member.size)
        _remove(target)
        source = tar.extractfile(member)
        _write(target, source, budget, executable=bool(member.mode & 0o111))
    elif member.islnk():
        _remove(target)
        _copy_hard_link(root, member, target, budget)
    elif member.issym():
        _remove(target)
        os.symlink(_relative_link(member.linkname, parts), target)
    else:
        return  # device node, FIFO, socket, sparse file: neutralised, never placed
    written.add(rel)


def _parent(root: Path, parts: tuple[str, ...]) -> Path:
    """The folder an entry goes into, made where missing; a link or file on the way is refused,
    so that nothing is ever written through a link a lower layer placed."""
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            folder.mkdir(mode=0o755)
            continue
        if not stat.S_ISDIR(mode):
            raise ImageError(
                f"The image's layer entry {'/'.join(parts)[:200]!r} lies below "
                f"{'/'.join(parts[: parts.index(part) + 1])!r}, which is a link or "
                "a file: layers may not write through links."
            )
    return folder


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _remove(path: Path) -> None:
    """Remove whatever is at ``path`` (a link itself, never what it points to)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def _make_opaque(folder: Path, rel: str, written: set[str]) -> None:
    """Remove what lower layers put below ``folder``; this layer's own entries stay."""
    prefix = f"{rel}/" if rel else ""
    keep = {w for w in written if w.startswith(prefix)}
    kept_dirs = {"/".join(w.split("/")[:i]) for w in keep for i in range(1, w.count("/") + 1)}
    for entry in list(folder.iterdir()):
        name = prefix + entry.name
        if name in keep:
            continue
        if name in kept_dirs and _is_real_dir(entry):
            _make_opaque(entry, name, written)
        else:
            _remove(entry)


def _write(target: Path, source: BinaryIO | None, budget: ImageBudget, *, executable: bool) -> None:
    with open(target, "xb") as out:
        while source is not None and (block := source.read(_CHUNK)):
            budget.spend(len(block))
            out.write(block)
    target.chmod(0o555 if executable else 0o444)  # no setuid, setgid or sticky bit survives


def _copy_hard_link(root: Path, member: tarfile.TarInfo, target: Path, budget: ImageBudget) -> None:
    """A hard link becomes a copy of its source, if that is a regular file placed already."""
    source_parts = entry_parts(member.linkname)
    source = root.joinpath(*source_parts) if source_parts else root
    folder = root
    for part in source_parts[:-1]:
        folder = folder / part
        if not _is_real_dir(folder):
            return  # through a link, or missing: dropped
    try:
        mode = os.lstat(source).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        return
    budget.expect(os.lstat(source).st_size)
    with open(source, "rb") as data:
        _write(target, data, budget, executable=bool(mode & 0o111))


def _relative_link(linkname: str, parts: tuple[str, ...]) -> str:
    """An absolute target made relative to the link's folder, so it points into the root."""
    if not linkname.startswith("/"):
        return linkname
    target = [p for p in PurePosixPath(linkname).parts if p != "/"]
    up = [".."] * (len(parts) - 1)
    return "/".join([*up, *target]) or "."


__all__ = ["OPAQUE", "WHITEOUT", "apply_layer", "entry_parts"]
