"""Bring source images to the two stored forms of a shard (format 2).

- **Task-resolution images**, uint8 ``[N, S, S, 3]``: the central square of each source
  image (side = its shorter side, offsets rounded down, as the reference's
  ``central_crop_window``), resized to S. This is the reference's evaluation input, so the
  default reads give every learner, probe and the scoring exactly that.
- **Originals**, uint8 ``[N, H, W, 3]`` with per-row valid extents: each source image with
  its aspect ratio kept, its long side fitted to the stored side C (never enlarged), for the
  training crops the reference takes from the source image.

Grey images become RGB (three equal channels). Every resize is PIL's bilinear filter, which
is antialiased when it shrinks (it averages rather than skips pixels). The methods are
recorded in every shard index.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from workers.stream.task_info import Originals

RESIZE_METHOD = (
    "central square (side = shorter side, offsets floored) -> PIL.Image.resize BILINEAR "
    "(antialiased) to S x S, grey -> RGB"
)
ORIGINALS_METHOD = (
    "aspect ratio kept, long side fitted to the stored side (never enlarged) with "
    "PIL.Image.resize BILINEAR (antialiased), grey -> RGB"
)
MIN_STORED_SCALE, MAX_STORED_SCALE = 1.0, 4.0


def check_image_size(size: int) -> int:
    """Raise ValueError unless ``size`` is a task resolution we support."""
    if not isinstance(size, int) or isinstance(size, bool) or not 8 <= size <= 512:
        raise ValueError(
            f"The 'image_size' parameter must be an int in [8, 512]. Got {size!r} instead."
        )
    return size


def check_stored_scale(scale: float) -> float:
    """Raise ValueError unless ``scale`` (stored long side / task resolution) is supported."""
    if (not isinstance(scale, (int, float)) or isinstance(scale, bool)
            or not MIN_STORED_SCALE <= scale <= MAX_STORED_SCALE):
        raise ValueError(
            f"The 'stored_scale' parameter (NEVIS_STORED_SCALE) must be a number in "
            f"[{MIN_STORED_SCALE:g}, {MAX_STORED_SCALE:g}]. Got {scale!r} instead."
        )
    return float(scale)


def stored_side(size: int, scale: float) -> int:
    """The long side C of stored originals for task resolution ``size``."""
    return round(check_image_size(size) * check_stored_scale(scale))


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


def resize_image(image: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    """One uint8 ``[H, W, C]`` image → ``[h, w, C]`` (``size`` = side or (h, w)), bilinear."""
    height, width = (size, size) if isinstance(size, int) else size
    if image.shape[0] == height and image.shape[1] == width:
        return image
    channels = image.shape[-1]
    pil = Image.fromarray(image[..., 0] if channels == 1 else image)
    out = np.asarray(pil.resize((width, height), Image.Resampling.BILINEAR))
    return out[..., None] if channels == 1 else out


def central_square(height: int, width: int) -> tuple[int, int, int]:
    """``(top, left, side)`` of the central square, as the reference's central crop window."""
    side = min(height, width)
    return (height - side) // 2, (width - side) // 2, side


def fitted_shape(height: int, width: int, side: int) -> tuple[int, int]:
    """``(h, w)`` of an image with its long side fitted to ``side``, never enlarged."""
    scale = min(1.0, side / max(height, width))
    return max(1, round(height * scale)), max(1, round(width * scale))


def _check_source(images: np.ndarray, caller: str) -> None:
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(
            f"The 'images' parameter of {caller} must be uint8 [N, H, W, 1|3]. "
            f"Got {images.dtype} {images.shape} instead."
        )


def to_task_resolution(images: np.ndarray, size: int) -> np.ndarray:
    """The reference's evaluation input: central square of each image, resized to S×S.

    Args:
        images: uint8 ``[N, H, W, C]`` source images, C = 1 or 3.
        size: the task resolution S.

    Returns:
        uint8 ``[N, S, S, 3]``, C-contiguous.
    """
    check_image_size(size)
    _check_source(images, "to_task_resolution")
    n, height, width, channels = images.shape
    top, left, side = central_square(height, width)
    squares = images[:, top : top + side, left : left + side]
    out = np.empty((n, size, size, channels), dtype=np.uint8)
    for i in range(n):  # in the source's channel count: a third of the work for grey
        out[i] = resize_image(squares[i], size)
    return np.ascontiguousarray(to_rgb(out))


def to_originals(images: np.ndarray, side: int) -> Originals:
    """The stored originals: aspect ratio kept, long side fitted to ``side``, valid extents.

    A source array has one shape, so every row's extent is the whole canvas; the extents are
    stored per row anyway, so readers and crops never assume it.
    """
    if not isinstance(side, int) or side < 1:
        raise ValueError(f"The 'side' parameter of to_originals must be an int in [1, inf). "
                         f"Got {side!r} instead.")
    _check_source(images, "to_originals")
    n, height, width, channels = images.shape
    fitted = fitted_shape(height, width, side)
    out = np.empty((n, *fitted, channels), dtype=np.uint8)
    for i in range(n):
        out[i] = resize_image(images[i], fitted)
    extents = np.tile(np.asarray(fitted, dtype=np.int32), (n, 1))
    return Originals(np.ascontiguousarray(to_rgb(out)), extents)


__all__ = [
    "MAX_STORED_SCALE", "MIN_STORED_SCALE", "ORIGINALS_METHOD", "RESIZE_METHOD",
    "central_square", "check_image_size", "check_stored_scale", "fitted_shape", "resize_image",
    "stored_side", "to_originals", "to_rgb", "to_task_resolution",
]
