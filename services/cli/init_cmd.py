"""``nevis init learner NAME``: a new learner folder, ready to edit, check and submit.

It holds the README's linear learner as ``<module>.py`` (``NAME`` made a Python identifier),
a README saying what to do next, and a test that runs ``nevis check`` on the folder
(:mod:`services.cli.learner_template`); ``--image`` adds a Containerfile ``FROM`` the learner
base image, for a learner submitted as a container image. An existing folder is never written into.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from services.cli.console import make_console
from services.cli.learner_template import render
from services.core.errors import ConfigError

app = typer.Typer(no_args_is_help=True)
console = make_console()


def module_name(name: str) -> str:
    """A Python module name for a learner called ``name`` (``my-learner`` → ``my_learner``)."""
    module = re.sub(r"\W", "_", Path(name).name.lower()).strip("_")
    if not module or module[0].isdigit():
        module = f"learner_{module}".rstrip("_")
    return module


@app.command("learner")
def learner(
    name: str = typer.Argument(..., help="Folder to create (its last part names the learner's module)."),
    image: bool = typer.Option(
        False, "--image", help="Also write a Containerfile FROM the learner base image (/opt/learner)."
    ),
) -> None:
    """Write a learner folder: the README's linear learner, a README and a test that runs `nevis check`."""
    folder = Path(name)
    if folder.exists():
        raise ConfigError(f"{folder} exists already; `nevis init learner` only makes a new folder.")
    module = module_name(name)
    folder.mkdir(parents=True)
    for file, text in render(module, folder.name, image=image).items():
        (folder / file).write_text(text)
    if image:
        tag = f"localhost/{module}:1"
        console.print(
            f"Wrote {folder}/: {module}.py (a linear learner), Containerfile, README.md, test_{module}.py.\n"
            f"Next: `podman build -t {tag} {folder}`, `nevis check --image {tag} --entrypoint {module}:make`, "
            f"then `nevis submit --image {tag} --entrypoint {module}:make --stream mini`."
        )
        return
    console.print(
        f"Wrote {folder}/: {module}.py (a linear learner), README.md, test_{module}.py.\n"
        f"Next: `nevis check {folder} --entrypoint {module}:make`, then "
        f"`nevis submit {folder} --entrypoint {module}:make --stream mini`."
    )


__all__ = ["app", "learner", "module_name"]
