"""Checksums of fetched files, and the state file that remembers what was verified.

A file is verified against the catalogue's checksum; a file the catalogue has no checksum
for gets its sha256 recorded at first fetch, and every later fetch is checked against that.
The state also remembers size and mtime of each verified file, so that ``already present``
does not re-hash many gigabytes on every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20
STATE_NAME = ".fetch-state.json"


def file_digests(path: Path, algorithms: tuple[str, ...] = ("sha256",)) -> dict[str, str]:
    """Hex digests of a file for each named algorithm, in one pass."""
    hashers = {name: hashlib.new(name) for name in algorithms}
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            for hasher in hashers.values():
                hasher.update(chunk)
    return {name: h.hexdigest() for name, h in hashers.items()}


@dataclass(frozen=True)
class Verdict:
    """What checking a file found: ``ok``, and the file's sha256 (recorded in the state)."""

    ok: bool
    sha256: str
    reason: str = ""


def check_file(path: Path, expected: str | None) -> Verdict:
    """Hash ``path`` and compare with ``expected`` ("md5:<hex>", "sha256:<hex>" or None: any)."""
    algorithm, _, want = (expected or "sha256:").partition(":")
    digests = file_digests(path, tuple(dict.fromkeys((algorithm, "sha256"))))
    got = digests[algorithm]
    if want and got != want.lower():
        return Verdict(
            False, digests["sha256"], f"checksum mismatch: expected {algorithm}:{want}, got {algorithm}:{got}"
        )
    return Verdict(True, digests["sha256"])


class FetchState:
    """``<dest>/.fetch-state.json``: per ``<key>/<name>``, the sha256, size and mtime last verified.

    Thread-safe; every change is written at once (atomically), so an interrupted fetch keeps
    what it had verified.
    """

    def __init__(self, dest: Path) -> None:
        self.path = dest / STATE_NAME
        self._lock = threading.Lock()
        try:
            self._data: dict[str, dict] = json.loads(self.path.read_text())
        except FileNotFoundError:
            self._data = {}
        except ValueError:
            self._data = {}  # a damaged state only costs re-hashing

    def recorded_sha256(self, rel: str) -> str | None:
        with self._lock:
            return (self._data.get(rel) or {}).get("sha256")

    def unchanged(self, rel: str, path: Path) -> bool:
        """Whether ``path`` is the very file last verified (same size and mtime)."""
        stat = path.stat()
        with self._lock:
            entry = self._data.get(rel) or {}
        return entry.get("size") == stat.st_size and entry.get("mtime_ns") == stat.st_mtime_ns

    def record(self, rel: str, path: Path, sha256: str) -> None:
        stat = path.stat()
        with self._lock:
            self._data[rel] = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{STATE_NAME}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(self._data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)


def expected_checksum(catalogue_checksum: str | None, state: FetchState, rel: str) -> str | None:
    """The checksum to hold a file to: the catalogue's, else the sha256 recorded at first fetch."""
    if catalogue_checksum:
        return catalogue_checksum
    recorded = state.recorded_sha256(rel)
    return f"sha256:{recorded}" if recorded else None


__all__ = ["STATE_NAME", "FetchState", "Verdict", "check_file", "expected_checksum", "file_digests"]
