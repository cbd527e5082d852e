"""Asking this machine's podman for a learner image: resolve a reference, save it by id.

Podman is run as a plain command with a fixed argument list (the reference was checked by the
caller: no option can be smuggled in), a cleared environment but ``PATH`` and a timeout. An
image built here (``localhost/...``) is read from podman's own store; any other is pulled
first (by digest, when the reference has one). Nothing of the image is run: ``inspect`` and
``save`` only read the store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workers.sandbox.images.limits import ImageError

TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ResolvedImage:
    """A reference resolved on this machine: the id (config digest) its files are cached by,
    its manifest digest (what registrations pin) and the size podman reports."""

    ref: str
    image_id: str
    digest: str
    size_bytes: int
    layers: int  # as the store counts them: checked against the cap before anything is saved

    @property
    def pinned(self) -> str:
        """The reference by digest: the repository without tag, ``@`` the manifest digest."""
        name = self.ref.split("@", 1)[0]
        slash = name.rfind("/")
        colon = name.rfind(":")
        if colon > slash:
            name = name[:colon]
        return f"{name}@{self.digest}" if self.digest else self.ref


def podman_path() -> str:
    found = shutil.which("podman")
    if found is None:
        raise ImageError(
            "Learner images need podman on this machine to read them (apt-get install podman); it is not installed.",
            field=None,
        )
    return found


def resolve(ref: str, *, pull: bool = True) -> ResolvedImage:
    """The image ``ref`` names here, pulled first if it is not in the store and ``pull``.

    Raises:
        ImageError: podman is missing, or the image is not here and cannot be pulled.
    """
    if ref.startswith("-"):
        raise ImageError(f"The 'image' {ref[:100]!r} is not an image reference.")
    found = _inspect(ref)
    if found is None and pull and not ref.startswith("localhost/"):
        done = _podman("pull", "--quiet", ref)
        if done.returncode != 0:
            raise ImageError(f"The image {ref!r} cannot be pulled: {_said(done)}")
        found = _inspect(ref)
    if found is None:
        raise ImageError(
            f"The image {ref!r} is not in this machine's image store"
            + (" (a localhost/ image must be built here with podman)." if ref.startswith("localhost/") else ".")
        )
    image_id = str(found.get("Id", ""))
    image_id = image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"
    layers = (found.get("RootFS") or {}).get("Layers") if isinstance(found.get("RootFS"), dict) else None
    return ResolvedImage(
        ref=ref,
        image_id=image_id,
        digest=str(found.get("Digest") or ""),
        size_bytes=int(found.get("Size") or 0),
        layers=len(layers) if isinstance(layers, list) else 0,
    )


def save(image_id: str, folder: Path) -> None:
    """Write the image ``image_id`` as an OCI layout folder at ``folder`` (which must not exist)."""
    done = _podman("image", "save", "--format", "oci-dir", "-o", str(folder), image_id.removeprefix("sha256:"))
    if done.returncode != 0:
        raise ImageError(f"The image {image_id} cannot be read from the store: {_said(done)}")


def _inspect(ref: str) -> dict | None:
    done = _podman("image", "inspect", ref)
    if done.returncode != 0:
        return None
    try:
        found = json.loads(done.stdout)
    except ValueError:
        return None
    return found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else None


def _podman(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for name in ("CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "XDG_RUNTIME_DIR", "HOME"):
        if name in os.environ:  # where podman's own configuration and store are
            env[name] = os.environ[name]
    try:
        return subprocess.run(
            [podman_path(), *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise ImageError(f"podman {args[0]} took longer than {TIMEOUT_S:.0f} s.", field=None) from None


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return (done.stderr or done.stdout or f"exit status {done.returncode}").strip()[-500:]


__all__ = ["ResolvedImage", "podman_path", "resolve", "save"]
