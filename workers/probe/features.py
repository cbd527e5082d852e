"""From a stored checkpoint to frozen features: load, check, extract, augment.

Contract:
- :func:`load_checkpoint_bytes` returns the checkpoint's bytes only if the object exists and
  its sha256 matches BOTH the store's record and the database row; otherwise it raises
  :class:`~workers.probe.errors.ProbeInputError` naming the checkpoint (missing vs corrupted).
- :func:`extract` calls the learner's ``features`` in chunks and checks the result is a
  finite (N, d) array.
- :func:`augmented_features` gives LiDAR's (n, q, d) embeddings: q augmentations of each of
  n clean images, through the learner's ``features``. The augmentation is the learner's own
  training augmentation where it can be found (see :func:`augment_views`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from services.core.errors import IntegrityError, ObjectNotFoundError
from services.store.objects import ObjectStore
from workers.learners.augment import AugmentConfig, crop_params, to_float
from workers.probe.errors import ProbeInputError

EXTRACT_CHUNK = 512  # images per features() call
AUGMENT_HOOK = "augment_images"  # optional learner method: (predictor, images, *, seed) -> images


def load_checkpoint_bytes(store: ObjectStore, *, checkpoint_id: int, object_key: str,
                          sha256: str, trial_id: int, step: int) -> bytes:
    """The verified bytes of one checkpoint.

    Raises:
        ProbeInputError: The object is missing, or its bytes do not match their checksum.
    """
    where = f"Checkpoint {checkpoint_id} (trial {trial_id}, step {step})"
    try:
        data = store.get_bytes(object_key)
    except ObjectNotFoundError:
        raise ProbeInputError(
            f"{where} is missing: no object {object_key!r} in the store {store.url}. It was "
            "deleted or never written; this checkpoint cannot be probed (the others are)."
        ) from None
    except IntegrityError as exc:
        raise ProbeInputError(f"{where} is corrupted in the object store: {exc}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ProbeInputError(
            f"{where} is corrupted: its bytes hash to {actual[:12]}…, the database recorded "
            f"{sha256[:12]}…. It cannot be probed (the others are)."
        )
    return data


def load_predictor(learner: Any, data: bytes, info: Any, ctx: Any, *, checkpoint_id: int) -> Any:
    """The learner's predictor from checkpoint bytes; a failure is a ProbeInputError."""
    try:
        return learner.load_predictor(data, info, ctx)
    except Exception as exc:  # noqa: BLE001 - whatever the learner raises, name the checkpoint
        raise ProbeInputError(
            f"Checkpoint {checkpoint_id} could not be loaded by learner "
            f"{getattr(learner, 'name', '?')!r}: {type(exc).__name__}: {exc}"
        ) from exc


def extract(learner: Any, predictor: Any, images: np.ndarray, ctx: Any) -> np.ndarray:
    """``learner.features`` over ``images`` in chunks, as a checked float32 (N, d) array."""
    parts = []
    for start in range(0, len(images), EXTRACT_CHUNK):
        chunk = images[start : start + EXTRACT_CHUNK]
        out = np.asarray(learner.features(predictor, chunk, ctx))
        if out.ndim != 2 or out.shape[0] != len(chunk):
            raise ProbeInputError(
                f"features() of learner {getattr(learner, 'name', '?')!r} must return an array "
                f"shaped (num_images, d) = ({len(chunk)}, d); got {out.shape}."
            )
        if not np.issubdtype(out.dtype, np.number) or not np.isfinite(out).all():
            raise ProbeInputError(
                f"features() of learner {getattr(learner, 'name', '?')!r} returned non-finite "
                "or non-numeric values; probes need finite features."
            )
        parts.append(out.astype(np.float32, copy=False))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


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
       scale (0.35, 1) and a horizontal flip), recorded as a fallback.
    """
    n = len(images)
    hook = getattr(learner, AUGMENT_HOOK, None)
    if callable(hook):
        views = np.stack([np.asarray(hook(predictor, images, seed=seed * 1000 + j))
                          for j in range(q)], axis=1)
        if views.shape != (n, q, *images.shape[1:]) or views.dtype != np.uint8:
            raise ProbeInputError(
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


def augmented_features(learner: Any, predictor: Any, images: np.ndarray, q: int, ctx: Any, *,
                       seed: int, chunk_images: int = 64) -> tuple[np.ndarray, str]:
    """LiDAR embeddings (n, q, d) of ``images`` under q augmentations each, and their source."""
    blocks, source = [], ""
    for start in range(0, len(images), chunk_images):
        clean = images[start : start + chunk_images]
        views, source = augment_views(learner, predictor, clean, q, seed=seed + start)
        feats = extract(learner, predictor, views.reshape(-1, *images.shape[1:]), ctx)
        blocks.append(feats.reshape(len(clean), q, -1))
    return np.concatenate(blocks), source
