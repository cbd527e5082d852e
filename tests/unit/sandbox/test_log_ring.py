"""The learner host's log ring: bounded, the last bytes kept, sliced by position, and a
flooding writer never blocked (the drain keeps reading whatever the ring holds)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from workers.sandbox.log_ring import LogRing, drain


def test_the_ring_keeps_the_last_bytes_and_says_how_many_it_dropped() -> None:
    ring = LogRing(10)
    ring.write(b"0123456789")
    ring.write(b"abcd")
    assert ring.position == 14
    assert ring.since(10) == b"abcd"
    text = ring.since(0)
    assert text.endswith(b"456789abcd") and b"4 earlier bytes dropped" in text
    ring.write(b"X" * 25)  # one write larger than the ring
    assert ring.since(ring.position - 10) == b"X" * 10
    assert ring.since(ring.position) == b""


def test_a_ring_of_no_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 byte"):
        LogRing(0)


def test_a_flood_through_the_drain_neither_blocks_nor_grows() -> None:
    ring = LogRing(1024)
    read_end, write_end = os.pipe()
    pump = drain(read_end, ring)
    total = 20 * 1024 * 1024  # far more than a pipe buffers: a writer would block without the drain
    chunk = b"y" * 65536

    def flood() -> None:
        for _ in range(total // len(chunk)):
            os.write(write_end, chunk)
        os.write(write_end, b"the end")
        os.close(write_end)

    writer = threading.Thread(target=flood, daemon=True)
    started = time.monotonic()
    writer.start()
    writer.join(timeout=30)
    pump.join(30)
    assert not writer.is_alive() and not pump.thread.is_alive(), "the flood blocked"
    assert time.monotonic() - started < 30
    assert ring.position == total + len(b"the end")
    assert len(ring.since(ring.position - 1024)) == 1024 and ring.since(0).endswith(b"the end")


def test_settle_waits_for_what_the_pipe_holds() -> None:
    ring = LogRing(1 << 20)
    read_end, write_end = os.pipe()
    pump = drain(read_end, ring)
    os.write(write_end, b"last words\n")
    pump.settle()
    assert ring.since(0) == b"last words\n"
    os.close(write_end)
    pump.join(5)
    pump.settle()  # a closed drain settles at once
    assert not pump.thread.is_alive()
