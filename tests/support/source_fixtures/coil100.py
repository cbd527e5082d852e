"""Fixture for COIL-100: coil-100.zip of ``coil-100/obj<N>__<angle>.png`` plus the odd non-image."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_zip

# every view of two objects (the streams' rule lists angle bins across the circle), one of a third
VIEWS = tuple((obj, angle) for obj in (1, 100) for angle in range(0, 360, 5)) + ((2, 10),)


def write_coil100(data_dir: Path) -> list[tuple[int, int]]:
    """A few (object, angle) views, a Perl script and a Mac resource fork the reader skips."""
    members = {f"coil-100/obj{obj}__{angle}.png": encoded(i, "PNG", 4, 4) for i, (obj, angle) in enumerate(VIEWS)}
    members["coil-100/convertGroupppm2png.pl"] = b"#!/usr/bin/perl\n"
    members["__MACOSX/coil-100/._obj1__0.png"] = b"\0\5\26\7"
    write_zip(source_dir(data_dir, "coil100") / "coil-100.zip", members)
    return list(VIEWS)


__all__ = ["VIEWS", "write_coil100"]
