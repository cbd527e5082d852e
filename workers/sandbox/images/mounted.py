"""A learner image mounted by the node rather than unpacked here (the ``kuberay`` backend's
read-only image volume): which of its folders a learner host may be given.

The kubelet mounts the image's file system as it is, links included, so a folder such as
``opt/learner`` may be a link to ``/`` or to the node's Ray session. Bind-mounting a path
follows its links, so an import path below the mount (``NEVIS_IMAGE_ROOT``) is given to a
host only where it is reached through real folders from the mount, as an unpacked image's
paths are (:attr:`.store.UnpackedImage.import_paths`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from workers.sandbox.images.store import real_dir

IMAGE_ROOT_VAR = "NEVIS_IMAGE_ROOT"


def usable_import_path(path: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``path`` may be bound into a learner host: anything outside a mounted image, and
    below one only a folder reached without a link."""
    root = (os.environ if env is None else env).get(IMAGE_ROOT_VAR)
    if not root:
        return True
    base, target = Path(os.path.normpath(root)), Path(os.path.normpath(path))
    if base != target and base not in target.parents:
        return True
    return real_dir(base, target)


__all__ = ["IMAGE_ROOT_VAR", "usable_import_path"]
