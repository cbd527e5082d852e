"""One gzip member, inflated forward once, with a hard cap: the stream a bundle's tar is read from.

Kept apart from :mod:`workers.sandbox.bundles` because it is a file-like reader with its own
rules (no second member, no trailing bytes, no more than ``limit`` inflated bytes), whatever
archive format sits on top of it.
"""

from __future__ import annotations

import os
import tarfile
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from services.core.errors import BundleError

CHUNK = 1024 * 1024
_GZIP_READ = 64 * 1024  # compressed bytes fed to zlib at a time
_INFLATE_STEP = 256 * 1024  # inflated bytes made ahead of what tarfile asked for, at most
_LOOKBACK = 4 * tarfile.BLOCKSIZE  # inflated bytes kept to re-check what tarfile read last


class SingleGzipStream:
    """The inflated bytes of a .tar.gz, read forward once (what :class:`tarfile.TarFile`
    needs of a file).

    Stricter than :mod:`gzip`, which reads on into further gzip members: anything after the
    first member's end is refused, so a second member cannot hide from any reader. At most
    ``limit`` bytes are ever inflated, whatever a header asks for.
    """

    def __init__(self, handle: BinaryIO, *, limit: int) -> None:
        self._handle = handle
        self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing, CRC checked
        self._limit = limit
        self._inflated = bytearray()  # inflated ahead, not read yet
        self._position = 0
        self._recent = b""
        self._ended = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Forward only: tarfile skips a member's padding, it never goes back."""
        if whence != os.SEEK_SET or offset < self._position:
            raise OSError(f"the gzip stream cannot go back (to {offset} from {self._position})")
        while self._position < offset and self.read(min(CHUNK, offset - self._position)):
            pass
        return self._position

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` inflated bytes, fewer only at the stream's end. Asking for more
        than the limit leaves is refused at once: tarfile asks for what the archive says it
        holds, so a 16 GiB pax header costs nothing."""
        if size < 0 or size > self._limit - self._position:
            raise self._too_long()
        return self._inflate(size)

    def recent(self, count: int) -> bytes:
        """The last ``count`` bytes read (at most ``_LOOKBACK``)."""
        if not 0 <= count <= len(self._recent):
            raise BundleError(
                "The 'file' could not be read to its end (its last tar block "
                "is out of reach); please report this bundle.",
                field="file",
            )
        return self._recent[len(self._recent) - count :]

    def rest(self) -> Iterator[bytes]:
        """The remaining inflated bytes, up to the limit, then the check that the file ends
        with the gzip member."""
        while block := self._inflate(min(CHUNK, self._limit - self._position + 1)):
            if self._position > self._limit:
                raise self._too_long()
            yield block

    def _inflate(self, size: int) -> bytes:
        while len(self._inflated) < size and not self._inflater.eof:
            self._inflate_step()
        data = bytes(self._inflated[:size])
        del self._inflated[:size]
        self._position += len(data)
        self._recent = (self._recent + data)[-_LOOKBACK:]
        return data

    def _inflate_step(self) -> None:
        """Inflate ahead by a bounded step: small reads (a tar header) then cost a copy, not
        a pass over all the compressed input zlib holds back."""
        compressed = self._inflater.unconsumed_tail or self._handle.read(_GZIP_READ)
        piece = self._inflater.decompress(compressed, _INFLATE_STEP)
        if not compressed and not piece and not self._inflater.eof:
            raise BundleError("The 'file' is cut short: its gzip stream ends before its end marker.", field="file")
        self._inflated += piece
        if self._inflater.eof:
            self._check_gzip_end()

    def _check_gzip_end(self) -> None:
        """A second gzip member (or any byte) after the first is refused, not read past:
        :mod:`gzip` would inflate it, :mod:`tarfile`'s stream mode would not."""
        if not self._ended:
            self._ended = True
            if self._inflater.unused_data or self._handle.read(1):
                raise BundleError(
                    "The 'file' holds data after the end of its gzip stream (a second gzip "
                    "member, or trailing bytes); a .tar.gz must be a single gzip member, as "
                    "`tar -czf` writes it.",
                    field="file",
                )

    def _too_long(self) -> BundleError:
        return BundleError(
            f"The 'file' inflates to more than {self._limit} bytes of tar data (entries, "
            f"headers and padding); at most {self._limit} are allowed.",
            field="file",
        )


__all__ = ["CHUNK", "SingleGzipStream"]
