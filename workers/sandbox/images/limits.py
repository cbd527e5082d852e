"""What a learner image may unpack to: its caps, and the error that names the one breached.

Kept apart from the readers (:mod:`.oci`, :mod:`.layers`) because the registration check and a
worker's unpack apply the same caps: layers are counted from the manifest before anything is
read, files and unpacked bytes as the layers are read (declared sizes refuse most bombs before
a byte is inflated; the bytes are still counted as they come).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.errors import BundleError

DEFAULT_MAX_LAYERS = 64
DEFAULT_MAX_BYTES = 8 * 1024**3
DEFAULT_MAX_FILES = 300_000
_HEADER_ALLOWANCE = 4096  # per tar entry beyond its data (headers, padding)
_END_ALLOWANCE = 1024 * 1024  # zeros after a tar's end marker


class ImageError(BundleError):
    """A learner image cannot be used: not found, unreadable, unsafe or over a cap.

    A :class:`~services.core.errors.BundleError` (a ``ValueError``): the API answers 422 and a
    worker does not retry it.
    """

    def __init__(self, *args: object, field: str | None = "image") -> None:
        super().__init__(*args, field=field)


@dataclass(frozen=True)
class ImageLimits:
    """Caps on one image (settings ``NEVIS_IMAGE_MAX_LAYERS``, ``_MAX_BYTES``, ``_MAX_FILES``)."""

    max_layers: int = DEFAULT_MAX_LAYERS
    max_bytes: int = DEFAULT_MAX_BYTES
    max_files: int = DEFAULT_MAX_FILES

    def check_layers(self, count: int) -> None:
        if count > self.max_layers:
            raise ImageError(
                f"The image has {count} layers; at most {self.max_layers} are allowed (NEVIS_IMAGE_MAX_LAYERS)."
            )

    def stream_limit(self) -> int:
        """Uncompressed tar bytes all layers together may take: the data, every entry's
        headers and each layer's end marker."""
        return self.max_bytes + (self.max_files + 1) * _HEADER_ALLOWANCE + self.max_layers * _END_ALLOWANCE


class ImageBudget:
    """Files and unpacked bytes so far, over all layers; raises at the first cap breached."""

    def __init__(self, limits: ImageLimits) -> None:
        self.limits = limits
        self.files = 0
        self.bytes = 0
        self.streamed = 0

    def count_file(self) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise ImageError(
                f"The image holds more than {self.limits.max_files} files; at most "
                f"{self.limits.max_files} are allowed (NEVIS_IMAGE_MAX_FILES)."
            )

    def expect(self, declared: int) -> None:
        """Refuse a member whose declared size alone breaks the cap, before reading it."""
        if self.bytes + declared > self.limits.max_bytes:
            raise self._too_large(self.bytes + declared)

    def spend(self, produced: int) -> None:
        self.bytes += produced
        if self.bytes > self.limits.max_bytes:
            raise self._too_large(self.bytes)

    def stream(self, produced: int) -> None:
        """Count uncompressed layer bytes as read (headers and padding included)."""
        self.streamed += produced
        if self.streamed > self.limits.stream_limit():
            raise ImageError(
                f"The image's layers hold more than {self.limits.stream_limit()} "
                "bytes of tar stream for their files (NEVIS_IMAGE_MAX_BYTES, "
                "NEVIS_IMAGE_MAX_FILES)."
            )

    def _too_large(self, at_least: int) -> ImageError:
        return ImageError(
            f"The image unpacks to more than {self.limits.max_bytes} bytes (at "
            f"least {at_least}); at most {self.limits.max_bytes} are allowed "
            "(NEVIS_IMAGE_MAX_BYTES)."
        )


__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_FILES", "DEFAULT_MAX_LAYERS", "ImageBudget", "ImageError", "ImageLimits"]
