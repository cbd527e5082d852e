"""Find stream manifests: the built-in ones by name, a user's own by path.

Built-in streams are the ``*.json`` files in this package's ``manifests`` folder, read
through :mod:`importlib.resources` so they work from a wheel as well as from a checkout.
Each file's stem is the stream's name, and the file must say so. Anything that looks like
a path (it ends in ``.json`` or contains a slash) is read as a user's manifest file.

Guarantees: an unknown name raises :class:`~services.core.errors.UnknownNameError` with a
"did you mean"; an unreadable file, bad JSON or a malformed manifest raises
:class:`~services.core.errors.ManifestError` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from services.core.errors import ManifestError, UnknownNameError, unknown_name_message
from workers.stream.manifest import StreamManifest, manifest_to_dict, parse_manifest

_PACKAGE = "workers.stream"
_FOLDER = "manifests"
_SUFFIX = ".json"


def _builtin_folder() -> Traversable:
    return resources.files(_PACKAGE).joinpath(_FOLDER)


def list_streams() -> list[str]:
    """Names of the built-in streams, sorted."""
    folder = _builtin_folder()
    if not folder.is_dir():
        return []
    return sorted(
        entry.name[: -len(_SUFFIX)] for entry in folder.iterdir() if entry.is_file() and entry.name.endswith(_SUFFIX)
    )


def load_stream(name_or_path: str | os.PathLike[str]) -> StreamManifest:
    """Load a built-in stream by name, or a manifest file by path.

    Args:
        name_or_path: a built-in name such as ``"mini"``, or a path to a ``.json`` manifest.

    Raises:
        UnknownNameError: the name is neither built in nor a path.
        ManifestError: the file cannot be read, is not JSON, or is not a valid manifest.
    """
    if isinstance(name_or_path, os.PathLike) or _looks_like_path(name_or_path):
        path = Path(name_or_path)
        return _parse_text(_read_file(path), origin=str(path))
    name = name_or_path
    known = list_streams()
    if name not in known:
        hint = " To load your own stream, pass the path to its .json file."
        raise UnknownNameError(unknown_name_message("stream", name, known) + hint)
    resource = _builtin_folder().joinpath(name + _SUFFIX)
    origin = f"{name}{_SUFFIX} (built-in stream)"
    manifest = _parse_text(resource.read_text(encoding="utf-8"), origin=origin)
    if manifest.name != name:
        raise ManifestError(
            f"Invalid stream manifest {origin}: the 'name' field must be {name!r}, the file's "
            f"stem. Got {manifest.name!r} instead."
        )
    return manifest


def manifest_sha256(manifest: StreamManifest) -> str:
    """Hex sha256 of the manifest's canonical JSON (sorted keys, no spaces, UTF-8).

    The digest depends only on the manifest's content, not on how its file is laid out,
    so it identifies a stream version in the database.
    """
    return hashlib.sha256(canonical_json(manifest)).hexdigest()


def canonical_json(manifest: StreamManifest) -> bytes:
    """The manifest's document form as canonical JSON bytes."""
    text = json.dumps(manifest_to_dict(manifest), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def _looks_like_path(value: str) -> bool:
    return value.endswith(_SUFFIX) or "/" in value or os.sep in value


def _read_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(
            f"Stream manifest file {path} does not exist. Check the path, or run "
            "'nevis streams list' for the built-in streams."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"Cannot read stream manifest file {path}: {exc}.") from exc


def _parse_text(text: str, *, origin: str) -> StreamManifest:
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"Invalid stream manifest {origin}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from None
    except ValueError as exc:  # raised by the hooks below
        raise ManifestError(f"Invalid stream manifest {origin}: {exc}.") from None
    return parse_manifest(doc, origin=origin)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads silently keeps the last duplicate; a manifest with two "year"s is a typo.
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise ValueError(f"the field {key!r} appears twice in one object")
        doc[key] = value
    return doc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON; use a finite number")


__all__ = ["canonical_json", "list_streams", "load_stream", "manifest_sha256"]
