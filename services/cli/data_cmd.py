"""``nevis data``: turn a stream's datasets into checksummed shards, and re-check them.

``prepare`` is idempotent: a second run finds every dataset present, re-verifies its shards
and says there was nothing to do. The store, the offline data folder and the default image
size come from the settings (``NEVIS_STORE_URL``, ``NEVIS_OFFLINE_DATA_DIR``,
``NEVIS_IMAGE_SIZE``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from services.cli.console import make_console
from services.cli.data_convert_cmd import convert as _convert
from services.cli.data_convert_cmd import convert_fetched
from services.cli.data_fetch_cmd import fetch as _fetch
from services.cli.data_fetch_cmd import mirror as _mirror
from services.cli.data_import_cmd import import_reference as _import_reference
from services.core.config import get_settings
from services.core.errors import DataIntegrityError

if TYPE_CHECKING:
    from services.store.objects.base import ObjectStore
    from workers.stream.manifest import StreamManifest
    from workers.stream.prepare import PrepareReport, ProgressEvent
    from workers.stream.shards import DatasetIndex

app = typer.Typer(no_args_is_help=True)

_STREAM = typer.Option(..., "--stream", "-s", help="Stream name (see `nevis streams list`) or manifest path.")
_SIZE = typer.Option(
    None,
    "--image-size",
    min=8,
    max=512,
    help="Task resolution S (S x S pixels; originals are stored at NEVIS_STORED_SCALE x S). Default: NEVIS_IMAGE_SIZE if set, else the "
    "stream's own, else 64.",
)


def _context(stream: str, image_size: int | None) -> tuple[StreamManifest, ObjectStore, int, Path | None]:
    """The manifest, store, stored size and offline folder for a command."""
    from services.store.objects import store_from_settings  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.manifest_files import load_stream  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.prepare import stored_image_size  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    manifest = load_stream(stream)
    size = stored_image_size(
        manifest,
        settings_size=settings.image_size,
        settings_explicit="image_size" in settings.model_fields_set,
        override=image_size,
    )
    return manifest, store_from_settings(settings), size, settings.offline_data_dir


@app.command("prepare")
def prepare(
    stream: str = _STREAM,
    image_size: int | None = _SIZE,
    accept_count_change: bool = typer.Option(
        False,
        "--accept-count-change",
        help="Prepare a dataset whose classes or rows per split differ from its task's or the "
        "pinned counts (a known upstream change); the index and the notes record it.",
    ),
) -> None:
    """Build the shards of every dataset of a stream (skipping those already present)."""
    from workers.stream.prepare import STAGES, prepare_stream  # noqa: PLC0415 - imported when the command runs (fast start)

    manifest, store, size, offline_dir = _context(stream, image_size)
    console = make_console()
    # fetched archives not converted yet: fetch, then prepare
    failed = [
        o for o in convert_fetched(manifest, console, accept_count_change=accept_count_change) if o.status == "failed"
    ]
    if failed:
        raise DataIntegrityError(
            f"{len(failed)} fetched source(s) of stream {manifest.name!r} failed to convert: "
            + " | ".join(f"{o.key}: {o.detail}" for o in failed)
            + ". Nothing was prepared: fix "
            "them, or convert them with `nevis data convert` and its --accept-* flag where the "
            "change is known."
        )
    console.print(f"Preparing stream [bold]{manifest.name}[/] at {size}px into {store.url}")
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as bar:
        overall = bar.add_task("datasets", total=len(manifest.datasets))
        stage = bar.add_task("checking", total=len(STAGES) - 1)

        def show(event: ProgressEvent) -> None:
            if event.stage == "done":
                bar.advance(overall)
            bar.update(stage, description=f"{event.dataset}: {event.stage}", completed=STAGES.index(event.stage))

        recorder, salt = _database_recorder(store)
        report = prepare_stream(
            manifest,
            store,
            image_size=size,
            offline_dir=offline_dir,
            progress=show,
            on_prepared=recorder,
            stored_scale=get_settings().stored_scale,
            accept_count_change=accept_count_change,
            split_salt=salt,
        )
        bar.update(stage, visible=False)
    console.print(_report_table(report))
    if report.nothing_to_do:
        console.print(
            f"Nothing to do: all {len(report.datasets)} datasets were already prepared, and "
            f"every one of their {report.shards_verified} shards verified."
        )
    else:
        console.print(
            f"Prepared {len(report.written)} dataset(s); "
            f"{len(report.datasets) - len(report.written)} were already present and verified."
        )
    for item in report.datasets:
        for note in item.notes:
            console.print(f"[yellow]note[/] {item.dataset}: {note}")


def _database_recorder(store: ObjectStore) -> Callable[[DatasetIndex], None]:
    """Record prepared datasets in NEVIS_DATABASE_URL (schema created or migrated first); with
    it, the split salt (the setting, or a production deployment's own: deployment_salt)."""
    from services.store.db import sessions_on, upgrade  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.db.engine import ensure_sqlite_parent  # noqa: PLC0415 - imported when the command runs (fast start)
    from services.store.deployment_salt import split_salt  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.catalog import database_recorder  # noqa: PLC0415 - imported when the command runs (fast start)

    url = get_settings().database_url
    ensure_sqlite_parent(url)
    upgrade(url)
    sessions = sessions_on(url)
    return database_recorder(sessions, store), split_salt(sessions, get_settings().split_salt)


@app.command("verify")
def verify(stream: str = _STREAM, image_size: int | None = _SIZE) -> None:
    """Re-read every shard of a stream and check it against its index."""
    from workers.stream.prepare import verify_stream  # noqa: PLC0415 - imported when the command runs (fast start)

    manifest, store, size, _ = _context(stream, image_size)
    results = verify_stream(manifest, store, image_size=size)
    table = Table("dataset", "result", title=f"Stream {manifest.name} at {size}px")
    for dataset, result in results.items():
        colour = "green" if result.startswith("ok") else "red"
        table.add_row(dataset, f"[{colour}]{result}[/]")
    console = make_console()
    console.print(table)
    bad = [d for d, r in results.items() if not r.startswith("ok")]
    if bad:
        raise DataIntegrityError(
            f"{len(bad)} of {len(results)} datasets of stream {manifest.name!r} are not "
            f"prepared or do not verify ({', '.join(bad)}); run `nevis data prepare "
            f"--stream {stream}`."
        )
    console.print(f"All {len(results)} datasets verified.")


def _report_table(report: PrepareReport) -> Table:
    table = Table(
        title=f"Stream {report.stream} at {report.image_size}px (originals: long side {report.stored_side}px)",
        caption="sizes: train/dev/dev_test/test; dups: exact duplicates removed",
    )
    table.add_column("dataset", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("sizes", no_wrap=True)
    for name in ("shards", "MB", "dups", "s"):
        table.add_column(name, justify="right", no_wrap=True)
    colours = {"present": "dim", "prepared": "green", "rebuilt": "yellow"}
    for item in report.datasets:
        table.add_row(
            item.dataset,
            f"[{colours.get(item.status, 'white')}]{item.status}[/]",
            "/".join(str(item.counts.get(s, 0)) for s in ("train", "dev", "dev_test", "test")),
            str(item.num_shards),
            f"{item.num_bytes / 1e6:.1f}",
            str(item.duplicates_removed),
            f"{item.seconds:.1f}",
        )
    return table


__all__ = ["app", "prepare", "verify"]


# `nevis data fetch` / `nevis data mirror` live in their own module (downloading is not preparing).
app.command("fetch")(_fetch)
app.command("mirror")(_mirror)

# `nevis data convert` (fetched archives -> Parquet datasets) has its own module too.
app.command("convert")(_convert)

# `nevis data import-reference` (the reference's prepared TFRecords -> Parquet datasets).
app.command("import-reference")(_import_reference)
