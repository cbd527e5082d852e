"""The node's cache of unpacked learner images: one read-only folder per image id.

:func:`unpack_image` resolves a reference (:mod:`.podman`), and unpacks the image it names
once per id under ``cache/<hex id>``: saved as an OCI layout into a private scratch folder,
checked against its id (:mod:`.oci`), its layers applied in order (:mod:`.layers`), links that
leave the root removed (:mod:`.links`), then renamed into place, so a folder that exists is
complete. Of the files, a learner host gets only its import paths (:attr:`UnpackedImage.import_paths`):
the image's ``/opt/learner`` and the site-packages folders it adds for this installation's
Python version, each a real folder (never reached through a link). Nothing of the image is
executed or imported here; ENTRYPOINT, CMD, USER and ENV are never read.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workers.sandbox.images import links, oci, podman
from workers.sandbox.images.layers import apply_layer
from workers.sandbox.images.limits import ImageBudget, ImageError, ImageLimits

LEARNER_DIR = ("opt", "learner")
_RECORD = "image.json"


def site_dirs() -> tuple[tuple[str, ...], ...]:
    """Where an image's own packages for this Python (``python3.X``) may be."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return (
        ("opt", "learner", "site-packages"),
        ("usr", "local", "lib", version, "site-packages"),
        ("opt", "venv", "lib", version, "site-packages"),
        ("usr", "lib", version, "site-packages"),
        ("usr", "lib", "python3", "dist-packages"),
    )


@dataclass(frozen=True)
class UnpackedImage:
    """An image unpacked on this node."""

    image_id: str
    root: Path  # the image's file system
    size_bytes: int
    files: int
    pinned: str  # the reference it was asked by, pinned by manifest digest

    @property
    def import_paths(self) -> tuple[str, ...]:
        """The image's folders a learner host imports from, in order: ``/opt/learner``,
        then the site-packages it adds. Appended after the host's own, never before."""
        found = [self.root.joinpath(*parts) for parts in (LEARNER_DIR, *site_dirs())]
        return tuple(str(p) for p in found if real_dir(self.root, p))

    def has_module(self, module: str) -> bool:
        """Whether ``module`` (``pkg.mod``) is a file of the image's import paths."""
        names = module.split(".")
        for base in map(Path, self.import_paths):
            folder = base.joinpath(*names[:-1])
            if not real_dir(base, folder):
                continue
            last = names[-1]
            if real_dir(base, folder / last) or any(
                _real_file(folder / name) for name in (f"{last}.py", f"{last}.pyc")
            ):
                return True
            if any(e.name.startswith(f"{last}.") and e.name.endswith(".so") for e in folder.iterdir()):
                return True
        return False


def unpack_image(ref: str, *, cache: Path, limits: ImageLimits, pull: bool = True) -> UnpackedImage:
    """The image ``ref`` names, unpacked under ``cache`` (once per image id).

    Raises:
        ImageError: not found or not pullable, unreadable, unsafe, or over a cap of ``limits``.
    """
    resolved = podman.resolve(ref, pull=pull)
    dest = cache / resolved.image_id.removeprefix("sha256:")
    if not (dest / _RECORD).is_file():
        # What the store reports is checked before a byte is saved (the saved layout is
        # checked again as it is read: the store's figures are not trusted alone).
        limits.check_layers(resolved.layers)
        if resolved.size_bytes > limits.max_bytes:
            raise ImageError(
                f"The image is {resolved.size_bytes} bytes; at most "
                f"{limits.max_bytes} are allowed (NEVIS_IMAGE_MAX_BYTES)."
            )
        cache.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name[:12]}.partial-", dir=cache))
        try:
            _unpack(resolved.image_id, scratch, limits)
            try:
                scratch.rename(dest)
            except OSError:
                if not (dest / _RECORD).is_file():
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    record = json.loads((dest / _RECORD).read_text())
    return UnpackedImage(
        image_id=resolved.image_id,
        root=dest / "rootfs",
        size_bytes=int(record["bytes"]),
        files=int(record["files"]),
        pinned=resolved.pinned,
    )


def _unpack(image_id: str, scratch: Path, limits: ImageLimits) -> None:
    scratch.chmod(0o755)  # learner hosts (another uid) read it once renamed
    saved = scratch / "oci"
    podman.save(image_id, saved)
    layout = oci.read_layout(saved, image_id=image_id, limits=limits)
    root = scratch / "rootfs"
    root.mkdir(mode=0o755)
    budget = ImageBudget(limits)
    for layer in layout.layers:
        with oci.open_layer(layout, layer, budget) as stream:
            apply_layer(stream, root, budget)
    removed = links.remove_escaping_links(root)
    shutil.rmtree(saved)
    (scratch / _RECORD).write_text(
        json.dumps({"image_id": image_id, "bytes": budget.bytes, "files": budget.files, "links_removed": removed})
    )


def real_dir(base: Path, path: Path) -> bool:
    """Whether ``path`` (below ``base``) is a folder reached through folders only, no link."""
    try:
        rel = path.relative_to(base)
    except ValueError:
        return False
    here = base
    for part in ("", *rel.parts):
        here = here / part if part else here
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return False
        except OSError:
            return False
    return True


def _real_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


__all__ = ["LEARNER_DIR", "UnpackedImage", "real_dir", "site_dirs", "unpack_image"]
