"""``nevis submit --image REF``: a learner image registered by digest (or one re-used).

The reference is pinned here first where this machine's podman knows the image (a ``localhost/``
image built here, or one it pulls), so the service is asked for exactly the image that ``nevis
check --image`` checked; without podman it goes as given and the service pins it (or refuses a
tag, where it requires digests). A learner of the user's with the same pinned image and entry
point is re-used, as ``nevis submit FOLDER`` re-uses an identical bundle.
"""

from __future__ import annotations

import uuid

from rich.console import Console

from services.cli.client import ApiProblem, Learner, NevisClient
from workers.sandbox.images import ImageError
from workers.sandbox.images.podman import resolve


def pinned_ref(ref: str) -> str:
    """``ref`` by digest where this machine's podman can resolve it; else ``ref`` unchanged."""
    try:
        return resolve(ref, pull=True).pinned
    except ImageError:
        return ref


def default_image_name(pinned: str) -> str:
    """``<repository's last part>-<digest's first 10 hex>``: unique per image, within the name rules."""
    repository, _, digest = pinned.partition("@")
    repository = repository.rsplit("/", 1)[-1].rsplit(":", 1)[0]
    base = "".join(c if c.isalnum() or c in "._-" else "-" for c in repository).strip("-._") or "learner"
    hexes = digest.removeprefix("sha256:")[:10] or uuid.uuid4().hex[:10]
    return f"{base[:80]}-{hexes}"


def image_learner(
    client: NevisClient, ref: str, *, entrypoint: str, name: str | None, cpus: float, gpus: int, console: Console
) -> Learner:
    """The user's learner of image ``ref`` (pinned) and ``entrypoint``: found, or registered."""
    pinned = pinned_ref(ref)
    found = client.find_image_learner(image=pinned, entrypoint=entrypoint)
    if found is not None:
        console.print(f"Re-using learner {found.id} ({found.name}): same image {pinned} and entry point.")
        return found
    chosen = name or default_image_name(pinned)
    try:
        learner = client.register_image(pinned, name=chosen, entrypoint=entrypoint, cpus=cpus, gpus=gpus)
    except ApiProblem as exc:  # a default name another user holds (names are global): once more
        if exc.status != 409 or exc.field != "name" or name is not None:
            raise
        learner = client.register_image(
            pinned, name=f"{chosen[:80]}-{uuid.uuid4().hex[:6]}", entrypoint=entrypoint, cpus=cpus, gpus=gpus
        )
    console.print(f"Registered learner {learner.id} ({learner.name}): image {learner.image}.")
    return learner


__all__ = ["default_image_name", "image_learner", "pinned_ref"]
