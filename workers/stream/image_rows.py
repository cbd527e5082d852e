"""Source images that differ in size: one uint8 ``[h, w, 1|3]`` array per row, read on demand.

A source whose images share one shape comes as one ``[N, H, W, C]`` array. One whose images
differ (image folders, the Parquet format) cannot, and squashing them to one shape would lose
the geometry the reference's evaluation crop depends on. :class:`ImageRows` keeps each row's
extent (known without decoding: image headers, the format's height / width columns) and
decodes a row only when it is read, so preparing a dataset holds its encoded bytes, not its
pixels.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from services.core.errors import DatasetFormatError

_GREY_MODES = frozenset({"1", "L", "I;16", "I", "F"})


class ImageRows:
    """Images of any extent, row ``i`` read by ``read(i)`` and checked against ``shapes[i]``.

    Args:
        shapes: int ``[N, 2]``, each row's ``(height, width)``.
        read: returns row ``i`` as uint8 ``[h, w]`` or ``[h, w, 1|3]``.
        name: the dataset, for error messages.
    """

    def __init__(self, shapes: np.ndarray, read: Callable[[int], np.ndarray], name: str = "") -> None:
        shapes = np.asarray(shapes)
        if shapes.ndim != 2 or shapes.shape[1] != 2 or not np.issubdtype(shapes.dtype, np.integer):
            raise ValueError(
                f"The 'shapes' parameter of ImageRows must be ints [N, 2]. Got {shapes.dtype} {shapes.shape} instead."
            )
        if len(shapes) and shapes.min() < 1:
            raise DatasetFormatError(
                f"Dataset {name!r}: an image has an empty extent (row {int(np.argwhere(shapes < 1)[0, 0])})."
            )
        self.shapes = shapes.astype(np.int64)
        self._read = read
        self.name = name

    @classmethod
    def from_arrays(cls, arrays: Sequence[np.ndarray], name: str = "") -> ImageRows:
        """Rows already in memory (tests, small sources)."""
        shapes = np.asarray([a.shape[:2] for a in arrays], dtype=np.int64).reshape(-1, 2)
        return cls(shapes, lambda i: arrays[i], name)

    def __len__(self) -> int:
        return int(self.shapes.shape[0])

    def __getitem__(self, i: int) -> np.ndarray:
        image = self._read(i)
        if image.ndim == 2:
            image = image[..., None]
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] not in (1, 3):
            raise DatasetFormatError(
                f"Dataset {self.name!r}: row {i} is not uint8 [h, w, 1|3] pixels; got {image.dtype} {image.shape}."
            )
        if tuple(image.shape[:2]) != tuple(self.shapes[i]):
            raise DatasetFormatError(
                f"Dataset {self.name!r}: row {i} decodes to {image.shape[0]}x{image.shape[1]} "
                f"pixels, but its recorded extent is {self.shapes[i][0]}x{self.shapes[i][1]}."
            )
        return image

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def take(self, rows: np.ndarray) -> ImageRows:
        """The rows ``rows`` (source row ids), still read on demand: a split's or a shard's
        images without decoding the others (read them in ascending order: readers such as
        the Parquet one keep one row group at a time)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        return ImageRows(self.shapes[rows], lambda i: self._read(int(rows[i])), self.name)


def decode_image(data: bytes, where: str) -> np.ndarray:
    """Encoded bytes (any format Pillow reads) → uint8 ``[h, w, 1]`` (grey) or ``[h, w, 3]``.

    Grey stays one channel until the shared RGB step of storage; everything else (palette,
    RGBA, CMYK) becomes RGB, as the image-folder reader has always done.
    """
    try:
        with Image.open(io.BytesIO(data)) as pil:
            return pil_pixels(pil)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DatasetFormatError(f"Cannot decode the image of {where}: {exc}") from None


def pil_pixels(pil: Image.Image) -> np.ndarray:
    """An opened Pillow image as uint8 ``[h, w, 1|3]`` (grey modes stay grey).

    16-bit grey keeps its high byte (Pillow's own conversion would clip every value above 255
    to white, as in medical and depth sources); the reference's decoder is not read on this.
    """
    if pil.mode.startswith("I;16"):
        wide = np.asarray(pil).astype(np.uint16)
        return (wide >> 8).astype(np.uint8)[..., None]
    mode = "L" if pil.mode in _GREY_MODES else "RGB"
    pixels = np.asarray(pil.convert(mode))
    return pixels[..., None] if pixels.ndim == 2 else pixels


def sniff_image(data: bytes, where: str) -> tuple[str, int, int, int]:
    """``(format, height, width, channels)`` of encoded bytes, from the header only."""
    try:
        with Image.open(io.BytesIO(data)) as pil:
            channels = 1 if pil.mode in _GREY_MODES else 3
            return str(pil.format or "unknown"), int(pil.height), int(pil.width), channels
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DatasetFormatError(f"Cannot read the image header of {where}: {exc}") from None


__all__ = ["ImageRows", "decode_image", "pil_pixels", "sniff_image"]
