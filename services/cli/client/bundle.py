"""Pack a learner folder as the bundle ``POST /v1/learners/bundle`` takes: a ``.tar.gz``.

The archive is reproducible (sorted members, zeroed times and owners, fixed modes, a gzip
header without a name or time), so the same sources always have the same sha256 and an
identical learner already registered can be found and re-used. Caches, virtual environments
and version-control folders are left out. Before anything is uploaded, the archive goes
through the very check the server makes (:func:`workers.sandbox.bundles.check_bundle`), and
the entry point must name a module the bundle holds.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from services.core.errors import BundleError
from workers.sandbox.bundles import UNPACK_FACTOR, check_bundle

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".ipynb_checkpoints",
        ".eggs",
        "build",
        "dist",
        "node_modules",
    }
)
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".tar.gz", ".tgz", ".whl")
SKIPPED_FILES = frozenset({".DS_Store"})
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
"""The coordinator's default NEVIS_BUNDLE_MAX_BYTES; a server set higher accepts more."""


@dataclass(frozen=True)
class PackedLearner:
    """A packed learner folder: the archive, its sha256 and size, the files it holds."""

    path: Path
    sha256: str
    size_bytes: int
    files: tuple[str, ...]


def skipped(relative: Path) -> bool:
    """Whether a path inside the learner folder stays out of the bundle."""
    return (
        any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in relative.parts[:-1])
        or relative.name in SKIPPED_DIRS
        or relative.name in SKIPPED_FILES
        or relative.name.endswith(SKIPPED_SUFFIXES)
    )


def learner_files(folder: Path) -> list[Path]:
    """The files a bundle of ``folder`` holds, sorted; a link is refused (the server refuses them)."""
    if not folder.is_dir():
        raise BundleError(f"{folder} is not a folder: `nevis submit` takes the learner's folder.")
    found: list[Path] = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if skipped(relative) or any(skipped(Path(*relative.parts[:i])) for i in range(1, len(relative.parts))):
            continue
        if path.is_symlink():
            raise BundleError(f"{relative} is a symbolic link; bundles may not hold links: copy the file in.")
        if path.is_file():
            found.append(relative)
    return found


def pack_learner(folder: Path, *, entrypoint: str, dest: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> PackedLearner:
    """Pack ``folder`` into ``dest`` (a folder) and check the archive as the server would.

    Raises:
        BundleError: no Python file, the entry point's module missing, a link, too large, or
            anything the server's archive check refuses.
    """
    folder = folder.resolve()
    files = learner_files(folder)
    if not any(f.suffix == ".py" for f in files):
        raise BundleError(f"{folder} holds no Python file: nothing to submit.")
    check_entry_module(entrypoint, {f.as_posix() for f in files}, folder)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", folder.name) or "learner"
    path = dest / f"{name}.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for relative in files:
            info = tarfile.TarInfo(relative.as_posix())
            data = (folder / relative).read_bytes()
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            archive.addfile(info, io.BytesIO(data))
    with path.open("wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as zipped:
        zipped.write(raw.getvalue())
    size = path.stat().st_size
    if size > max_bytes:
        raise BundleError(
            f"The bundle of {folder} is {size} bytes, over the {max_bytes}-byte limit: "
            "leave data and weights out of the folder (download them in the learner, or "
            "use `nevis pretrain import`)."
        )
    check_bundle(path, filename=path.name, max_unpacked_bytes=UNPACK_FACTOR * max_bytes)
    return PackedLearner(
        path=path,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        size_bytes=size,
        files=tuple(f.as_posix() for f in files),
    )


def check_entry_module(entrypoint: str, files: set[str], folder: Path) -> None:
    """The entry point's module is a file of the bundle, at its root or under ``src/``."""
    if entrypoint.count(":") != 1:
        raise BundleError(f"The entry point must be 'module:factory'; got {entrypoint!r}.")
    module = entrypoint.split(":")[0].replace(".", "/")
    candidates = [f"{root}{module}{tail}" for root in ("", "src/") for tail in (".py", "/__init__.py")]
    if not any(c in files for c in candidates):
        raise BundleError(
            f"The entry point {entrypoint!r} names module {entrypoint.split(':')[0]!r}, "
            f"but {folder} has no {module}.py nor {module}/__init__.py (at its root or under src/)."
        )


__all__ = [
    "DEFAULT_MAX_BYTES",
    "SKIPPED_DIRS",
    "PackedLearner",
    "check_entry_module",
    "learner_files",
    "pack_learner",
    "skipped",
]
