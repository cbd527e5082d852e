"""scripts/missing_pieces.sh (the end of scripts/setup.sh): one line per missing system piece.

Run with a PATH that holds nothing, it names bubblewrap, Chromium and podman with the exact
apt-get command for each; with this machine's PATH, exactly the pieces this machine lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINES = {
    "bwrap": "Missing: bubblewrap (learner code runs without a sandbox; the sandbox tests fail). "
    "Install it with: sudo apt-get install bubblewrap",
    "chromium": "Missing: chromium and chromedriver (the dashboard's browser tests fail). "
    "Install it with: sudo apt-get install chromium chromium-driver",
    "podman": "Missing: podman, runc and debootstrap (the container image tests (-m images) fail). "
    "Install it with: sudo apt-get install podman runc debootstrap",
}
NEEDS = {"bwrap": ("bwrap",), "chromium": ("chromium", "chromedriver"), "podman": ("podman", "runc", "debootstrap")}


def _report(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(REPO / "scripts" / "missing_pieces.sh")],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_with_nothing_on_path_each_piece_gets_its_line_and_command(tmp_path) -> None:
    result = _report(str(tmp_path))
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    for line in LINES.values():
        assert line in lines, result.stderr


def test_on_this_machine_it_names_exactly_what_is_missing() -> None:
    result = _report(os.environ["PATH"])
    assert result.returncode == 0
    for piece, binaries in NEEDS.items():
        absent = any(shutil.which(binary) is None for binary in binaries)
        assert (LINES[piece] in result.stderr) == absent, (piece, result.stderr)
