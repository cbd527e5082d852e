"""Atomic local-file writes shared by the object-store backends.

A file is written under a temporary name, fsynced, then renamed onto its final name with
``os.replace``, which POSIX makes atomic: a reader sees the old file or the whole new one.
Temporary names start with ``.`` and end in ``.part``; if anything fails they are removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

CHUNK_BYTES = 1 << 20
FILE_MODE = 0o644


@contextmanager
def staged_file(target: Path, *, tmp_dir: Path | None = None) -> Iterator[Path]:
    """Yield an empty temporary path; on success move it onto ``target`` atomically.

    Args:
        target: The final path; its folder is created if needed.
        tmp_dir: Where the temporary file lives (same file system as ``target``);
            default: ``target``'s folder.

    If the ``with`` body raises, the temporary file is removed and ``target`` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = tmp_dir if tmp_dir is not None else target.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{target.name[:40]}.", suffix=".part")
    os.close(fd)
    try:
        yield Path(tmp_name)
        fd = os.open(tmp_name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp_name, FILE_MODE)
        replace_durably(tmp_name, target)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def write_file_atomically(target: Path, chunks: Iterable[bytes], *, tmp_dir: Path | None = None) -> None:
    """Write the concatenated ``chunks`` to ``target`` atomically (see :func:`staged_file`)."""
    with staged_file(target, tmp_dir=tmp_dir) as tmp, open(tmp, "wb") as out:
        for chunk in chunks:
            out.write(chunk)


def replace_durably(tmp_name: str | Path, target: Path) -> None:
    """Rename ``tmp_name`` onto ``target`` and persist the rename.

    Retries when the target folder vanished meanwhile (a concurrent clean-up pruned it).
    """
    for attempt in range(3):
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(tmp_name, target)
            break
        except FileNotFoundError:
            if attempt == 2 or not os.path.exists(tmp_name):
                raise
    fsync_dir(target.parent)


def fsync_dir(folder: Path) -> None:
    """Persist renames in ``folder`` (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_chunks(stream: BinaryIO, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Yield ``stream``'s bytes in chunks of at most ``size``."""
    while chunk := stream.read(size):
        yield chunk


__all__ = [
    "CHUNK_BYTES",
    "FILE_MODE",
    "fsync_dir",
    "read_chunks",
    "replace_durably",
    "staged_file",
    "write_file_atomically",
]
