"""Bring images to the stored form: uint8 ``[N, S, S, 3]`` at one square resolution.

Grey images become RGB (three equal channels), so every learner sees the same shape. The
resize ignores the aspect ratio (as NEVIS'22 does) and is antialiased: PIL's bilinear filter
widens its support when it shrinks an image, so downscaling averages rather than skips
pixels. :data:`RESIZE_METHOD` names the method and is recorded in every shard index.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

RESIZE_METHOD = "PIL.Image.resize BILINEAR (antialiased), aspect ratio ignored, grey -> RGB"
IDENTITY_METHOD = "none (already at the stored size), grey -> RGB"


def check_image_size(size: int) -> int:
    """Raise ValueError unless ``size`` is a stored resolution we support."""
    if not isinstance(size, int) or isinstance(size, bool) or not 8 <= size <= 512:
        raise ValueError(
            f"The 'image_size' parameter must be an int in [8, 512]. Got {size!r} instead."
        )
    return size


def to_rgb(images: np.ndarray) -> np.ndarray:
    """``[N, H, W, 1|3]`` → ``[N, H, W, 3]`` (grey copied into each channel)."""
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(
            f"The 'images' parameter of to_rgb must have shape [N, H, W, 1|3]. "
            f"Got {images.shape} instead."
        )
    if images.shape[-1] == 3:
        return images
    return np.repeat(images, 3, axis=-1)


def resize_image(image: np.ndarray, size: int) -> np.ndarray:
    """One uint8 ``[H, W, C]`` image → ``[size, size, C]`` with :data:`RESIZE_METHOD`."""
    if image.shape[0] == size and image.shape[1] == size:
        return image
    channels = image.shape[-1]
    pil = Image.fromarray(image[..., 0] if channels == 1 else image)
    out = np.asarray(pil.resize((size, size), Image.Resampling.BILINEAR))
    return out[..., None] if channels == 1 else out


def to_stored(images: np.ndarray, size: int) -> tuple[np.ndarray, str]:
    """Resize and convert a batch to the stored form.

    Args:
        images: uint8 ``[N, H, W, C]`` with C = 1 or 3.
        size: the stored side length S.

    Returns:
        uint8 ``[N, S, S, 3]`` (C-contiguous) and the method used, for the shard index.
    """
    check_image_size(size)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(
            "The 'images' parameter of to_stored must be uint8 [N, H, W, 1|3]. "
            f"Got {images.dtype} {images.shape} instead."
        )
    n, height, width, channels = images.shape
    if (height, width) == (size, size):
        return np.ascontiguousarray(to_rgb(images)), IDENTITY_METHOD
    # Resize in the source's channel count (a third of the work for grey), then expand.
    out = np.empty((n, size, size, channels), dtype=np.uint8)
    for i in range(n):
        out[i] = resize_image(images[i], size)
    return np.ascontiguousarray(to_rgb(out)), RESIZE_METHOD


__all__ = [
    "IDENTITY_METHOD", "RESIZE_METHOD", "check_image_size", "resize_image", "to_rgb", "to_stored",
]
