"""Style kept by tools, not memory: ``ruff format --check`` and ``ruff check`` (pyproject's
[tool.ruff]) pass over the tree, and the check would catch a breach.

RUF100 is selected, so a suppression that nothing needs fails here too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"


def _ruff(*args: str, where: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if not RUFF.exists():
        pytest.fail(f"ruff is not installed beside {sys.executable}: run scripts/setup.sh")
    return subprocess.run([str(RUFF), *args], cwd=where, capture_output=True, text=True, timeout=300)


def test_the_tree_is_formatted() -> None:
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_passes_the_lint_rules() -> None:
    result = _ruff("check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rules_would_catch_a_breach(tmp_path: Path) -> None:
    """An unused import, a blind except and a dead suppression fail the check under the house config."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text(
        "import os\n\n\ndef f() -> int:\n    try:\n        return 1\n    except Exception:\n        return 2\n\n\n"
        "X = 1  # noqa: E731\n"
    )
    result = _ruff("check", "--output-format", "concise", "--no-cache", ".", where=tmp_path)
    assert result.returncode == 1
    for rule in ("F401", "BLE001", "RUF100"):
        assert rule in result.stdout, result.stdout


def test_the_formatter_would_catch_a_breach(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "ugly.py").write_text("x = {  'a':1 }\n")
    assert _ruff("format", "--check", "--no-cache", ".", where=tmp_path).returncode == 1
