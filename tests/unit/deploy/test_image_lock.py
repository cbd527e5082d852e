"""The images install docker/requirements.lock with --no-deps, so a runtime dependency that
pyproject.toml gains and the lock lacks is missing from every image (their test then fails
only after a long build): every runtime dependency must be pinned there."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_runtime_dependency_is_pinned_in_the_image_lock():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = {}
    for line in (ROOT / "docker" / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            lock[_name(name)] = version
    missing = [r for r in project["dependencies"] if _name(r) not in lock]
    assert missing == [], f"add these to docker/requirements.lock (see its header): {missing}"
    pinned = {_name(r): r.split("==", 1)[1] for r in project["dependencies"] if "==" in r}
    assert {n: lock[n] for n in pinned} == pinned
