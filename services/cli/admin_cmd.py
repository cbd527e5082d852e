"""``nevis users`` and ``nevis tokens``: the operator's user and token management.

They work on the database directly (``NEVIS_DATABASE_URL``), so the first admin can be
made before the API has any user. A token's secret is printed once, alone on stdout, so
``TOKEN=$(nevis tokens create --user alice)`` works. A token made here expires after
NEVIS_TOKEN_DEFAULT_DAYS unless ``--expires-in-days`` asks for another lifetime (at most a
year; none never expires) and counts against NEVIS_MAX_TOKENS_PER_USER like any other.
``nevis users quota NAME`` shows a user's quotas counted as the API counts them (the CLI has
no API client; users see theirs at ``GET /v1/users/me/quota``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import typer
from rich.console import Console
from rich.table import Table

from services.cli.coordinator_db import coordinator_sessions
from services.coordinator.common.config import get_coordinator_settings
from services.coordinator.common.security import TOKEN_MAX_DAYS

users_app = typer.Typer(no_args_is_help=True, help="Create, list, disable and enable API users; show their quotas.")
tokens_app = typer.Typer(no_args_is_help=True, help="Create, list and revoke API tokens.")


@users_app.command("create")
def create_user(
    name: str = typer.Argument(..., help="User name (letters, digits, '.', '_', '-')."),
    role: str = typer.Option("submitter", "--role", help="admin or submitter."),
    max_concurrent: int | None = typer.Option(None, "--max-concurrent", help="Quota: queued + running at once."),
    max_per_day: int | None = typer.Option(None, "--max-per-day", help="Quota: submissions per 24 h."),
) -> None:
    """Create a user."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import transaction  # noqa: PLC0415 - imported when the command runs (fast start)

    with transaction(coordinator_sessions()) as session:
        user = users.create_user(session, name=name, role=role, max_concurrent=max_concurrent, max_per_day=max_per_day)
        typer.echo(f"created user {user.name!r} (id {user.id}, role {user.role})")


@users_app.command("disable")
def disable_user(name: str = typer.Argument(..., help="The user to disable.")) -> None:
    """Revoke every token of a user at once and refuse it new ones until enabled."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import transaction  # noqa: PLC0415 - imported when the command runs (fast start)

    with transaction(coordinator_sessions()) as session:
        tokens = users.disable_user(session, user=users.get_user(session, name=name))
    typer.echo(f"disabled user {name!r} ({len(tokens)} token(s) revoked)")


@users_app.command("enable")
def enable_user(name: str = typer.Argument(..., help="The user to enable.")) -> None:
    """Let a disabled user get tokens again (its old tokens stay revoked)."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import transaction  # noqa: PLC0415 - imported when the command runs (fast start)

    with transaction(coordinator_sessions()) as session:
        users.enable_user(session, user=users.get_user(session, name=name))
    typer.echo(f"enabled user {name!r}; mint it a token with `nevis tokens create --user {name}`")


@users_app.command("list")
def list_users() -> None:
    """List users."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)

    with coordinator_sessions()() as session:
        table = Table("id", "name", "role", "max concurrent", "max per day")
        for user in users.list_users(session):
            table.add_row(
                str(user.id),
                user.name,
                user.role,
                str(user.max_concurrent or "default"),
                str(user.max_per_day or "default"),
            )
    Console().print(table)


@users_app.command("quota")
def show_quota(name: str = typer.Argument(..., help="The user whose quotas to show.")) -> None:
    """Show a user's quotas and use: concurrent, daily, and meta-test per learner and stream version."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.coordinator.crud.quotas import quota_report  # noqa: PLC0415 - imported when the command runs (fast start)

    with coordinator_sessions()() as session:
        report = quota_report(session, settings=get_coordinator_settings(), user=users.get_user(session, name=name))
    console = Console()
    console.print(
        f"{report.user}: {report.open_submissions} of {report.limits.concurrent} queued or running "
        f"at once; {report.daily.used} of {report.daily.limit} submissions in the last 24 hours"
        f"{_next(report.daily.next_allowed_at)}"
    )
    console.print(
        f"meta-test: at most {report.limits.meta_test} per learner and stream version in "
        f"{report.limits.meta_test_days:g} days (meta-train is not limited)"
    )
    table = Table("learner", "stream", "version", "used", "limit", "next allowed")
    for use in report.meta_test:
        table.add_row(
            f"{use.learner} ({use.learner_id})",
            use.stream,
            use.version,
            str(use.use.used),
            str(use.use.limit),
            _when(use.use.next_allowed_at) if use.use.limit else "never (quota 0)",
        )
    if report.meta_test:
        console.print(table)


def _when(moment: datetime | None) -> str:
    return "now" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def _next(moment: datetime | None) -> str:
    return "" if moment is None else f" (next at {_when(moment)})"


@tokens_app.command("create")
def create_token(
    user: str = typer.Option(..., "--user", help="Whose token."),
    label: str = typer.Option("cli", "--label", help="A note to tell tokens apart."),
    expires_in_days: int | None = typer.Option(
        None,
        "--expires-in-days",
        min=1,
        max=TOKEN_MAX_DAYS,
        help=f"Lifetime in days, 1-{TOKEN_MAX_DAYS}. Default: NEVIS_TOKEN_DEFAULT_DAYS (90).",
    ),
) -> None:
    """Create a token and print its secret (shown only this once)."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import transaction  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_coordinator_settings()
    lifetime = timedelta(days=expires_in_days or settings.token_default_days)
    with transaction(coordinator_sessions()) as session:
        owner = users.get_user(session, name=user)
        _, secret = users.create_token(
            session, user=owner, label=label, default_lifetime=lifetime, max_tokens=settings.max_tokens_per_user
        )
    typer.echo(secret)


@tokens_app.command("list")
def list_tokens(user: str = typer.Option(..., "--user", help="Whose tokens.")) -> None:
    """List a user's tokens (prefixes only)."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)

    with coordinator_sessions()() as session:
        owner = users.get_user(session, name=user)
        table = Table("id", "label", "prefix", "created", "expires", "revoked")
        for token in users.list_tokens(session, user=owner):
            table.add_row(
                str(token.id),
                token.label,
                token.token_prefix,
                f"{token.created_at:%Y-%m-%d %H:%M}",
                f"{token.expires_at:%Y-%m-%d}" if token.expires_at else "never",
                f"{token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "",
            )
    Console().print(table)


@tokens_app.command("revoke")
def revoke_token(
    token_id: int = typer.Argument(..., help="Token id (see `nevis tokens list`)."),
    user: str = typer.Option(..., "--user", help="Whose token."),
) -> None:
    """Revoke a token and every token minted from it (through the API), down the chain."""
    from services.coordinator.crud import users  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import transaction  # noqa: PLC0415 - imported when the command runs (fast start)

    with transaction(coordinator_sessions()) as session:
        owner = users.get_user(session, name=user)
        _, minted = users.revoke_token_tree(session, user=owner, token_id=token_id)
    typer.echo(f"revoked token {token_id} and {len(minted)} token(s) minted from it")


__all__ = [
    "create_token",
    "create_user",
    "disable_user",
    "enable_user",
    "list_tokens",
    "list_users",
    "revoke_token",
    "show_quota",
    "tokens_app",
    "users_app",
]
