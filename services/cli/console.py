"""The CLI's console: when output is not a terminal (piped, logged), wide enough that
tables are not cut, unless ``COLUMNS`` says otherwise."""

from __future__ import annotations

import os

from rich.console import Console

PIPED_WIDTH = 160


def make_console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=PIPED_WIDTH)
    return console


__all__ = ["PIPED_WIDTH", "make_console"]
