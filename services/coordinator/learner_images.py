"""A learner image at registration and on a worker: resolved once to a digest, unpacked as files.

Registration (:func:`register_image`) resolves the reference on this machine (pulling it if it
is not in podman's store; a ``localhost/`` image is one built here), unpacks it under
``<data dir>/images`` within the image caps, checks that the entry point's module is one of its
files, and returns the reference pinned by digest, which every task and probe job then runs.
A worker (:func:`image_import_paths`) unpacks that digest (once per node) and gives its learner
hosts the image's import paths. Under ``NEVIS_IMAGE_LEARNERS=installed`` an image is a label
and neither happens. Nothing here imports or runs a file of the image.

On the ``kuberay`` backend the kubelet pulls the image, by the registered digest, as a read-only
image volume of the learner pods (:mod:`services.coordinator.backends.kuberay_images`): a
registration needs the RayJob template's image volume (else a 422 saying image learners are
refused there), and a coordinator without podman (the chart's) takes only references pinned by
digest, whose size and files it cannot check. The harness then names the volume's folders
(``NEVIS_IMAGE_ROOT``) instead of unpacking anything.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from services.coordinator.backends.kuberay_images import check_image_volumes
from services.coordinator.backends.kuberay_template import load_template
from services.coordinator.common.config import CoordinatorSettings
from workers.sandbox.images import ImageError, UnpackedImage, unpack_image
from workers.sandbox.images.mounted import IMAGE_ROOT_VAR
from workers.sandbox.images.store import LEARNER_DIR, site_dirs

_PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")


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
    if settings.backend == "kuberay":
        check_image_volumes(load_template(settings.kuberay_rayjob_template).rayjob)
        if shutil.which("podman") is None:  # the kubelet pulls it; nothing here can read it
            if not _PINNED.search(ref):
                raise ImageError(
                    f"The image {ref!r} must be named by digest (…@sha256:<64 hex>) on this service: "
                    "its coordinator has no podman to resolve a tag once (kuberay backend)."
                )
            return RegisteredImage(ref, None)
    unpacked = unpack_image(ref, cache=image_cache(settings), limits=settings.image_limits)
    check_learner_image(unpacked, ref=ref, entrypoint=entrypoint)
    return RegisteredImage(unpacked.pinned, unpacked.size_bytes)


def check_learner_image(unpacked: UnpackedImage, *, ref: str, entrypoint: str) -> None:
    """An unpacked image holds the entry point's module where learner hosts import from
    (registration, and ``nevis check --image`` before it).

    Raises:
        ImageError: no import path at all (field ``image``), or not the module (``entrypoint``).
    """
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


def image_import_paths(ref: str, *, settings: CoordinatorSettings) -> list[str] | None:
    """The import paths of the image ``ref`` (a registered, pinned reference), unpacked on
    this node; ``None`` when images are labels (``NEVIS_IMAGE_LEARNERS=installed``)."""
    if settings.image_learners == "installed":
        return None
    mounted = os.environ.get(IMAGE_ROOT_VAR)
    if mounted:  # kuberay: the learner pods' image volume of this very digest (not on this node)
        root = Path(mounted)
        return [str(root.joinpath(*parts)) for parts in (LEARNER_DIR, *site_dirs())]
    unpacked: UnpackedImage = unpack_image(ref, cache=image_cache(settings), limits=settings.image_limits)
    if not unpacked.import_paths:
        raise ImageError(f"The image {ref!r} has no /opt/learner folder and no site-packages.")
    return list(unpacked.import_paths)


__all__ = ["RegisteredImage", "check_learner_image", "image_cache", "image_import_paths", "register_image"]
