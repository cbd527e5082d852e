"""Stream versions in the database: registered once per (name, version), read back by runs.

A submission points at the stream version it was created with, and that row holds the
manifest itself: a run (and a resumed run, and every task a scheduler launches) reads its
tasks from there, never from a manifest file that may have changed since.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.core.errors import ManifestError
from services.store.db.models import StreamTask, StreamVersion
from workers.stream.manifest import StreamManifest, manifest_to_dict, parse_manifest
from workers.stream.manifest_files import manifest_sha256
from workers.stream.split_rule import split_rule_to_dict


def ensure_stream_version(session: Session, *, manifest: StreamManifest) -> StreamVersion:
    """The stored stream version for ``manifest``, created (with its tasks) on first use.

    Raises:
        ManifestError: the same name and version are stored with other content.
    """
    sha = manifest_sha256(manifest)
    found = session.scalar(
        select(StreamVersion).where(StreamVersion.name == manifest.name, StreamVersion.version == manifest.version)
    )
    if found is not None:
        if found.manifest_sha256 != sha:
            raise ManifestError(
                f"Stream {manifest.name!r} version {manifest.version!r} is stored with other "
                "content: a changed manifest needs a new version string."
            )
        return found
    version = StreamVersion(
        name=manifest.name, version=manifest.version, manifest_sha256=sha, manifest=manifest_to_dict(manifest)
    )
    session.add(version)
    session.flush()
    for task in manifest.tasks:
        session.add(
            StreamTask(
                stream_version_id=version.id,
                order=task.order,
                year=task.year,
                dataset=task.dataset,
                phase=task.phase,
                kind=task.kind,
                num_classes=task.num_classes,
                domain=task.domain,
                split_rule={"fractions": dict(task.split.fractions), **split_rule_to_dict(task.split)},
            )
        )
    session.flush()
    return version


def stored_manifest(version: StreamVersion) -> StreamManifest:
    """The manifest a stream version row was created with, checked against its hash.

    Raises:
        ManifestError: the stored document no longer parses or no longer matches its hash.
    """
    manifest = parse_manifest(version.manifest, origin=f"stream version {version.name} {version.version}")
    if manifest_sha256(manifest) != version.manifest_sha256:
        raise ManifestError(
            f"The stored manifest of stream {version.name!r} version {version.version!r} does not "
            "match its recorded hash; the database row was changed."
        )
    return manifest


__all__ = ["ensure_stream_version", "stored_manifest"]
