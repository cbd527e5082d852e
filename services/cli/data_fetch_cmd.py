"""``nevis data fetch`` and ``nevis data mirror``: get a stream's source files, fill a mirror.

Files go to ``<NEVIS_DATA_DIR>/sources/<source key>/``; ``NEVIS_DATA_MIRROR`` is tried before
each source's own URLs. The closing table gives every source one outcome, and the command
exits non-zero while any source of the stream is not there, so nothing is shortened
silently. Reading the archives into datasets is ``nevis data prepare``'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings
from services.core.errors import DataIntegrityError, DatasetNotFoundError

if TYPE_CHECKING:
    from workers.ingest.sources.fetch import SourceResult
    from workers.stream.manifest import StreamManifest
    from workers.stream.sources.catalogue import Source

_STREAM = typer.Option(..., "--stream", "-s", help="Stream name (see `nevis streams list`) or manifest path.")
_DATASETS = typer.Option(
    None, "--datasets", "-d", help="Comma-separated sources of the stream to fetch (default: all), e.g. mnist,voc_2007."
)
_COLOURS = {"fetched": "green", "present": "dim", "kaggle": "yellow", "manual": "yellow", "failed": "red"}


class ByteBars:
    """Byte-level progress bars for the fetcher's threads (rich's Progress is thread-safe)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def begin(self, label: str) -> Any:
        return self.progress.add_task(label, total=None)

    def update(self, handle: Any, *, total: int | None = None, completed: int | None = None, advance: int = 0) -> None:
        extra = {"total": total} if total is not None else {}
        self.progress.update(handle, completed=completed, advance=advance or None, **extra)

    def end(self, handle: Any) -> None:
        self.progress.remove_task(handle)


def stream_sources(manifest: StreamManifest, datasets: str | None) -> tuple[list[Source], dict[str, list[int]]]:
    """The stream's sources (or the chosen ones) and, per source key, the task orders it serves."""
    from workers.stream.sources.catalogue import load_catalogue  # noqa: PLC0415 - imported when the command runs (fast start)

    catalogue = load_catalogue()
    sources = catalogue.for_datasets(manifest.datasets)
    tasks: dict[str, list[int]] = {}
    for task in manifest.tasks:
        tasks.setdefault(catalogue.find(task.dataset).key, []).append(task.order)
    if datasets:
        keys = [catalogue.find(name.strip()).key for name in datasets.split(",") if name.strip()]
        outside = [k for k in keys if k not in tasks]
        if outside:
            raise DatasetNotFoundError(f"not sources of stream {manifest.name!r}: {', '.join(outside)}")
        sources = [s for s in sources if s.key in keys]
    return sources, tasks


def _tasks_text(orders: Sequence[int]) -> str:
    return ",".join(str(o) for o in orders)


def _dry_run(manifest: StreamManifest, sources: list[Source], tasks: dict[str, list[int]]) -> None:
    from workers.ingest.sources.locations import sources_dir  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.ingest.sources.plan import plan_sources, plan_summary  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    dest = sources_dir(settings.data_dir)
    rows = plan_sources(sources, dest, tasks, mirror=settings.data_mirror)
    table = Table(title=f"Stream {manifest.name}: what `nevis data fetch` would do (into {dest})")
    for name in ("source", "tasks", "files", "present", "size", "needs"):
        table.add_column(name, no_wrap=name != "needs", overflow="fold")
    for row in rows:
        table.add_row(row.key, _tasks_text(row.tasks), str(row.files), str(row.present), row.size, row.requirement)
    console = make_console()
    console.print(table)
    console.print(plan_summary(sources, rows))


