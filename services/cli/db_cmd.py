"""``nevis db``: create, inspect and migrate the database schema.

Every command works on ``NEVIS_DATABASE_URL`` (see ``nevis config``); the folder of a
SQLite file is created when the schema is first created. URLs are printed with the password
masked.
"""

from __future__ import annotations

import typer

from services.core.config import get_settings, mask_url
from services.store.db import migrate
from services.store.db.engine import ensure_sqlite_parent

app = typer.Typer(no_args_is_help=True, help="Database schema management.")


def _describe(revision: str | None) -> str:
    return revision or "none (no schema)"


@app.command("upgrade")
def upgrade_command(revision: str = typer.Argument("head", help="Target revision; default the newest.")) -> None:
    """Create the schema, or migrate it forward to REVISION (default: head)."""
    url = get_settings().database_url
    ensure_sqlite_parent(url)
    before = migrate.current_revision(url)
    migrate.upgrade(url, revision)
    after = migrate.current_revision(url)
    if before == after:
        typer.echo(f"{mask_url(url)}: already at revision {_describe(after)}; nothing to do.")
    else:
        typer.echo(f"{mask_url(url)}: upgraded from {_describe(before)} to {_describe(after)}.")


@app.command("current")
def current_command(
    check: bool = typer.Option(False, "--check", help="Exit with an error unless the schema is at head."),
) -> None:
    """Print the database's schema revision and the one this code expects."""
    url = get_settings().database_url
    if check:
        migrate.ensure_current(url)
    current = migrate.current_revision(url)
    head = migrate.head_revision()
    state = "up to date" if current == head else "run `nevis db upgrade`"
    typer.echo(f"{mask_url(url)}: revision {_describe(current)}; code expects {head} ({state}).")


@app.command("downgrade")
def downgrade_command(revision: str = typer.Argument(..., help="Target revision, e.g. 0001, -1, or base.")) -> None:
    """Migrate the schema back to REVISION; ``base`` drops every table (data is lost)."""
    url = get_settings().database_url
    before = migrate.current_revision(url)
    if before is None:
        typer.echo(f"{mask_url(url)}: no schema; nothing to downgrade.")
        return
    migrate.downgrade(url, revision)
    after = migrate.current_revision(url)
    typer.echo(f"{mask_url(url)}: downgraded from {_describe(before)} to {_describe(after)}.")


@app.command("revision")
def revision_command(
    message: str = typer.Argument(..., help="What the migration does, e.g. 'add probe jobs'."),
    empty: bool = typer.Option(False, "--empty", help="Write an empty migration instead of comparing with the models."),
) -> None:
    """For developers: write the next migration file from the difference with the models."""
    path = migrate.new_revision(message, autogenerate=not empty)
    typer.echo(f"Wrote {path}; review it before committing.")


__all__ = ["app", "current_command", "downgrade_command", "revision_command", "upgrade_command"]
