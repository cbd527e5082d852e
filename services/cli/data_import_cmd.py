"""``nevis data import-reference``: take over datasets the reference (dm_nevis) already prepared.

Users of the reference have its prepared datasets on disk (``$NEVIS_DATA_DIR/stable/<name>/``,
TFRecords of PNGs). This command turns each folder it recognises into
``<NEVIS_OFFLINE_DATA_DIR>/<key>.parquet``, as ``nevis data convert`` does from a download, so
they need not download again. The closing table gives every folder one outcome (imported,
present, skipped with the reason, failed) and the split mode of its file; the command exits
non-zero when one failed.

By default the files keep the reference's own split of every row, which the
``nevis22-full-reference`` / ``nevis22-short-reference`` streams read; ``--redeal`` marks them
for the stream's own rule instead (:mod:`workers.stream.imported_splits`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from services.cli.console import make_console
from services.core.config import get_settings
from services.core.errors import ConfigError, DataIntegrityError

if TYPE_CHECKING:
    from workers.ingest.readers.reference_import import ImportOutcome

_COLOURS = {"imported": "green", "present": "dim", "skipped": "yellow", "failed": "red"}


def _table(title: str, outcomes: list[ImportOutcome]) -> Table:
    table = Table(title=title)
    for name in ("folder", "source", "outcome", "splits", "rows", "MB", "s", "detail"):
        table.add_column(
            name, no_wrap=name != "detail", overflow="fold", justify="right" if name in ("rows", "MB", "s") else "left"
        )
    for item in outcomes:
        colour = _COLOURS.get(item.status, "white")
        table.add_row(
            item.folder,
            item.key,
            f"[{colour}]{item.status}[/]",
            item.split_mode,
            str(item.rows or ""),
            f"{item.size / 1e6:.1f}",
            f"{item.seconds:.1f}",
            item.detail,
        )
    return table


def import_reference(
    path: Path = typer.Argument(
        ...,
        exists=True,
        file_okay=False,
        help="The reference's data folder (its NEVIS_DATA_DIR), its 'stable' folder, or one dataset's folder.",
    ),
    datasets: str | None = typer.Option(
        None, "--datasets", "-d", help="Comma-separated folders or source keys to import (default: all)."
    ),
    force: bool = typer.Option(False, "--force", help="Rewrite datasets that are already in NEVIS_OFFLINE_DATA_DIR."),
    redeal: bool = typer.Option(
        False,
        "--redeal",
        help="Let each stream's own split rule re-deal the rows (default: keep the reference's split of "
        "every row, read by the nevis22-full-reference and nevis22-short-reference streams).",
    ),
) -> None:
    """Import datasets the reference implementation prepared (TFRecords of PNGs) as Parquet datasets."""
    from workers.ingest.readers.reference_import import import_reference as run_import  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.stream.imported_splits import REFERENCE_STREAMS  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    if settings.offline_data_dir is None:
        raise ConfigError(
            "`nevis data import-reference` writes <NEVIS_OFFLINE_DATA_DIR>/<source>.parquet: "
            "set NEVIS_OFFLINE_DATA_DIR (where `nevis data prepare` reads them)."
        )
    names = [n.strip() for n in datasets.split(",") if n.strip()] if datasets else None
    console = make_console()
    console.print(f"Importing the reference's prepared datasets from {path} into {settings.offline_data_dir}")
    outcomes = run_import(
        path,
        settings.offline_data_dir,
        names=names,
        force=force,
        redeal=redeal,
        on_done=lambda o: console.print(f"{o.folder}: {o.status}"),
    )
    console.print(_table(f"Import from {path}", outcomes))
    failed = [o.folder for o in outcomes if o.status == "failed"]
    if failed:
        raise DataIntegrityError(
            f"{len(failed)} of {len(outcomes)} reference datasets failed to import ({', '.join(failed)}); "
            "the table above says why. Datasets imported before are kept; fix or re-prepare these and "
            "run the command again."
        )
    done = sum(o.ok for o in outcomes)
    console.print(f"{done} of {len(outcomes)} folders imported or already present; the rest skipped (see above).")
    if redeal:
        console.print("Split mode 'redeal' (--redeal): each stream's own split rule deals the imported rows afresh.")
    else:
        console.print(
            "Split mode 'reference': every row keeps the reference's split; prepare "
            f"{' or '.join(REFERENCE_STREAMS)} to use them (--redeal lets a stream's own rule re-deal them)."
        )


__all__ = ["import_reference"]
