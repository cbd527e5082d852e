"""Kaggle datasets through the official ``kaggle`` client, which is optional.

The client is run as a subprocess (``kaggle datasets download <owner>/<slug> -p <dir>``), so
the service does not depend on it; it reads its own credentials (``KAGGLE_USERNAME`` and
``KAGGLE_KEY``, or ``kaggle.json`` in ``KAGGLE_CONFIG_DIR`` or ``~/.kaggle``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

INSTALL_HINT = "pip install kaggle"
CREDENTIALS_HINT = (
    "set KAGGLE_USERNAME and KAGGLE_KEY, or put kaggle.json (from kaggle.com > "
    "Settings > API > Create New Token) in ~/.kaggle/"
)


class KaggleError(Exception):
    """The Kaggle client is missing or failed; the message says which."""


def kaggle_credentials() -> str | None:
    """Where the Kaggle client will find credentials, or ``None`` when it will find none."""
    if os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY"):
        return "KAGGLE_USERNAME / KAGGLE_KEY"
    folder = os.environ.get("KAGGLE_CONFIG_DIR") or str(Path.home() / ".kaggle")
    path = Path(folder) / "kaggle.json"
    return str(path) if path.is_file() else None


def kaggle_download(ref: str, dest: Path, *, timeout: float = 24 * 3600) -> Path:
    """Download Kaggle dataset ``<owner>/<slug>`` as ``dest/<slug>.zip`` (not unzipped).

    Raises:
        KaggleError: no client installed, or the client failed (its last output line).
    """
    client = shutil.which("kaggle")
    if client is None:
        raise KaggleError(f"the kaggle client is not installed ({INSTALL_HINT})")
    dest.mkdir(parents=True, exist_ok=True)
    command = [client, "datasets", "download", ref, "-p", str(dest)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise KaggleError(f"kaggle datasets download {ref} took longer than {timeout:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise KaggleError(f"kaggle datasets download {ref} failed: {last[0]}")
    path = dest / (ref.rsplit("/", 1)[-1] + ".zip")
    if not path.is_file():
        raise KaggleError(f"kaggle datasets download {ref} did not write {path.name}")
    return path


__all__ = ["CREDENTIALS_HINT", "INSTALL_HINT", "KaggleError", "kaggle_credentials", "kaggle_download"]
