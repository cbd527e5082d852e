"""Every code block of the learner guide (docs/learners.md) runs, as printed.

The guide's Python block is the README's example learner, word for word (test_readme_example.py
runs it over a tiny stream and checks its FLOPs); its shell blocks are run here in a fresh
folder holding that learner as ``my_learner.py``, with the real ``nevis`` command: the run
over ``mini``'s meta-train tasks succeeds and ``nevis results`` reads it back. A block in any
other language fails the test until it is given a runner here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "learners.md"
BIN = Path(sys.executable).parent


def _blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced code block of the guide."""
    return re.findall(r"^```(\w*)\n(.*?)^```", GUIDE.read_text(), flags=re.S | re.M)


def _readme_learner() -> str:
    """The README's example learner, extracted the way test_readme_example.py does it."""
    spec = importlib.util.spec_from_file_location(
        "_nevis_readme_example", Path(__file__).parent / "test_readme_example.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.readme_learner_source()


def test_every_guide_block_has_a_runner() -> None:
    blocks = _blocks()
    assert blocks, "the guide has no code block"
    learners = [text for lang, text in blocks if lang == "python"]
    assert learners == [_readme_learner()], "the guide's only Python block is the README's learner"
    others = {lang for lang, _ in blocks} - {"python", "bash"}
    assert not others, f"blocks in {others} have no runner in this test"
    assert any(lang == "bash" for lang, _ in blocks)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the guide's own set-up: SQLite
def test_guide_shell_blocks_run_as_printed(settings_env: Path, database_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "my-learner"
    folder.mkdir()
    (folder / "my_learner.py").write_text(_readme_learner())
    env = {
        **os.environ,
        "NEVIS_DATA_DIR": str(settings_env),
        "NEVIS_DATABASE_URL": database_url,
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }
    env.pop("RAY_ADDRESS", None)
    for lang, text in _blocks():
        if lang != "bash":
            continue
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", text], cwd=folder, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, f"{text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if "nevis results" in text:
            assert "status: succeeded" in done.stdout
            assert re.search(r"E \(meta_train, 3/3 tasks\) = \d", done.stdout), done.stdout[-2000:]
