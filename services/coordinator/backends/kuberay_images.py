"""A learner image on the ``kuberay`` backend: a read-only image volume, never a pod's image.

Learner pods always run the service's worker image (trusted: Python, ``ray``, the harness's
host code). The submitted image reaches them as files only: the RayJob template's volume
:data:`IMAGE_VOLUME` (Kubernetes ``volumes[].image``, KEP-4639), whose ``reference`` is the
registered digest, mounted read-only in the learner container; the kubelet pulls and unpacks
it, nothing of it runs outside a learner host. The harness (on the head, which never mounts
it: the head holds the credentials) names the mount's ``/opt/learner`` and site-packages as
import paths (``NEVIS_IMAGE_ROOT`` in the job's runtime env); each learner pod's launcher keeps
those that are folders there. A template without the volume (the chart's
``kuberay.learnerImages.delivery=refuse``, for clusters without image volumes) means image
learners are refused at registration (:func:`check_image_volumes`) and at launch.
"""

from __future__ import annotations

from typing import Any

from services.core.errors import ConfigError
from workers.sandbox.images import ImageError
from workers.sandbox.images.mounted import IMAGE_ROOT_VAR

IMAGE_VOLUME = "nevis-learner-image"
REFUSED = (
    "Image learners are refused on this service: its kuberay learner pods get no image volume "
    "(the chart's kuberay.learnerImages.delivery is 'refuse': a cluster without Kubernetes image "
    "volumes, KEP-4639). Upload the learner as a bundle (POST /v1/learners/bundle) instead."
)


def _learner_pod(rayjob: dict[str, Any]) -> dict[str, Any]:
    return rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]


def image_mount(rayjob: dict[str, Any]) -> str | None:
    """Where the template mounts a learner image in the learner container, or ``None`` when
    it renders no image volume (image learners are then refused)."""
    pod = _learner_pod(rayjob)
    if not any(v.get("name") == IMAGE_VOLUME and "image" in v for v in pod.get("volumes", [])):
        return None
    mounts = pod["containers"][0].get("volumeMounts", [])
    found = [m for m in mounts if m.get("name") == IMAGE_VOLUME and m.get("readOnly") is True]
    return str(found[0]["mountPath"]) if found else None


def mount_learner_image(rayjob: dict[str, Any], image: str | None) -> str | None:
    """Fill in (or, for a learner without an image, drop) the learner image volume of a
    launch's RayJob; returns the mount path the learner's files appear at.

    Raises:
        ConfigError: ``image`` is set but the template renders no read-only image volume.
    """
    pod = _learner_pod(rayjob)
    root = image_mount(rayjob)
    if image is None:
        pod["volumes"] = [v for v in pod.get("volumes", []) if v.get("name") != IMAGE_VOLUME]
        container = pod["containers"][0]
        container["volumeMounts"] = [m for m in container.get("volumeMounts", []) if m.get("name") != IMAGE_VOLUME]
        for holder, key in ((pod, "volumes"), (container, "volumeMounts")):
            if not holder[key]:
                del holder[key]
        return None
    if root is None:
        raise ConfigError(REFUSED)
    for volume in pod["volumes"]:
        if volume.get("name") == IMAGE_VOLUME:
            volume["image"] = {**volume["image"], "reference": image}
    container = pod["containers"][0]  # the launcher there checks the image's folders against it
    env = [e for e in container.get("env", []) if e.get("name") != IMAGE_ROOT_VAR]
    container["env"] = [*env, {"name": IMAGE_ROOT_VAR, "value": root}]
    return root


def check_image_volumes(rayjob: dict[str, Any]) -> None:
    """Registration's check on ``kuberay``: image learners need the template's image volume.

    Raises:
        ImageError: (a 422 naming the chart's value) the template renders none.
    """
    if image_mount(rayjob) is None:
        raise ImageError(REFUSED)


__all__ = ["IMAGE_VOLUME", "REFUSED", "check_image_volumes", "image_mount", "mount_learner_image"]
