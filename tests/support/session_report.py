"""End-of-run lines about the machine: the private PostgreSQL, and tests a missing piece stopped.

Why: on a machine without bubblewrap, Chromium or podman, the tests that need them fail (they
are never skipped, so CI cannot pass without them), but a wall of tracebacks hides the one
command that fixes it all. Such a failure keeps its one-line reason here, and the run ends with
one line per missing piece naming its tests and the command that enables them.
``tests/conftest.py`` imports these hooks.
"""

from __future__ import annotations

import shutil
from collections.abc import Generator
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Piece:
    """A system package some tests need, how to tell it is missing, and how to install it."""

    name: str
    binaries: tuple[str, ...]
    keywords: tuple[str, ...]
    command: str

    def missing(self) -> bool:
        """Whether any of its binaries is absent from PATH."""
        return any(shutil.which(binary) is None for binary in self.binaries)


PIECES = (
    Piece("bubblewrap", ("bwrap",), ("bubblewrap", "bwrap"), "sudo apt-get install bubblewrap"),
    Piece(
        "chromium",
        ("chromium", "chromedriver"),
        ("chromium", "chromedriver"),
        "sudo apt-get install chromium chromium-driver",
    ),
    Piece(
        "podman",
        ("podman", "runc", "debootstrap"),
        ("podman", "runc", "debootstrap"),
        "sudo apt-get install podman runc debootstrap",
    ),
)
_BLOCKED = pytest.StashKey[dict[str, list[str]]]()
PRIVATE_POSTGRES = pytest.StashKey[str]()
"""The fixture's line about the private server it started (tests/conftest.py sets it)."""


def blocking_piece(failure_text: str) -> Piece | None:
    """The missing piece a failure's text names, if a piece it names is missing on this machine."""
    text = failure_text.lower()
    for piece in PIECES:
        if piece.missing() and any(word in text for word in piece.keywords):
            return piece
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """Note a failure a missing piece caused, and keep only its last line (not the traceback)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.excinfo is None:
        return
    piece = blocking_piece(str(report.longrepr))
    if piece is None:
        return
    item.config.stash.setdefault(_BLOCKED, {}).setdefault(piece.name, []).append(item.nodeid)
    report.longrepr = f"{call.excinfo.exconly().splitlines()[0]} ({piece.name} is missing: {piece.command})"


def summary_lines(blocked: dict[str, list[str]]) -> list[str]:
    """One line per missing piece: how many tests it stopped, a few of their names, the fix."""
    lines = []
    for piece in PIECES:
        tests = blocked.get(piece.name, [])
        if tests:
            names = ", ".join(nodeid.rsplit("::", 1)[-1] for nodeid in tests[:3])
            more = f" and {len(tests) - 3} more" if len(tests) > 3 else ""
            lines.append(
                f"{len(tests)} test(s) could not run: {piece.name} is missing ({names}{more}); "
                f"enable them with: {piece.command}"
            )
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Runs after the session's fixtures are torn down, so the private server is gone by now."""
    config = terminalreporter.config
    lines = summary_lines(config.stash.get(_BLOCKED, {}))
    if PRIVATE_POSTGRES in config.stash:
        lines.insert(0, config.stash[PRIVATE_POSTGRES])
    if lines:
        terminalreporter.section("this machine", sep="-")
        for line in lines:
            terminalreporter.write_line(line)


__all__ = [
    "PIECES",
    "PRIVATE_POSTGRES",
    "Piece",
    "blocking_piece",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
    "summary_lines",
]
