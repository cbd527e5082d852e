"""``nevis serve`` (the coordinator), ``nevis openapi`` and ``nevis worker run-task``."""

from __future__ import annotations

import gc
import logging
import sys
from pathlib import Path
from typing import Any

import typer

from services.coordinator.common.config import get_coordinator_settings
from services.core.credentials import load_secrets_path
from services.core.errors import ConfigError

worker_app = typer.Typer(no_args_is_help=True, help="Worker harness commands (run by backends).")


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", help="Port to listen on."),
    scheduler: bool = typer.Option(True, "--scheduler/--no-scheduler", help="Run the scheduler in this process."),
    migrate: bool = typer.Option(
        None,
        "--migrate/--no-migrate",
        show_default=False,
        help="Upgrade the schema first (default: in development only).",
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        max=64,
        help="Server processes sharing the port (reads scale with them); more "
        "than 1 needs --no-scheduler: run the scheduler in a process of its own.",
    ),
) -> None:
    """Start the coordinator API (and its scheduler) on HOST:PORT.

    ``--workers N`` starts N uvicorn worker processes on the one port, for read-heavy
    deployments (the leaderboard and the dashboard): each has its own answer cache, request
    metrics and write-rate counts, as replicas behind a balancer would. None of them runs the
    scheduler; a deployment runs it in one more ``nevis serve`` (``--workers 1``, its own port)
    or replica.
    """
    import uvicorn  # noqa: PLC0415 - imported when the command runs (fast start)

    from services.cli.doctor_cmd import machine_summary  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.dashboard.server import create_server_app  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import ensure_current, upgrade  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db.engine import ensure_sqlite_parent  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_coordinator_settings()
    if not 0 < port < 65536:
        raise ConfigError(f"The '--port' must be an int in [1, 65535]. Got {port} instead.")
    if workers > 1 and scheduler:
        raise ConfigError(
            f"'--workers {workers}' needs '--no-scheduler': the worker processes serve the API "
            "only; run the scheduler in a `nevis serve --workers 1` process (or replica) of its own."
        )
    if migrate is None:
        migrate = settings.environment == "development"
    if migrate:
        ensure_sqlite_parent(settings.database_url)
        upgrade(settings.database_url)
    ensure_current(settings.database_url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    typer.echo(machine_summary(settings, settings.environment), err=True)
    typer.echo(
        f"nevis coordinator on http://{host}:{port} (backend {settings.backend}, "
        f"scheduler {'on' if scheduler else 'off'}, {workers} worker process{'es' if workers > 1 else ''})",
        err=True,
    )
    if workers > 1:  # each worker process builds its app from the same environment
        uvicorn.run(
            f"{__name__}:worker_server_app", factory=True, workers=workers, host=host, port=port, log_level=log_level
        )
        return
    app = create_server_app(settings, run_scheduler=scheduler, warm_up=True)
    gc.collect()
    gc.freeze()  # the long-lived startup objects leave the collector's scans: shorter pauses
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def worker_server_app() -> Any:
    """The app of one ``nevis serve --workers N`` process: the server without a scheduler."""
    from services.dashboard.server import create_server_app  # noqa: PLC0415 - imported when the command runs (fast start)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_server_app(get_coordinator_settings(), run_scheduler=False, warm_up=True)
    gc.collect()
    gc.freeze()
    return app


def openapi(
    output: Path = typer.Option(
        Path("api_schema/openapi.json"), "--output", "-o", help="Where to write the document ('-' for stdout)."
    ),
    check: bool = typer.Option(False, "--check", help="Exit 1 if the file differs from the app."),
) -> None:
    """Write the coordinator's OpenAPI document (or check the checked-in one)."""
    from services.coordinator.openapi import openapi_document, render  # noqa: PLC0415 - imported when the command runs (fast start)

    text = render(openapi_document())
    if str(output) == "-":
        typer.echo(text, nl=False)
        return
    if check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            typer.echo(f"{output} is out of date: run `nevis openapi`.", err=True)
            raise typer.Exit(1)
        typer.echo(f"{output} matches the app.")
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {output}")


@worker_app.command("run-task")
def run_task(
    submission: int = typer.Option(..., "--submission", help="Submission id."),
    lease: int = typer.Option(..., "--lease", help="Lease id the scheduler gave this launch."),
) -> None:
    """Run the one task a lease names, then end the lease (used by every backend)."""
    from services.coordinator.worker import run_task as run  # noqa: PLC0415 - imported when the command runs (fast start)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    load_secrets_path()  # remote backends send where the credentials are, not the credentials
    sys.exit(run(get_coordinator_settings(), submission_id=submission, lease_id=lease))


__all__ = ["openapi", "run_task", "serve", "worker_app", "worker_server_app"]
