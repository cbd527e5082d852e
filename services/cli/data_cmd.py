"""``nevis data``: placeholder, filled in by its own module."""

import typer

app = typer.Typer(no_args_is_help=True)
