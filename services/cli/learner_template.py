"""The template ``nevis init learner NAME`` writes: the README's linear learner, its README and a
test that runs ``nevis check`` on it; with ``--image``, a Containerfile ``FROM`` the learner base
image that puts the learner in ``/opt/learner``.

``LEARNER`` is the README's example learner word for word (a test keeps them equal), read from
its one source file, ``templates/my_learner.py.txt`` (package data); the module name is put in
where the README says ``my_learner``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files

LEARNER = files("services.cli").joinpath("templates/my_learner.py.txt").read_text()
"""The example learner's one source: the template's ``<module>.py``, the example learner image's
``nevis_example_learner.py`` (docker/learner-example.Containerfile copies the file) and, word for
word, the README's "Writing a learner" (tests keep all three the same)."""

README = """# {name}

A learner for the NEVIS'22 evaluation service, made by `nevis init learner {name}`: a linear
classifier on pixels. Edit `{module}.py` (the protocol: `workers.learners.protocol.Learner`),
then:

```bash
nevis check . --entrypoint {module}:make      # each protocol call, on a tiny built-in stream
PYTHONPATH=. nevis run --stream mini --learner {module}:make --trials 1 --steps 20 --phase meta_train
nevis login https://your-service                # once; the token is read from a prompt
nevis submit . --entrypoint {module}:make --stream mini --trials 1 --steps 20
```

`nevis submit` checks the learner, packs this folder (caches, virtual environments and VCS
folders left out), uploads it and follows the run. `pytest` runs `test_{module}.py`, which runs
`nevis check` on it.
"""

TEST = """\"\"\"The learner passes `nevis check`: every protocol call works on a tiny built-in stream.\"\"\"

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_nevis_check_passes():
    nevis = shutil.which("nevis") or str(Path(sys.executable).parent / "nevis")
    done = subprocess.run([nevis, "check", str(HERE), "--entrypoint", "{module}:make"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
"""


CONTAINERFILE = """# The learner {name} as a container image for the NEVIS'22 service (`nevis init learner --image`).
# The image is files only: the service imports /opt/learner (and the site-packages your image
# adds for its Python) in its sandboxed learner hosts, with its own Python, torch and numpy;
# ENTRYPOINT, CMD, USER and ENV are ignored. Build, check, submit:
#   podman build -t localhost/{module}:1 .
#   nevis check --image localhost/{module}:1 --entrypoint {module}:make
#   nevis submit --image localhost/{module}:1 --entrypoint {module}:make --stream mini
# Extra pure-Python packages: `RUN pip install --target /opt/learner <package>` in a build stage.
ARG LEARNER_BASE={base}
FROM ${{LEARNER_BASE}}
COPY {module}.py /opt/learner/
"""
LEARNER_BASE = "localhost/nevis-learner-base"
"""The learner base image (docker/learner-base.Containerfile; the operator's registry may hold it)."""


def learner_base() -> str:
    """The learner base image of this installation's version."""
    try:
        return f"{LEARNER_BASE}:{version('nevis-service')}"
    except PackageNotFoundError:
        return f"{LEARNER_BASE}:latest"


def render(module: str, name: str, *, image: bool = False) -> dict[str, str]:
    """The files of a new learner folder, by file name (with ``image``, a Containerfile too)."""
    files = {
        f"{module}.py": LEARNER.replace("my_learner", module),
        "README.md": README.format(name=name, module=module),
        f"test_{module}.py": TEST.format(module=module),
    }
    if image:
        files["Containerfile"] = CONTAINERFILE.format(name=name, module=module, base=learner_base())
    return files


__all__ = ["CONTAINERFILE", "LEARNER", "LEARNER_BASE", "README", "TEST", "learner_base", "render"]
