"""The stored manifest of each stream version a runner reads, parsed once (issue 45 item 6).

A coordinator's worker runs a submission task by task, and every task starts by reading the run's
plan; parsing and hashing the stored manifest again for each of them was a third of the walk's
work. The cache is keyed by the version's row and its recorded hash, and only that hash is read
from the database on a hit: a row whose hash changes is parsed (and checked) again.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import NevisError
from services.store.db.models import StreamVersion
from workers.stream.manifest import StreamManifest
from workers.stream.versions import stored_manifest


class RunManifests:
    """Parsed stored manifests by ``(stream version id, manifest hash)``; :attr:`parses` counts misses."""

    def __init__(self) -> None:
        self._parsed: dict[tuple[int, str], StreamManifest] = {}
        self.parses = 0

    def of(self, session: Session, stream_version_id: int) -> StreamManifest:
        """The manifest stream version ``stream_version_id`` was created with, checked against
        its hash the first time (:func:`~workers.stream.versions.stored_manifest`)."""
        sha = session.scalar(select(StreamVersion.manifest_sha256).where(StreamVersion.id == stream_version_id))
        if sha is None:
            raise NevisError(f"No stream version with id {stream_version_id} in this database.")
        key = (stream_version_id, sha)
        if key not in self._parsed:
            self._parsed[key] = stored_manifest(session.get(StreamVersion, stream_version_id))
            self.parses += 1
        return self._parsed[key]


__all__ = ["RunManifests"]
