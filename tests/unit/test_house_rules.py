"""The house's shape, kept by a test rather than by memory: files with one job stay small, and
no two modules share a name a reader would confuse (which ``errors``? which ``registry``?).

Migrations are exempt from the size rule: each is one revision, written once and never split.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "workers")
MAX_LINES = 400
UNIQUE_NAMES = ("errors.py", "metrics.py", "registry.py", "core")
"""Names that once meant three different things; each may now exist once in the source tree."""


def _sources() -> list[Path]:
    files = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    return [p for p in files if "migrations" not in p.relative_to(ROOT).parts and "__pycache__" not in p.parts]


def test_no_source_file_is_over_the_line_limit() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines (split by concern): {long}"


@pytest.mark.parametrize("name", UNIQUE_NAMES)
def test_a_confusable_module_name_exists_at_most_once(name: str) -> None:
    paths = [
        p
        for package in PACKAGES
        for p in (ROOT / package).rglob(name)
        if "__pycache__" not in p.parts and (p.is_dir() or p.suffix == ".py")
    ]
    assert len(paths) <= 1, f"{name} appears {len(paths)} times: {[str(p.relative_to(ROOT)) for p in paths]}"


def test_the_rules_see_the_tree() -> None:
    """A rule over no files proves nothing: the walk finds the packages' modules."""
    names = Counter(p.name for p in _sources())
    assert names["__init__.py"] > 10 and len(_sources()) > 150
