"""The example learner has one source (services/cli/templates/my_learner.py.txt): `nevis init
learner` writes it, the example learner image copies it, and the README prints it word for word."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from services.cli.learner_template import LEARNER, render

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "services" / "cli" / "templates" / "my_learner.py.txt"


def test_the_template_reads_the_one_source_and_names_the_module() -> None:
    assert SOURCE.read_text() == LEARNER
    written = render("my_linear", "my-linear")["my_linear.py"]
    assert written == LEARNER.replace("my_learner", "my_linear") and "my_learner" not in written


def test_the_example_image_copies_the_one_source() -> None:
    containerfile = (ROOT / "docker" / "learner-example.Containerfile").read_text()
    copies = re.findall(r"^COPY (?:--\S+ )*(\S+) (\S+)$", containerfile, flags=re.M)
    # The build context holds the repository's sources under src/ (docker/build.sh).
    assert copies == [("src/services/cli/templates/my_learner.py.txt", "/opt/learner/nevis_example_learner.py")]
    assert not (ROOT / "docker" / "learner-example").exists(), "a second copy of the example learner"


def test_the_readme_prints_the_one_source_word_for_word() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert [b for b in blocks if "def make()" in b] == [LEARNER]


def test_the_source_ships_with_the_package() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "templates/*" in package_data["services.cli"]
