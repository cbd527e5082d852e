"""Which streams submitters may name: the built-in ones and the operator's folder.

A submitter names a stream; it never passes a path (the server must not read files a
client chooses). The operator may add manifests as ``<name>.json`` files in
``NEVIS_STREAMS_DIR``; a built-in name wins over a file of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.coordinator.common.client_errors import InvalidInputError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import check_name
from services.core.errors import ManifestError, unknown_name_message
from workers.stream.manifest import StreamManifest
from workers.stream.manifest_files import list_streams, load_stream


@dataclass(frozen=True)
class ResolvedStream:
    """A stream a submission may run on, and the reference the runner will load it by."""

    manifest: StreamManifest
    ref: str  # a built-in name or the manifest file's absolute path


def available_streams(settings: CoordinatorSettings) -> list[str]:
    """Names a submitter may use, sorted."""
    names = set(list_streams())
    if settings.streams_dir is not None and settings.streams_dir.is_dir():
        names.update(p.stem for p in settings.streams_dir.glob("*.json"))
    return sorted(names)


def resolve_stream(settings: CoordinatorSettings, name: str, *, field: str = "stream") -> ResolvedStream:
    """Load the stream called ``name``.

    Raises:
        InvalidInputError: (``field``) the name is malformed or unknown ("did you mean"),
            or its manifest is broken.
    """
    check_name(name, field=field)
    if name in list_streams():
        return ResolvedStream(load_stream(name), name)
    if settings.streams_dir is not None:
        path = (settings.streams_dir / f"{name}.json").resolve()
        if path.parent == settings.streams_dir.resolve() and path.is_file():
            try:
                manifest = load_stream(str(path))
            except ManifestError as exc:
                raise InvalidInputError(f"Stream {name!r} cannot be used: {exc}", field=field) from None
            return ResolvedStream(manifest, str(path))
    raise InvalidInputError(unknown_name_message("stream", name, available_streams(settings)), field=field)


__all__ = ["ResolvedStream", "available_streams", "resolve_stream"]
