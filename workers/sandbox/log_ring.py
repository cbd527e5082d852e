"""A learner host's output, kept bounded: the last bytes it wrote, never more.

A learner's prints (the host sends its stdout to stderr, :mod:`workers.sandbox.host`) go
through a pipe that a reader thread drains into a :class:`LogRing`, so a learner that
floods output can neither block on a full pipe nor grow the harness's memory: the ring keeps
the last ``capacity`` bytes and counts the rest. Positions count every byte ever written, so
harness code marks where a trial began (:attr:`LogRing.position`) and takes what was written
since (:meth:`LogRing.since`), even from a host reused across trials.
"""

from __future__ import annotations

import os
import threading

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
                self._buffer[:] = data[-self.capacity:]
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
            kept = bytes(self._buffer[max(mark - start, 0):])
            dropped = max(start - mark, 0)
        if dropped:
            return f"[... {dropped} earlier bytes dropped: the log keeps the last {self.capacity} ...]\n".encode() + kept
        return kept


def drain(fd: int, ring: LogRing) -> threading.Thread:
    """Start a daemon thread that copies ``fd`` into ``ring`` until end of file, then closes it."""

    def pump() -> None:
        try:
            while chunk := os.read(fd, CHUNK_BYTES):
                ring.write(chunk)
        except OSError:
            pass
        finally:
            os.close(fd)

    thread = threading.Thread(target=pump, name="nevis-host-log", daemon=True)
    thread.start()
    return thread


__all__ = ["CHUNK_BYTES", "LogRing", "drain"]
