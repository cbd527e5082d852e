"""Uploaded learner bundles: a wheel, a zip or a gzipped tar of Python sources.

A bundle is checked before it is stored (readable archive, safe member names, no links or
devices, bounded unpacked size) and unpacked by the worker harness into a folder that goes
on the import path of the run (its Ray runtime environment). The import root is the archive
root, or its single top-level folder (an sdist's ``name-1.0/``), or that folder's ``src/``.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from services.coordinator.core.errors import InvalidInputError

SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz")
MAX_MEMBERS = 10_000
UNPACK_FACTOR = 20  # unpacked size may be at most this many times the upload limit


def bundle_kind(filename: str) -> str:
    """``"zip"`` or ``"tar"`` from the file name; anything else is refused."""
    lower = filename.lower()
    if lower.endswith((".whl", ".zip")):
        return "zip"
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar"
    raise InvalidInputError(
        f"The 'file' must be a wheel (.whl), a .zip or a .tar.gz / .tgz of Python sources. "
        f"Got {filename!r} instead.", field="file")


def safe_filename(filename: str) -> str:
    """The upload's base name, restricted to a safe character set for object keys."""
    base = PurePosixPath(filename.replace("\\", "/")).name
    cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in base).lstrip(".")
    return cleaned[:200] or "bundle"


def check_bundle(path: Path, *, filename: str, max_unpacked_bytes: int) -> str:
    """Check an uploaded archive; returns its kind.

    Raises:
        InvalidInputError: (field ``file``) unreadable archive, unsafe member, too many
            members, or too large once unpacked.
    """
    kind = bundle_kind(filename)
    members = _zip_members(path) if kind == "zip" else _tar_members(path)
    if len(members) > MAX_MEMBERS:
        raise InvalidInputError(
            f"The 'file' holds {len(members)} entries; at most {MAX_MEMBERS} are allowed.",
            field="file")
    total = 0
    has_python = False
    for name, size in members:
        _check_member_name(name)
        total += size
        has_python = has_python or name.endswith(".py")
    if total > max_unpacked_bytes:
        raise InvalidInputError(
            f"The 'file' unpacks to {total} bytes; at most {max_unpacked_bytes} are allowed.",
            field="file")
    if not has_python:
        raise InvalidInputError("The 'file' holds no .py file; a bundle carries Python code.",
                                field="file")
    return kind


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


def import_root(folder: Path) -> Path:
    """The folder to put on ``sys.path`` for an unpacked bundle."""
    entries = [e for e in folder.iterdir() if not e.name.startswith(".")]
    root = folder
    if len(entries) == 1 and entries[0].is_dir() and not (entries[0] / "__init__.py").exists():
        root = entries[0]
    if (root / "src").is_dir() and not any(root.glob("*.py")):
        root = root / "src"
    return root


def _zip_members(path: Path) -> list[tuple[str, int]]:
    try:
        with zipfile.ZipFile(path) as archive:
            out = []
            for info in archive.infolist():
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode not in (0o100000, 0o040000):
                    raise InvalidInputError(
                        f"The 'file' entry {info.filename!r} is a link or device; only files "
                        "and folders are allowed.", field="file")
                out.append((info.filename, info.file_size))
            return out
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InvalidInputError(f"The 'file' is not a readable zip archive ({exc}).",
                                field="file") from None


def _tar_members(path: Path) -> list[tuple[str, int]]:
    try:
        with tarfile.open(path, "r:gz") as archive:
            out = []
            for member in archive.getmembers():
                if not (member.isfile() or member.isdir()):
                    raise InvalidInputError(
                        f"The 'file' entry {member.name!r} is a link or device; only files "
                        "and folders are allowed.", field="file")
                out.append((member.name, member.size))
            return out
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InvalidInputError(f"The 'file' is not a readable .tar.gz archive ({exc}).",
                                field="file") from None


def _check_member_name(name: str) -> None:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise InvalidInputError(
            f"The 'file' entry {name!r} would unpack outside its folder; use relative paths.",
            field="file")


__all__ = [
    "MAX_MEMBERS", "SUFFIXES", "UNPACK_FACTOR", "bundle_kind", "check_bundle", "extract_bundle",
    "import_root", "safe_filename",
]
