"""A learner image at registration and on a worker: resolved once to a digest, unpacked as files.

Registration (:func:`register_image`) resolves the reference on this machine (pulling it if it
is not in podman's store; a ``localhost/`` image is one built here), unpacks it under
``<data dir>/images`` within the image caps, checks that the entry point's module is one of its
files, and returns the reference pinned by digest, which every task and probe job then runs.
A worker (:func:`image_import_paths`) unpacks that digest (once per node) and gives its learner
hosts the image's import paths. Under ``NEVIS_IMAGE_LEARNERS=installed`` an image is a label
and neither happens. Nothing here imports or runs a file of the image.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.coordinator.common.config import CoordinatorSettings
from workers.sandbox.images import ImageError, UnpackedImage, unpack_image


@dataclass(frozen=True)
class RegisteredImage:
    """What registration records of an image: the pinned reference and its unpacked size."""

    ref: str
    size_bytes: int | None


def image_cache(settings: CoordinatorSettings) -> Path:
    """Where this node keeps unpacked learner images, one folder per image id."""
    return settings.data_dir / "images"


def register_image(ref: str, *, entrypoint: str, settings: CoordinatorSettings) -> RegisteredImage:
    """The image ``ref`` names, checked for use as a learner with ``entrypoint``.

    Raises:
        ImageError: (field ``image``, a 422) it cannot be pulled or read, is over a cap, or
            lacks the entry point's module.
    """
    if settings.image_learners == "installed":
        return RegisteredImage(ref, None)
    unpacked = unpack_image(ref, cache=image_cache(settings), limits=settings.image_limits)
    module = entrypoint.split(":", 1)[0]
    if not unpacked.import_paths:
        raise ImageError(
            f"The image {ref!r} has no /opt/learner folder and no site-packages "
            "for this service's Python: put the learner's code in /opt/learner."
        )
    if not unpacked.has_module(module):
        raise ImageError(
            f"The image {ref!r} has no module {module!r} (the entry point "
            f"{entrypoint!r}) in /opt/learner or its site-packages.",
            field="entrypoint",
        )
    return RegisteredImage(unpacked.pinned, unpacked.size_bytes)


def image_import_paths(ref: str, *, settings: CoordinatorSettings) -> list[str] | None:
    """The import paths of the image ``ref`` (a registered, pinned reference), unpacked on
    this node; ``None`` when images are labels (``NEVIS_IMAGE_LEARNERS=installed``)."""
    if settings.image_learners == "installed":
        return None
    unpacked: UnpackedImage = unpack_image(ref, cache=image_cache(settings), limits=settings.image_limits)
    if not unpacked.import_paths:
        raise ImageError(f"The image {ref!r} has no /opt/learner folder and no site-packages.")
    return list(unpacked.import_paths)


__all__ = ["RegisteredImage", "image_cache", "image_import_paths", "register_image"]
