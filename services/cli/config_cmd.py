"""``nevis config``: show what this process would use."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings


def show_config(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Print the effective settings, with passwords masked."""
    values = get_settings().masked()
    if as_json:
        typer.echo(json.dumps(values, indent=2))
        return
    table = Table("variable", "value", title="Effective settings")
    for name, value in values.items():
        table.add_row(name, "(unset)" if value is None else value)
    make_console().print(table)


__all__ = ["show_config"]
