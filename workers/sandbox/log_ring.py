"""A learner host's output, kept bounded: the last bytes it wrote, never more.

A learner's prints (the host sends its stdout to stderr, :mod:`workers.sandbox.host`) go
through a pipe that a reader thread drains into a :class:`LogRing`, so a learner that
floods output can neither block on a full pipe nor grow the harness's memory: the ring keeps
the last ``capacity`` bytes and counts the rest. Positions count every byte ever written, so
harness code marks where a trial began (:attr:`LogRing.position`) and takes what was written
since (:meth:`LogRing.since`), even from a host reused across trials.
"""

from __future__ import annotations

import fcntl
import os
import struct
import termios
import threading
import time

CHUNK_BYTES = 64 * 1024


class LogRing:
    """The last ``capacity`` bytes written to it, safe to write from one thread and read from others."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a log ring holds at least 1 byte; got {capacity}")
        self.capacity = capacity
        self._buffer = bytearray()
        self._written = 0
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        """How many bytes were ever written (a mark for :meth:`since`)."""
        with self._lock:
            return self._written

    def write(self, data: bytes) -> None:
        """Append ``data``, dropping the oldest bytes beyond the capacity."""
        with self._lock:
            self._written += len(data)
            if len(data) >= self.capacity:
                self._buffer[:] = data[-self.capacity :]
                return
            self._buffer += data
            excess = len(self._buffer) - self.capacity
            if excess > 0:
                del self._buffer[:excess]

    def since(self, mark: int = 0) -> bytes:
        """What was written after position ``mark``, as much of it as the ring still holds;
        a first line says how many bytes were dropped when some were."""
        with self._lock:
            start = self._written - len(self._buffer)
            kept = bytes(self._buffer[max(mark - start, 0) :])
            dropped = max(start - mark, 0)
        if dropped:
            return (
                f"[... {dropped} earlier bytes dropped: the log keeps the last {self.capacity} ...]\n".encode() + kept
            )
        return kept


class Drain:
    """A daemon thread that copies a pipe into a ring until end of file, then closes the pipe."""

    def __init__(self, fd: int, ring: LogRing) -> None:
        self.fd, self.ring = fd, ring
        self._reading = False  # a chunk read from the pipe and not yet in the ring
        self._closed = False
        self.thread = threading.Thread(target=self._pump, name="nevis-host-log", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            while chunk := os.read(self.fd, CHUNK_BYTES):
                self._reading = True
                self.ring.write(chunk)
                self._reading = False
        except OSError:
            pass
        finally:
            self._closed = True
            os.close(self.fd)

    def settle(self, timeout_s: float = 1.0) -> None:
        """Wait (briefly) until what was written to the pipe so far is in the ring: the
        learner's last prints before a reply, which the reply can overtake."""
        deadline = time.monotonic() + timeout_s
        quiet = 0
        while quiet < 2 and not self._closed and time.monotonic() < deadline:
            try:
                pending = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            except OSError:
                return
            quiet = quiet + 1 if pending == 0 and not self._reading else 0
            time.sleep(0.002)

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout=timeout_s)


def drain(fd: int, ring: LogRing) -> Drain:
    """Start copying ``fd`` into ``ring`` (see :class:`Drain`)."""
    return Drain(fd, ring)


__all__ = ["CHUNK_BYTES", "Drain", "LogRing", "drain"]
