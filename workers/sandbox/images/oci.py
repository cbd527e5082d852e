"""Reading an image saved as an OCI layout folder (``podman image save --format oci-dir``).

The layout is checked against the image id it was saved as: the config blob's sha256 must be
that id, and each layer's uncompressed bytes must hash to the config's ``rootfs.diff_ids``
entry, so the files unpacked are exactly the image the id names (a content address), whatever
wrote the folder. Layers are gzip or plain tar; other compressions are refused by name.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from workers.sandbox.images.limits import ImageBudget, ImageError, ImageLimits

MAX_JSON_BYTES = 4 * 1024 * 1024
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_PLAIN = ("application/vnd.oci.image.layer.v1.tar", "application/vnd.docker.image.rootfs.diff.tar")
_GZIP = ("application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.docker.image.rootfs.diff.tar.gzip")


@dataclass(frozen=True)
class Layer:
    """One layer blob: its digest, media type and the digest of its uncompressed tar."""

    digest: str
    media_type: str
    diff_id: str


@dataclass(frozen=True)
class Layout:
    """The parts of a saved image that unpacking needs."""

    folder: Path
    image_id: str
    layers: tuple[Layer, ...]

    def blob(self, digest: str) -> Path:
        return self.folder / "blobs" / "sha256" / digest.split(":", 1)[1]


def read_layout(folder: Path, *, image_id: str, limits: ImageLimits) -> Layout:
    """The layers of the one image in ``folder``, checked to be the image ``image_id``."""
    index = _json(folder / "index.json")
    manifests = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(manifests, list) or len(manifests) != 1:
        raise ImageError("The saved image's index does not name exactly one manifest.")
    manifest = _json(_blob(folder, manifests[0].get("digest")))
    config_ref = manifest.get("config") if isinstance(manifest, dict) else None
    config_digest = config_ref.get("digest") if isinstance(config_ref, dict) else None
    if config_digest != image_id:
        raise ImageError(f"The saved image is {config_digest!r}, not the image {image_id!r} asked for.")
    config = _json(_blob(folder, config_digest), verify=True)
    diff_ids = (config.get("rootfs") or {}).get("diff_ids") if isinstance(config, dict) else None
    blobs = manifest.get("layers")
    if not isinstance(blobs, list) or not isinstance(diff_ids, list) or len(blobs) != len(diff_ids):
        raise ImageError("The saved image's manifest and config disagree on its layers.")
    limits.check_layers(len(blobs))
    layers = []
    for blob, diff_id in zip(blobs, diff_ids):
        digest, media = (blob.get("digest"), blob.get("mediaType")) if isinstance(blob, dict) else (None, None)
        if not (_is_digest(digest) and _is_digest(diff_id)):
            raise ImageError("The saved image names a layer without a sha256 digest.")
        if media not in _PLAIN + _GZIP:
            raise ImageError(
                f"The image has a layer of type {media!r}; only tar and gzip-"
                "compressed tar layers are supported (rebuild without zstd)."
            )
        layers.append(Layer(digest, media, diff_id))
    return Layout(folder, image_id, tuple(layers))


@contextmanager
def open_layer(layout: Layout, layer: Layer, budget: ImageBudget) -> Iterator[BinaryIO]:
    """The layer's uncompressed tar stream, counted and hashed as it is read; checked
    against its diff_id once the caller is done (the rest of the stream is read first)."""
    path = layout.blob(layer.digest)
    if not path.is_file():
        raise ImageError(f"The saved image lacks its layer {layer.digest}.")
    with open(path, "rb") as raw:
        try:
            source: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if layer.media_type in _GZIP else raw  # type: ignore[assignment]
            reader = _Counted(source, budget)
            yield reader  # type: ignore[misc]
            while reader.read(1 << 20):
                pass
        except (OSError, EOFError, zlib.error) as exc:
            raise ImageError(f"The image's layer {layer.digest[:19]}… cannot be read ({exc}).") from None
    if "sha256:" + reader.sha.hexdigest() != layer.diff_id:
        raise ImageError(f"The image's layer {layer.digest[:19]}… is not the layer its config names.")


class _Counted:
    """A read-only stream that hashes and counts what passes through."""

    def __init__(self, source: BinaryIO, budget: ImageBudget) -> None:
        self.source, self.budget, self.sha = source, budget, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        block = self.source.read(size if size is not None and size >= 0 else 1 << 20)
        self.budget.stream(len(block))
        self.sha.update(block)
        return block


def _blob(folder: Path, digest: Any) -> Path:
    if not _is_digest(digest):
        raise ImageError("The saved image names a blob without a sha256 digest.")
    return folder / "blobs" / "sha256" / str(digest).split(":", 1)[1]


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def _json(path: Path, *, verify: bool = False) -> Any:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ImageError(f"The saved image's {path.name[:19]} is over {MAX_JSON_BYTES} bytes.")
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"The saved image lacks {path.name[:19]} ({exc.strerror}).") from None
    if verify and hashlib.sha256(data).hexdigest() != path.name:
        raise ImageError(f"The saved image's blob {path.name[:12]}… does not match its digest.")
    try:
        return json.loads(data)
    except ValueError as exc:
        raise ImageError(f"The saved image's {path.name[:19]} is not JSON ({exc}).") from None


__all__ = ["Layer", "Layout", "open_layer", "read_layout"]
