"""``nevis doctor``: a table of what this machine gives the service, and the one line ``nevis serve`` prints.

Why: a missing piece (bubblewrap, a database, cgroups) otherwise shows up as a failure far
from its cause. Each row names what the missing piece costs and the command or setting that
fixes it. Under ``NEVIS_ENVIRONMENT=production`` a missing production requirement exits 1.
"""

from __future__ import annotations

import os

import typer
from rich.console import Console
from rich.table import Table

from services.cli.doctor_checks import Check, run_checks
from services.coordinator.common.config import CoordinatorSettings
from services.core.config import Settings, get_settings, load_settings
from services.core.errors import ConfigError


def check_settings() -> Check:
    """Whether the coordinator's settings load (production refuses unsafe defaults)."""
    try:
        load_settings(CoordinatorSettings)
    except ConfigError as exc:
        return Check(
            "settings",
            False,
            str(exc),
            "`nevis serve` refuses to start",
            "set what the message under found names",
            True,
        )
    return Check("settings", True, "valid")


def environment() -> str:
    """``NEVIS_ENVIRONMENT`` as the coordinator reads it (``development`` unless set)."""
    return os.environ.get("NEVIS_ENVIRONMENT", "development").strip() or "development"


def failing_requirements(checks: list[Check], env: str) -> list[Check]:
    """The rows that stop this machine from serving in ``env`` (none outside production)."""
    if env != "production":
        return []
    return [check for check in checks if not check.ok and check.required_in_production]


def summary_line(checks: list[Check]) -> str:
    """All rows in one line, for the start of ``nevis serve``."""
    parts = [f"{check.piece} {'ok' if check.ok else 'missing'}" for check in checks]
    return f"this machine: {', '.join(parts)} (`nevis doctor` says what each missing piece costs)"


def machine_summary(settings: Settings, env: str) -> str:
    """The probes' one-line summary (``nevis serve`` prints it as it starts)."""
    return summary_line(run_checks(settings, env))


def render(checks: list[Check], env: str) -> Table:
    """The table: piece, state, what was found, and what a missing piece costs."""
    table = Table(title=f"nevis doctor (NEVIS_ENVIRONMENT={env})", expand=False)
    for column in ("piece", "state", "found", "without it"):
        table.add_column(column, overflow="fold")
    for check in checks:
        state = (
            "ok"
            if check.ok
            else ("MISSING (required)" if check.required_in_production and env == "production" else "missing")
        )
        style = "green" if check.ok else "red"
        table.add_row(check.piece, f"[{style}]{state}[/]", check.found, check.cost)
    return table


def fix_lines(checks: list[Check]) -> list[str]:
    """One line per missing piece with its fix, unwrapped so that it can be copied whole."""
    return [f"{check.piece}: {check.fix}" for check in checks if not check.ok and check.fix]


def doctor() -> None:
    """Print what this machine gives the service; exit 1 where production needs a missing piece."""
    env = environment()
    checks = [check_settings(), *run_checks(get_settings(), env)]
    console = Console(width=max(Console().width, 160))
    console.print(render(checks, env))
    fixes = fix_lines(checks)
    if fixes:
        typer.echo("To fix:")
        for line in fixes:
            typer.echo(f"  {line}")
    failing = failing_requirements(checks, env)
    if failing:
        names = ", ".join(check.piece for check in failing)
        typer.echo(f"NEVIS_ENVIRONMENT=production needs what is missing here: {names}", err=True)
        raise typer.Exit(1)


__all__ = [
    "check_settings",
    "doctor",
    "environment",
    "failing_requirements",
    "fix_lines",
    "machine_summary",
    "render",
    "summary_line",
]
