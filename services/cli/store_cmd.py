"""``nevis store gc``: remove the object store's objects that no database row references.

Works on ``NEVIS_STORE_URL`` and ``NEVIS_DATABASE_URL`` (see ``nevis config``); what counts
as referenced, and why young objects are kept, is in :mod:`services.store.garbage`.
"""

from __future__ import annotations

import typer
from rich import box
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings
from services.store.garbage import DEFAULT_MIN_AGE_S, GarbageReport

app = typer.Typer(no_args_is_help=True, help="Object-store maintenance.")


@app.command("gc")
def gc_command(
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would be removed; remove nothing."),
    min_age_s: float = typer.Option(
        DEFAULT_MIN_AGE_S,
        "--min-age-s",
        min=0,
        help="Keep unreferenced objects younger than this many seconds: their rows may not be committed yet.",
    ),
) -> None:
    """Remove objects under the service's prefixes that no database row references."""
    from services.store.db import ensure_current, make_engine, session_factory  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.garbage import collect_garbage  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.objects import store_from_settings  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    ensure_current(settings.database_url)
    store = store_from_settings(settings)
    engine = make_engine(settings.database_url)
    try:
        report = collect_garbage(store, session_factory(engine), min_age_s=min_age_s, dry_run=dry_run)
    finally:
        engine.dispose()
    show_report(report, store_url=store.url)


def show_report(report: GarbageReport, *, store_url: str) -> None:
    """One row per collected prefix, a total, and the local store's freed blobs."""
    console = make_console()
    verb = "to remove" if report.dry_run else "removed"
    table = Table(
        "prefix",
        "objects",
        "size",
        f"orphans {verb}",
        "orphan size",
        "young orphans kept",
        title=f"Garbage in {store_url}{' (dry run)' if report.dry_run else ''}",
        box=box.SIMPLE_HEAD,
    )
    for p in report.prefixes:
        table.add_row(p.prefix, str(p.objects), _bytes(p.bytes), str(p.orphans), _bytes(p.orphan_bytes), str(p.young))
    table.add_row(
        "total",
        str(sum(p.objects for p in report.prefixes)),
        _bytes(sum(p.bytes for p in report.prefixes)),
        str(report.orphans),
        _bytes(report.orphan_bytes),
        str(report.young),
        style="bold",
    )
    console.print(table)
    console.print(
        f"  orphans: objects no row references, written over {report.min_age_s:g} s ago; "
        "young ones may belong to writes whose rows are not committed yet",
        style="dim",
    )
    if report.blobs is not None:
        b = report.blobs
        console.print(
            f"Local blobs: {b.blobs_removed} removed ({_bytes(b.bytes_freed)} freed), "
            f"{b.temp_files_removed} stale temporary file(s) removed."
        )
    if report.dry_run:
        console.print("Dry run: nothing was removed.")


def _bytes(size: int) -> str:
    """``1.5 MiB``-style sizes."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # not reached


__all__ = ["app", "gc_command", "show_report"]
