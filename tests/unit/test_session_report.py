"""The end-of-run line that names tests a missing system piece stopped, and its fix.

A small test file runs under pytest with this plugin and a PATH that lacks bubblewrap: the
test that needs it still FAILS (nothing is skipped), with its one-line reason and no
traceback, and the run ends with one line naming it and ``apt-get install bubblewrap``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.session_report import blocking_piece, summary_lines

REPO = Path(__file__).resolve().parents[2]
NEEDS_BWRAP = """
import shutil

def test_needs_bwrap():
    assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"

def test_unrelated_failure():
    assert 1 == 2, "an ordinary bug"

def test_fine():
    pass
"""


def test_a_run_without_bubblewrap_ends_with_one_line_naming_its_tests_and_the_command(tmp_path) -> None:
    (tmp_path / "test_needs.py").write_text(NEEDS_BWRAP)
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {**os.environ, "PATH": str(empty_bin), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.support.session_report",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_needs.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "2 failed, 1 passed" in out
    assert (
        "1 test(s) could not run: bubblewrap is missing (test_needs_bwrap); "
        "enable them with: sudo apt-get install bubblewrap"
    ) in out
    assert "bubblewrap is missing: sudo apt-get install bubblewrap" in out  # the failure's one line
    assert 'assert shutil.which("bwrap")' not in out  # no traceback for it
    assert "assert 1 == 2" in out  # an ordinary failure keeps its traceback


def test_a_failure_is_blamed_on_a_piece_only_when_that_piece_is_missing(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert blocking_piece("AssertionError: chromium and chromium-driver are absent").name == "chromium"
    assert blocking_piece("AssertionError: 1 == 2") is None
    bwrap = tmp_path / "bwrap"
    bwrap.write_text("#!/bin/sh\nexit 1\n")
    bwrap.chmod(0o755)
    assert blocking_piece("bwrap: setting up uid map: Permission denied") is None  # installed: a real failure


def test_the_summary_names_a_few_tests_and_counts_the_rest() -> None:
    tests = [f"tests/x.py::test_{i}" for i in range(5)]
    [line] = summary_lines({"podman": tests})
    assert line == (
        "5 test(s) could not run: podman is missing (test_0, test_1, test_2 and 2 more); "
        "enable them with: sudo apt-get install podman runc debootstrap"
    )
    assert summary_lines({}) == []