def _result_table(manifest: StreamManifest, results: list[SourceResult], tasks: dict[str, list[int]]) -> Table:
    table = Table(title=f"Stream {manifest.name}: sources")
    for name in ("source", "tasks", "outcome", "MB", "detail"):
        table.add_column(
            name, no_wrap=name not in ("detail",), overflow="fold", justify="right" if name == "MB" else "left"
        )
    for item in results:
        colour = _COLOURS.get(item.status, "white")
        table.add_row(
            item.key,
            _tasks_text(tasks.get(item.key, ())),
            f"[{colour}]{item.outcome}[/]",
            f"{item.size / 1e6:.1f}",
            item.detail,
        )
    return table


def fetch(
    stream: str = _STREAM,
    datasets: str | None = _DATASETS,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print what would be fetched, sizes where known, and what each needs."
    ),
    jobs: int = typer.Option(4, "--jobs", "-j", min=1, max=64, help="Files downloaded at once."),
) -> None:
    """Download a stream's source files (resumable, checksum-verified) into the data folder."""
    from workers.ingest.sources.fetch import fetch_sources  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.ingest.sources.locations import check_mirror, sources_dir  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.manifest_files import load_stream  # noqa: PLC0415 - imported when the command runs (fast start)

    manifest = load_stream(stream)
    sources, tasks = stream_sources(manifest, datasets)
    if get_settings().data_mirror:
        check_mirror(get_settings().data_mirror)
    if dry_run:
        _dry_run(manifest, sources, tasks)
        return
    settings = get_settings()
    dest = sources_dir(settings.data_dir)
    console = make_console()
    mirror = f" (mirror first: {settings.data_mirror})" if settings.data_mirror else ""
    console.print(f"Fetching {len(sources)} source(s) of stream [bold]{manifest.name}[/] into {dest}{mirror}")
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        results = fetch_sources(
            sources,
            dest,
            mirror=settings.data_mirror,
            jobs=jobs,
            progress=ByteBars(progress),
            s3_endpoint_url=settings.s3_endpoint_url,
        )
    console.print(_result_table(manifest, results, tasks))
    counts = {o: sum(r.outcome == o for r in results) for o in dict.fromkeys(r.outcome for r in results)}
    console.print(", ".join(f"{n} {o}" for o, n in counts.items()))
    missing = [r.key for r in results if not r.ok]
    if missing:
        raise DataIntegrityError(
            f"{len(missing)} of {len(results)} sources of stream {manifest.name!r} are not present "
            f"({', '.join(missing)}); the table above says what each needs. The stream is not "
            "shortened: fix these and run the command again (finished files are kept)."
        )


def mirror(
    to: str = typer.Option(
        ..., "--to", help="The mirror: s3://bucket/prefix (NEVIS_S3_ENDPOINT_URL for other S3 servers)."
    ),
    stream: str | None = typer.Option(
        None, "--stream", "-s", help="Only this stream's sources (default: all fetched)."
    ),
    datasets: str | None = _DATASETS,
) -> None:
    """Upload fetched source files into an S3 mirror that NEVIS_DATA_MIRROR can point at."""
    from workers.ingest.sources.locations import s3_client, sources_dir  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.ingest.sources.mirror import MISSING, upload_to_mirror  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.manifest_files import load_stream  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.sources.catalogue import load_catalogue  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    if stream:
        sources, _ = stream_sources(load_stream(stream), datasets)
    else:
        catalogue = load_catalogue()
        names = [n.strip() for n in (datasets or "").split(",") if n.strip()]
        sources = [catalogue.find(n) for n in names] if names else list(catalogue.sources)
    console = make_console()
    rows = upload_to_mirror(
        sources,
        sources_dir(settings.data_dir),
        to,
        s3_client(settings.s3_endpoint_url),
        on_file=lambda row: console.print(f"{row.key}/{row.name}: {row.status}") if row.status != MISSING else None,
    )
    done = [r for r in rows if r.status != MISSING]
    console.print(
        f"{len(done)} file(s) in the mirror {to} ({sum(r.size for r in done) / 1e6:.1f} MB); "
        f"{len(rows) - len(done)} not fetched here were skipped."
    )


__all__ = ["ByteBars", "fetch", "mirror", "stream_sources"]
