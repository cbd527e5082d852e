"""Augmented views of images for LiDAR, made where the learner's predictor lives.

LiDAR needs q augmentations of each clean image, ideally the learner's own training
augmentation, which only the learner's process can read off its predictor. So this runs in
the learner host (for a sandboxed learner) or in-process (for a learner object in tests).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from services.core.errors import LearnerError
from workers.learners.augment import AugmentConfig, crop_params, to_float

AUGMENT_HOOK = "augment_images"  # optional learner method: (predictor, images, *, seed) -> images


def _pixel_augment(images: np.ndarray, cfg: AugmentConfig, generator: torch.Generator) -> np.ndarray:
    """Random-resized-crop + flip of uint8 images, kept at their own size and as uint8.

    The same crop and flip as :func:`workers.learners.augment.train_transform` (same
    parameters, same sampler), minus the final normalisation and resize, so the learner's
    ``features`` receives images like the ones it is normally given.
    """
    x = to_float(images)
    n, _, h, w = x.shape
    theta = crop_params(n, cfg, generator)
    grid = F.affine_grid(theta, [n, 3, h, w], align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return (out.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


def augment_views(learner: Any, predictor: Any, images: np.ndarray, q: int, *,
                  seed: int) -> tuple[np.ndarray, str]:
    """q augmented views of each image, shaped (n, q, H, W, 3), and where the augmentation came from.

    In order of preference:
    1. the learner's own ``augment_images(predictor, images, *, seed)`` hook, if it has one;
    2. the predictor's ``augment`` settings, if they are an
       :class:`~workers.learners.augment.AugmentConfig` (the ``indep`` baselines: their
       exact training crop and flip);
    3. otherwise the baselines' default training augmentation (random-resized-crop with
       scale (0.08, 1) and a horizontal flip), recorded as a fallback.
    """
    n = len(images)
    hook = getattr(learner, AUGMENT_HOOK, None)
    if callable(hook):
        views = np.stack([np.asarray(hook(predictor, images, seed=seed * 1000 + j))
                          for j in range(q)], axis=1)
        if views.shape != (n, q, *images.shape[1:]) or views.dtype != np.uint8:
            raise LearnerError(
                f"{AUGMENT_HOOK}() of learner {getattr(learner, 'name', '?')!r} must return "
                f"uint8 images shaped like its input {images.shape}; got {views.shape[0::2]}."
            )
        return views, f"learner.{AUGMENT_HOOK}"
    cfg = getattr(predictor, "augment", None)
    if isinstance(cfg, AugmentConfig):
        source = "predictor.augment (the learner's training crop and flip)"
    else:
        cfg = AugmentConfig(size=int(images.shape[1]))
        source = "fallback: the baselines' training augmentation (random-resized-crop + flip)"
    generator = torch.Generator().manual_seed(seed)
    repeated = np.repeat(images, q, axis=0)  # image-major: views of image i are rows i*q ...
    views = _pixel_augment(repeated, cfg, generator)
    return views.reshape(n, q, *images.shape[1:]), source


__all__ = ["AUGMENT_HOOK", "augment_views"]
