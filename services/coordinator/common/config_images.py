"""Learner images: which registries, pinned how, what an image is to a worker, and the caps on
one image (one group of :class:`~services.coordinator.common.config.CoordinatorSettings`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from workers.sandbox.images.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES, DEFAULT_MAX_LAYERS, ImageLimits


class ImageSettings(BaseModel):
    """The learner-image knobs (the policy, which also reads the environment, is the composed
    settings')."""

    image_registries: str = Field(
        default="",
        max_length=4000,
        description="Comma-separated registries (or registry/path prefixes) learner images may "
        "come from, e.g. 'ghcr.io/my-org,registry.lab:5000'; empty: any.",
    )
    require_image_digest: bool | None = Field(
        default=None, description="Learner images must be pinned by digest (default: in production only)."
    )
    image_learners: Literal["unpack", "installed"] = Field(
        default="unpack",
        description="What a learner image is. 'unpack': files for the learner "
        "sandbox (registration resolves it to a digest with podman, unpacks it under "
        "<data dir>/images and checks the entry point's module is in it; workers unpack that "
        "digest and learner hosts import from its /opt/learner and site-packages). "
        "'installed': a label only, for an operator's own deployments whose nodes run the "
        "learner's installation already (its code comes from the worker's PYTHONPATH; on kuberay, "
        "no image volume: learner pods run NEVIS_KUBERAY_WORKER_IMAGE).",
    )
    image_max_layers: int = Field(
        default=DEFAULT_MAX_LAYERS, ge=1, le=1000, description="Most layers a learner image may have."
    )
    image_max_bytes: int = Field(
        default=DEFAULT_MAX_BYTES, ge=1, description="Most bytes a learner image may unpack to."
    )
    image_max_files: int = Field(
        default=DEFAULT_MAX_FILES, ge=1, description="Most files (layer entries) a learner image may hold."
    )

    @property
    def image_limits(self) -> ImageLimits:
        """The caps on one learner image (NEVIS_IMAGE_MAX_LAYERS, _BYTES, _FILES)."""
        return ImageLimits(
            max_layers=self.image_max_layers, max_bytes=self.image_max_bytes, max_files=self.image_max_files
        )


__all__ = ["ImageSettings"]
