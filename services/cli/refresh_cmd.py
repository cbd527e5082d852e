"""``nevis refresh``: benchmark refreshes from the command line (and the chart's CronJob).

``nevis refresh run`` first settles running refreshes whose runs have ended (their
leaderboard snapshots), then refreshes each pending stream: the ones given with ``--stream``,
else those ``NEVIS_REFRESH_STREAMS`` names, else every stream that has run here. It works on
the database directly (``NEVIS_DATABASE_URL``) and is idempotent, so a CronJob may run it as
often as it likes next to coordinators that refresh on their own schedule; the scheduler
launches the runs it queues. It exits 1 when a stream could not be refreshed.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from services.cli.coordinator_db import coordinator_sessions
from services.coordinator.common.config import get_coordinator_settings

app = typer.Typer(no_args_is_help=True, help="Re-run baselines and pinned submissions on new stream versions.")


@app.command("run")
def run(
    stream: list[str] | None = typer.Option(
        None, "--stream", "-s", help="Refresh this stream (repeatable); default: every refreshable one."
    ),
) -> None:
    """Settle finished refreshes, then refresh every stream whose current version has none."""
    from services.coordinator.refresh.snapshot import settle_refreshes  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.coordinator.refresh.start import run_refreshes  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db import transaction  # noqa: PLC0415 - imported when the command runs (fast start)

    sessions = coordinator_sessions()
    with transaction(sessions) as session:
        for refresh_id in settle_refreshes(session):
            typer.echo(f"refresh {refresh_id} finished: its leaderboard snapshot is kept")
    report = run_refreshes(
        sessions, settings=get_coordinator_settings(), trigger="cli", streams=list(stream) if stream else None
    )
    for outcome in report.outcomes:
        typer.echo(
            f"refresh {outcome.refresh.id} of {outcome.stream} {outcome.version}: queued "
            f"{len(outcome.queued)} submission(s) {list(outcome.queued)}"
        )
    for name, error in report.errors.items():
        typer.echo(f"stream {name!r} was not refreshed: {error}", err=True)
    if not report.outcomes and not report.errors:
        typer.echo("nothing to refresh: every stream's current version has its refresh")
    if report.errors:
        raise typer.Exit(1)


@app.command("list")
def list_command(
    stream: str | None = typer.Option(None, "--stream", "-s", help="Only this stream's."),
    limit: int = typer.Option(20, "--limit", min=1, max=1000, help="Newest first, this many."),
) -> None:
    """List refreshes, newest first."""
    from services.coordinator.refresh.start import list_refreshes, run_statuses  # noqa: PLC0415 - imported when the command runs (fast start)

    with coordinator_sessions()() as session:
        rows, total = list_refreshes(session, limit=limit, offset=0, stream=stream)
        table = Table(
            "id", "stream", "version", "trigger", "status", "runs", "started", "finished", title=f"{total} refresh(es)"
        )
        for r in rows:
            statuses = run_statuses(session, refresh=r)
            done = sum(s not in ("queued", "running") for s in statuses.values())
            table.add_row(
                str(r.id),
                r.stream_version.name,
                r.stream_version.version,
                r.trigger,
                r.status,
                f"{done}/{len(statuses)} ended",
                r.started_at.isoformat(timespec="seconds"),
                r.finished_at.isoformat(timespec="seconds") if r.finished_at else "–",
            )
    Console().print(table)


__all__ = ["app", "list_command", "run"]
