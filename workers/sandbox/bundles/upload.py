"""Uploaded learner bundles: a wheel, a zip or a gzipped tar of Python sources.

A bundle is checked before it is stored (readable archive, safe member names, no links or
devices, bounded member count and unpacked size) and unpacked, by whatever needs to run the
learner (the worker harness, the probe pool), into a folder that its learner hosts get to
see read-only (:func:`unpack_stored_bundle`). The import root is the archive root, or its
single top-level folder (an sdist's ``name-1.0/``), or that folder's ``src/``. Nothing here
imports what a bundle holds.

Checking and unpacking are one pass (:func:`workers.sandbox.bundles.unpack.unpack`), the check
only dropping the bytes the unpack writes: whatever two readers could disagree on (a second gzip
member, bytes after an archive's end, sizes a header understates) is refused or counted the same
way by both. The archives are read in :mod:`workers.sandbox.bundles.archives`, the caps and the
layout rules are :mod:`workers.sandbox.bundles.limits`; this module names, fetches and places
bundles.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from services.core.errors import BundleError
from services.store.objects import ObjectStore
from workers.sandbox.bundles.unpack import unpack

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
        f"The 'file' must be a wheel (.whl), a .zip or a .tar.gz / .tgz of Python sources. Got {filename!r} instead.",
        field="file",
    )


def safe_filename(filename: str) -> str:
    """The upload's base name, restricted to a safe character set for object keys."""
    base = PurePosixPath(filename.replace("\\", "/")).name
    cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in base).lstrip(".")
    return cleaned[:200] or "bundle"


def check_bundle(path: Path, *, filename: str, max_unpacked_bytes: int) -> str:
    """Check an uploaded archive by unpacking it without writing anything; returns its kind.

    The check is the very pass :func:`extract_bundle` makes
    (:func:`~workers.sandbox.bundles.unpack.unpack`), with the bytes discarded instead of
    written, so what is checked is what a worker unpacks later:
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
    unpack(path, kind=kind, max_unpacked_bytes=max_unpacked_bytes, into=None)
    return kind


def extract_bundle(path: Path, dest: Path, *, kind: str, max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES) -> Path:
    """Unpack a bundle into ``dest`` (atomically) and return its import root.

    Checked while unpacking (the pass :func:`check_bundle` makes); a failure of any kind
    leaves no partial folder behind, and ``dest`` appears only once fully unpacked.
    """
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-{os.getpid()}-", dir=dest.parent))
        try:
            partial.chmod(0o755)  # learner hosts (maybe another uid) read it once renamed
            unpack(path, kind=kind, max_unpacked_bytes=max_unpacked_bytes, into=partial)
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


def unpack_stored_bundle(store: ObjectStore, *, key: str, sha256: str, root: Path, max_unpacked_bytes: int) -> Path:
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
            raise BundleError(
                f"The stored bundle {key!r} is not the one registered (sha256 "
                f"{digest.hexdigest()[:12]}… instead of {sha256[:12]}…).",
                field="file",
            )
        return extract_bundle(archive, dest, kind=bundle_kind(name), max_unpacked_bytes=max_unpacked_bytes)


def import_root(folder: Path) -> Path:
    """The folder to put on ``sys.path`` for an unpacked bundle."""
    entries = [e for e in folder.iterdir() if not e.name.startswith(".")]
    root = folder
    if len(entries) == 1 and entries[0].is_dir() and not (entries[0] / "__init__.py").exists():
        root = entries[0]
    if (root / "src").is_dir() and not any(root.glob("*.py")):
        root = root / "src"
    return root


__all__ = [
    "DEFAULT_MAX_UNPACKED_BYTES",
    "UNPACK_FACTOR",
    "bundle_kind",
    "check_bundle",
    "extract_bundle",
    "import_root",
    "safe_filename",
    "unpack_stored_bundle",
]
