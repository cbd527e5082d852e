"""A folder only the service's own user can write, for what harness code keeps on a node.

Why: the node's FLOP-rate calibration decides every floor (:mod:`workers.sandbox.metering.calibration`);
kept in the world-writable ``/tmp`` under a guessable name, any local user or process could
plant a record first (a rate of 1 makes no floor bite). The folder is made ``0700`` and is
used only while it is a real folder (not a link) owned by this process's user that no one
else may write; anything else there means no folder (the caller then keeps nothing on disk).
Learner hosts never see it: under bubblewrap their ``/tmp`` is a private RAM folder.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

NAME = "nevis-harness"


def harness_dir(base: Path | None = None) -> Path | None:
    """``<base or the system temporary folder>/nevis-harness-<uid>``, made 0700 if missing;
    ``None`` where it cannot be made or is not this user's alone."""
    folder = (base or Path(tempfile.gettempdir())) / f"{NAME}-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder if owned_alone(folder) else None


def owned_alone(path: Path) -> bool:
    """Whether ``path`` (not followed if a link) is this user's and writable by no one else."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        return False
    return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


__all__ = ["NAME", "harness_dir", "owned_alone"]
