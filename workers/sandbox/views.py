"""Augmented views of images for LiDAR, made where the learner's predictor lives.

LiDAR needs q augmentations of each clean image, ideally the learner's own training
augmentation, which only the learner's process can read off its predictor. So this runs in
the learner host (for a sandboxed learner) or in-process (for a learner object in tests).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from services.core.errors import LearnerError
from workers.learners.augment import AugmentConfig, train_transform

AUGMENT_HOOK = "augment_images"  # optional learner method: (predictor, images, *, seed) -> images


def _pixel_augment(
    images: np.ndarray, cfg: AugmentConfig, generator: torch.Generator, extents: np.ndarray | None
) -> np.ndarray:
    """The training crop and flip of uint8 images, as uint8 at ``cfg.size``.

    Exactly :func:`workers.learners.augment.train_transform` (same sampler, same crops of the
    stored originals within their ``extents``, same resize) without the normalisation, so
    the learner's ``features`` receives images like the evaluation squares it is given.
    """
    plain = replace(cfg, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    out = train_transform(images, plain, generator=generator, extents=extents)
    return (out.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


def augment_views(
    learner: Any,
    predictor: Any,
    images: np.ndarray,
    q: int,
    *,
    seed: int,
    originals: np.ndarray | None = None,
    extents: np.ndarray | None = None,
) -> tuple[np.ndarray, str]:
    """q augmented views of each image, shaped (n, q, H, W, 3), and where the augmentation came from.

    ``images`` are the evaluation squares (n, H, W, 3); ``originals`` (a canvas) and their
    valid ``extents``, where given, are the same images as stored for training: the crops
    are then cut from them, as training cuts its crops (the learner's own hook gets the
    squares).

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
        views = np.stack([np.asarray(hook(predictor, images, seed=seed * 1000 + j)) for j in range(q)], axis=1)
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
    cfg = replace(cfg, size=int(images.shape[1]))
    generator = torch.Generator().manual_seed(seed)
    source_images = images if originals is None else originals
    # image-major: views of image i are rows i*q ...
    repeated = np.repeat(source_images, q, axis=0)
    cut = None if originals is None or extents is None else np.repeat(np.asarray(extents), q, axis=0)
    views = _pixel_augment(repeated, cfg, generator, cut)
    origin = "stored originals" if cut is not None else "evaluation squares"
    return views.reshape(n, q, *images.shape[1:]), f"{source}, cut from the {origin}"


__all__ = ["AUGMENT_HOOK", "augment_views"]
