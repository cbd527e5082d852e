"""``nevis data convert``: turn a stream's fetched source files into Parquet image datasets.

Reads ``<NEVIS_DATA_DIR>/sources/<key>/`` (what ``nevis data fetch`` left, or files placed
there by hand) and writes ``<NEVIS_OFFLINE_DATA_DIR>/<key>.parquet``, which ``nevis data
prepare`` then finds as ``nevis:<key>``. Every file is held to the catalogue's checksum and
every result to its pinned counts first; each row's detail says what was verified. The closing table gives every source one outcome, and the command exits
non-zero while any selected source is not converted, so a stream is never shortened silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from services.cli.console import make_console
from services.cli.data_fetch_cmd import stream_sources
from services.core.config import get_settings
from services.core.errors import ConfigError, DataIntegrityError, DatasetNotFoundError

if TYPE_CHECKING:
    from rich.console import Console

    from workers.ingest.readers.convert import ConvertOutcome
    from workers.stream.manifest import StreamManifest

_COLOURS = {
    "converted": "green",
    "present": "dim",
    "missing files": "yellow",
    "no reader yet": "yellow",
    "failed": "red",
}


def _table(title: str, outcomes: list[ConvertOutcome]) -> Table:
    table = Table(title=title)
    for name in ("source", "outcome", "rows", "MB", "s", "detail"):
        table.add_column(
            name, no_wrap=name != "detail", overflow="fold", justify="right" if name in ("rows", "MB", "s") else "left"
        )
    for item in outcomes:
        colour = _COLOURS.get(item.status, "white")
        table.add_row(
            item.key,
            f"[{colour}]{item.status}[/]",
            str(item.rows or ""),
            f"{item.size / 1e6:.1f}",
            f"{item.seconds:.1f}",
            item.detail,
        )
    return table


def convert(
    stream: str = typer.Option(..., "--stream", "-s", help="Stream name (see `nevis streams list`) or manifest path."),
    datasets: str | None = typer.Option(
        None, "--datasets", "-d", help="Comma-separated sources of the stream to convert (default: all)."
    ),
    force: bool = typer.Option(False, "--force", help="Rewrite datasets that were converted before."),
    accept_count_change: bool = typer.Option(
        False,
        "--accept-count-change",
        help="Convert a source whose classes or rows per split differ from the pinned counts "
        "(a known upstream change); the table says it was used.",
    ),
    accept_checksum_change: bool = typer.Option(
        False,
        "--accept-checksum-change",
        help="Convert a source whose files differ from the catalogue's checksums (known "
        "re-packed files); the table says it was used.",
    ),
) -> None:
    """Convert a stream's fetched source files into Parquet datasets (NEVIS_OFFLINE_DATA_DIR)."""
    from workers.ingest.readers.convert import convert_sources  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.manifest_files import load_stream  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    if settings.offline_data_dir is None:
        raise ConfigError(
            "`nevis data convert` writes <NEVIS_OFFLINE_DATA_DIR>/<source>.parquet: "
            "set NEVIS_OFFLINE_DATA_DIR (where `nevis data prepare` reads them)."
        )
    manifest = load_stream(stream)
    sources, _ = stream_sources(manifest, datasets)
    console = make_console()
    console.print(
        f"Converting {len(sources)} source(s) of stream [bold]{manifest.name}[/] "
        f"from {settings.data_dir / 'sources'} into {settings.offline_data_dir}"
    )
    outcomes = convert_sources(
        [s.key for s in sources],
        settings.data_dir,
        settings.offline_data_dir,
        force=force,
        on_done=lambda o: console.print(f"{o.key}: {o.status}"),
        accept_count_change=accept_count_change,
        accept_checksum_change=accept_checksum_change,
    )
    console.print(_table(f"Stream {manifest.name}: conversions", outcomes))
    bad = [o.key for o in outcomes if not o.ok]
    if bad:
        raise DataIntegrityError(
            f"{len(bad)} of {len(outcomes)} sources of stream {manifest.name!r} are not converted "
            f"({', '.join(bad)}); the table above says why. The stream is not shortened: fetch or "
            "fix these and run the command again (converted datasets are kept)."
        )
    console.print(f"All {len(outcomes)} sources converted or already present.")


def convert_fetched(
    manifest: StreamManifest,
    console: Console,
    *,
    accept_count_change: bool = False,
    accept_checksum_change: bool = False,
) -> list[ConvertOutcome]:
    """What ``nevis data prepare`` does first: convert each source of the stream whose files
    were fetched (its folder under ``<NEVIS_DATA_DIR>/sources`` exists) and not converted yet,
    so fetch then prepare is enough. Sources not fetched, or not in the catalogue (generated
    ones, a user's own datasets), are left to ``prepare``, which names what it cannot find."""
    from workers.ingest.readers.convert import PRESENT, convert_sources  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.ingest.sources.locations import sources_dir  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.sources.catalogue import load_catalogue  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    if settings.offline_data_dir is None:
        return []
    catalogue, keys = load_catalogue(), []
    for dataset in manifest.datasets:
        try:
            key = catalogue.find(dataset).key
        except DatasetNotFoundError:
            continue
        if (sources_dir(settings.data_dir) / key).is_dir() and key not in keys:
            keys.append(key)
    outcomes = [
        o
        for o in convert_sources(
            keys,
            settings.data_dir,
            settings.offline_data_dir,
            accept_count_change=accept_count_change,
            accept_checksum_change=accept_checksum_change,
        )
        if o.status != PRESENT
    ]
    if outcomes:
        console.print(_table(f"Stream {manifest.name}: fetched sources converted first", outcomes))
    return outcomes


__all__ = ["convert", "convert_fetched"]
