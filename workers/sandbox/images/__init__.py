"""Learner images as file systems: resolved, unpacked once per id, read-only, never run.

A submitted container image is treated exactly as a bundle is: files that sandboxed learner
hosts import from (:func:`unpack_image`, :attr:`UnpackedImage.import_paths`), never a process
or a Ray member of its own.
"""

from workers.sandbox.images.limits import ImageError, ImageLimits
from workers.sandbox.images.store import UnpackedImage, unpack_image

__all__ = ["ImageError", "ImageLimits", "UnpackedImage", "unpack_image"]
