"""From a stored checkpoint to frozen features: load, check, extract, augment.

Contract:
- :func:`load_checkpoint_bytes` returns the checkpoint's bytes only if the object exists and
  its sha256 matches BOTH the store's record and the database row; otherwise it raises
  :class:`~services.core.errors.ProbeInputError` naming the checkpoint (missing vs corrupted).
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

from services.core.errors import DataIntegrityError, ObjectNotFoundError, ProbeInputError
from services.store.objects import ObjectStore
from workers.sandbox.joint_pass import features_and_scores
from workers.sandbox.views import augment_views
from workers.stream.task_info import Originals

EXTRACT_CHUNK = 512  # images per features() call


def load_checkpoint_bytes(
    store: ObjectStore, *, checkpoint_id: int, object_key: str, sha256: str, trial_id: int, step: int
) -> bytes:
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
    except DataIntegrityError as exc:
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
    except Exception as exc:
        raise ProbeInputError(
            f"Checkpoint {checkpoint_id} could not be loaded by learner "
            f"{getattr(learner, 'name', '?')!r}: {type(exc).__name__}: {exc}"
        ) from exc


def extract(learner: Any, predictor: Any, images: np.ndarray, ctx: Any) -> np.ndarray:
    """``learner.features`` over ``images`` in chunks, as a checked float32 (N, d) array."""
    parts = []
    for start in range(0, len(images), EXTRACT_CHUNK):
        chunk = images[start : start + EXTRACT_CHUNK]
        parts.append(_checked(learner, np.asarray(learner.features(predictor, chunk, ctx)), len(chunk)))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def _checked(learner: Any, out: np.ndarray, rows: int) -> np.ndarray:
    """``features()``'s answer for ``rows`` images as float32, or a ProbeInputError naming its fault."""
    if out.ndim != 2 or out.shape[0] != rows:
        raise ProbeInputError(
            f"features() of learner {getattr(learner, 'name', '?')!r} must return an array "
            f"shaped (num_images, d) = ({rows}, d); got {out.shape}."
        )
    if not np.issubdtype(out.dtype, np.number) or not np.isfinite(out).all():
        raise ProbeInputError(
            f"features() of learner {getattr(learner, 'name', '?')!r} returned non-finite "
            "or non-numeric values; probes need finite features."
        )
    return out.astype(np.float32, copy=False)


def extract_with_scores(
    learner: Any, predictor: Any, images: np.ndarray, ctx: Any, *, task_order: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`extract` and the learner's scores of the same images, from one pass where the
    learner offers it (:mod:`workers.sandbox.joint_pass`)."""
    features, scores = [], []
    for start in range(0, len(images), EXTRACT_CHUNK):
        chunk = images[start : start + EXTRACT_CHUNK]
        try:
            out, score = features_and_scores(learner, predictor, chunk, ctx)
        except ProbeInputError:
            raise
        except Exception as exc:
            raise ProbeInputError(
                f"features() or predict() of learner {getattr(learner, 'name', '?')!r} failed on task "
                f"{task_order} (features and the pretext error): {type(exc).__name__}: {exc}"
            ) from exc
        features.append(_checked(learner, np.asarray(out), len(chunk)))
        scores.append(np.asarray(score))
    if not features:
        return np.zeros((0, 0), dtype=np.float32), np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(features), np.concatenate(scores)


def augmented_features(
    learner: Any,
    predictor: Any,
    images: np.ndarray,
    q: int,
    ctx: Any,
    *,
    seed: int,
    chunk_images: int = 64,
    originals: Originals | None = None,
) -> tuple[np.ndarray, str]:
    """LiDAR embeddings (n, q, d) of ``images`` under q augmentations each, and their source;
    with ``originals`` (the same images as stored for training) the views are cut from them."""
    blocks, source = [], ""
    for start in range(0, len(images), chunk_images):
        clean = images[start : start + chunk_images]
        stored = None if originals is None else originals.take(slice(start, start + chunk_images))
        own = getattr(learner, "augment_views", None)  # a sandboxed learner augments in its host
        views, source = (
            own(predictor, clean, q, seed=seed + start, ctx=ctx, originals=stored)
            if callable(own)
            else augment_views(
                learner,
                predictor,
                clean,
                q,
                seed=seed + start,
                originals=None if stored is None else stored.images,
                extents=None if stored is None else stored.extents,
            )
        )
        feats = extract(learner, predictor, views.reshape(-1, *images.shape[1:]), ctx)
        blocks.append(feats.reshape(len(clean), q, -1))
    return np.concatenate(blocks), source


__all__ = [
    "EXTRACT_CHUNK",
    "augmented_features",
    "extract",
    "extract_with_scores",
    "load_checkpoint_bytes",
    "load_predictor",
]
