"""Bring source images to the two stored forms of a shard (format 2).

- **Task-resolution images**, uint8 ``[N, S, S, 3]``: the central square of each source
  image (side = its shorter side, offsets rounded down, as the reference's
  ``central_crop_window``), resized to S. This is the reference's evaluation input, so the
  default reads give every learner, probe and the scoring exactly that.
- **Originals**, uint8 ``[N, H, W, 3]`` with per-row valid extents: each source image with
  its aspect ratio kept, its long side fitted to the stored side C (never enlarged), for the
  training crops the reference takes from the source image.

Sources come as one ``[N, H, W, C]`` array (one shape) or as :class:`ImageRows` (images of
different sizes, each decoded once, when it is stored); both take the same per-image steps, so
an image's stored forms do not depend on how its source packs it.

Grey images become RGB (three equal channels). Every resize is PIL's bilinear filter, which
is antialiased when it shrinks (it averages rather than skips pixels). The methods are
recorded in every shard index.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from workers.stream.image_rows import ImageRows
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
        raise ValueError(f"The 'image_size' parameter must be an int in [8, 512]. Got {size!r} instead.")
    return size


def check_stored_scale(scale: float) -> float:
    """Raise ValueError unless ``scale`` (stored long side / task resolution) is supported."""
    if (
        not isinstance(scale, (int, float))
        or isinstance(scale, bool)
        or not MIN_STORED_SCALE <= scale <= MAX_STORED_SCALE
    ):
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
            f"The 'images' parameter of to_rgb must have shape [N, H, W, 1|3]. Got {images.shape} instead."
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


SourceImages = np.ndarray | ImageRows
"""One ``[N, H, W, C]`` array (a source of one size) or :class:`ImageRows` (sizes differ)."""


def _check_source(images: SourceImages, caller: str) -> None:
    if isinstance(images, ImageRows):
        return  # each row is checked as it is read
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(
            f"The 'images' parameter of {caller} must be uint8 [N, H, W, 1|3] or ImageRows. "
            f"Got {images.dtype} {images.shape} instead."
        )


def source_extents(images: SourceImages) -> np.ndarray:
    """int ``[N, 2]``: each source image's ``(height, width)``, without decoding any."""
    if isinstance(images, ImageRows):
        return images.shapes
    return np.tile(np.asarray(images.shape[1:3], dtype=np.int64), (len(images), 1))


def source_shape_summary(images: SourceImages) -> list[int] | dict[str, list[int]]:
    """What a shard index records of the source's geometry: ``[H, W, C]`` for one shape,
    else the smallest and largest extents."""
    if not isinstance(images, ImageRows):
        return list(images.shape[1:])
    extents = images.shapes
    if not len(extents):
        return {"min": [], "max": []}
    return {"min": extents.min(axis=0).tolist(), "max": extents.max(axis=0).tolist()}


def task_square(image: np.ndarray, size: int) -> np.ndarray:
    """One source image ``[h, w, C]`` → its central square resized to ``[S, S, 3]``."""
    top, left, side = central_square(image.shape[0], image.shape[1])
    out = resize_image(image[top : top + side, left : left + side], size)  # in the source's
    return out if out.shape[-1] == 3 else np.repeat(out, 3, axis=-1)  # channels: less work


def fitted_original(image: np.ndarray, side: int) -> np.ndarray:
    """One source image ``[h, w, C]`` → ``[h', w', 3]``, long side fitted to ``side``."""
    out = resize_image(image, fitted_shape(image.shape[0], image.shape[1], side))
    return out if out.shape[-1] == 3 else np.repeat(out, 3, axis=-1)


def to_task_resolution(images: SourceImages, size: int) -> np.ndarray:
    """The reference's evaluation input: central square of each image, resized to S×S.

    Args:
        images: uint8 ``[N, H, W, C]`` source images (C = 1 or 3), or :class:`ImageRows`.
        size: the task resolution S.

    Returns:
        uint8 ``[N, S, S, 3]``, C-contiguous.
    """
    return stored_forms(images, size, None)[0]


def to_originals(images: SourceImages, side: int) -> Originals:
    """The stored originals: aspect ratio kept, long side fitted to ``side``, valid extents.

    Rows of different extents share one canvas (the largest fitted height and width), padded
    with zeros beyond each row's extent; a source array of one shape fills its canvas.
    """
    return stored_forms(images, None, side)[1]


def originals_canvas(images: SourceImages, side: int) -> tuple[int, int]:
    """``(H, W)`` the originals of ``images`` share: their largest fitted height and width,
    from the extents alone (a dataset stored shard by shard knows it before decoding)."""
    height = width = 1
    for h, w in np.unique(source_extents(images), axis=0).tolist():  # one per distinct extent
        fitted = fitted_shape(h, w, side)
        height, width = max(height, fitted[0]), max(width, fitted[1])
    return height, width


def stored_forms(
    images: SourceImages, size: int | None, side: int | None, canvas: tuple[int, int] | None = None
) -> tuple[np.ndarray | None, Originals | None]:
    """Both stored forms in one pass over the source (each row decoded once); a form whose
    size (S for the task images, C for the originals) is None is not made. ``canvas`` is
    the originals' (H, W), when these rows are part of a larger dataset (its
    :func:`originals_canvas`); by default these rows' own."""
    if size is not None:
        check_image_size(size)
    if side is not None and (not isinstance(side, int) or isinstance(side, bool) or side < 1):
        raise ValueError(f"The 'side' parameter of to_originals must be an int in [1, inf). Got {side!r} instead.")
    _check_source(images, "to_task_resolution" if side is None else "to_originals")
    n = len(images)
    squares = None if size is None else np.empty((n, size, size, 3), dtype=np.uint8)
    originals = None
    if side is not None:
        extents = [fitted_shape(int(h), int(w), side) for h, w in source_extents(images)]
        if canvas is None:
            canvas = np.asarray(extents, dtype=np.int32).reshape(n, 2).max(axis=0, initial=1)
        originals = Originals(
            np.zeros((n, *canvas, 3), dtype=np.uint8), np.asarray(extents, dtype=np.int32).reshape(n, 2)
        )
    for i in range(n):
        image = images[i]
        if squares is not None:
            squares[i] = task_square(image, size)
        if originals is not None:
            height, width = originals.extents[i]
            originals.images[i, :height, :width] = fitted_original(image, side)
    return squares, originals


__all__ = [
    "MAX_STORED_SCALE",
    "MIN_STORED_SCALE",
    "ORIGINALS_METHOD",
    "RESIZE_METHOD",
    "SourceImages",
    "central_square",
    "check_image_size",
    "check_stored_scale",
    "fitted_original",
    "fitted_shape",
    "originals_canvas",
    "resize_image",
    "source_extents",
    "source_shape_summary",
    "stored_forms",
    "stored_side",
    "task_square",
    "to_originals",
    "to_rgb",
    "to_task_resolution",
]
