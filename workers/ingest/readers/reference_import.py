"""Import the reference's prepared datasets: write each recognised folder, report every folder.

:mod:`.reference_tfrecords` reads a folder the reference (dm_nevis) prepared; this writes it
as ``<NEVIS_OFFLINE_DATA_DIR>/<key>.parquet`` and gives every folder one outcome (imported,
present, skipped with the reason, failed), so one damaged dataset never stops the others.

Splits: every row keeps the reference's own split in ``attr.reference_split``. By default the
file keeps it (``source.split_mode`` = ``reference``): only a rule that reads it (the
``nevis22-*-reference`` streams) prepares the file, and ``prepare`` refuses a stream rule that
would deal its rows afresh, so the paper's exact test sets are one command away. ``redeal``
(``--redeal``) marks the file for the stream's own rule instead, as a converted download is;
each outcome names the mode (:mod:`workers.stream.imported_splits`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from services.core.errors import DatasetNotFoundError
from workers.ingest.readers.base import catalogue_facts
from workers.ingest.readers.reference_tfrecords import (
    NotAReferenceDataset,
    ReferenceDataset,
    dataset_folders,
    label_kind,
    recognise,
    reference_rows,
)
from workers.ingest.writers.parquet_writer import write_parquet_dataset
from workers.stream.formats.parquet_layout import DatasetHeader
from workers.stream.imported_splits import KEEP_REFERENCE, REDEAL, REDEAL_FLAG, SPLIT_MODE_FIELD
from workers.stream.sources.catalogue import load_catalogue

IMPORTED, PRESENT, SKIPPED, FAILED = "imported", "present", "skipped", "failed"


@dataclass(frozen=True)
class ImportOutcome:
    """One reference folder's result: ``status`` is one of the four names above."""

    folder: str  # the reference's dataset name (its folder)
    key: str  # the catalogue key it was written as ("" when skipped before that was known)
    status: str
    detail: str = ""
    rows: int = 0
    size: int = 0
    seconds: float = 0.0
    split_mode: str = ""  # KEEP_REFERENCE or REDEAL for a written or present file ("" otherwise)

    @property
    def ok(self) -> bool:
        return self.status in (IMPORTED, PRESENT)


def import_dataset(dataset: ReferenceDataset, offline_dir: Path, *, redeal: bool = False) -> tuple[Path, int, str]:
    """Write ``<offline_dir>/<key>.parquet`` from a recognised folder: (path, rows, note).

    The file keeps the reference's split of every row for the rules that read it, or, with
    ``redeal``, is marked for the stream's own rule to deal afresh (module doc)."""
    meta = dataset.metadata
    kind = label_kind(dataset)
    names = meta.class_names or tuple(str(i) for i in range(meta.num_classes))
    note = "" if meta.class_names else f"classes named by index ({meta.class_names_from})"
    facts = {
        **catalogue_facts(dataset.source),
        "imported_from": "dm_nevis prepared TFRecords",
        "reference_dataset": dataset.folder.name,
        "reference_splits": {folder: meta.split_counts.get(folder) for folder, _, _ in dataset.split_rows()},
        "class_names_from": meta.class_names_from if meta.class_names else "index",
        SPLIT_MODE_FIELD: REDEAL if redeal else KEEP_REFERENCE,
    }
    Path(offline_dir).mkdir(parents=True, exist_ok=True)
    written = write_parquet_dataset(
        reference_rows(dataset, kind),
        Path(offline_dir) / f"{dataset.source.key}.parquet",
        class_names=names,
        kind=kind,
        official_split=True,
        source=facts,
    )
    return written.path, written.num_rows, note


def split_mode_of(path: Path) -> str:
    """The split mode a present file was imported with ("" for a file that records none:
    a converted download, or an import made before modes existed)."""
    try:
        header = DatasetHeader.from_metadata(pq.read_schema(path).metadata, str(path))
    except Exception:  # noqa: BLE001 - an unreadable file is rewritten only by --force, as before
        return ""
    return str(header.source.get(SPLIT_MODE_FIELD, ""))


def _present_detail(target: Path, mode: str, redeal: bool) -> str:
    wanted = REDEAL if redeal else KEEP_REFERENCE
    if mode == wanted:
        return f"{target} (--force rewrites it)"
    flag = f" {REDEAL_FLAG}" if redeal else ""
    return f"{target}, imported with split mode {mode or 'unrecorded'!r}, not {wanted!r}: --force{flag} rewrites it"


def import_folder(folder: Path, offline_dir: Path, *, force: bool = False, redeal: bool = False) -> ImportOutcome:
    """Recognise and import one folder; every outcome is reported, none raised."""
    started = time.monotonic()
    try:
        dataset = recognise(folder)
    except NotAReferenceDataset as why:
        return ImportOutcome(folder.name, "", SKIPPED, str(why))
    except Exception as exc:  # noqa: BLE001 - one dataset's failure is reported, the rest go on
        return ImportOutcome(folder.name, "", FAILED, f"{type(exc).__name__}: {exc}")
    key = dataset.source.key
    target = Path(offline_dir) / f"{key}.parquet"
    if target.is_file() and not force:
        mode = split_mode_of(target)
        detail = _present_detail(target, mode, redeal)
        return ImportOutcome(folder.name, key, PRESENT, detail, size=target.stat().st_size, split_mode=mode)
    try:
        path, rows, note = import_dataset(dataset, offline_dir, redeal=redeal)
    except Exception as exc:  # noqa: BLE001 - as above
        return ImportOutcome(
            folder.name, key, FAILED, f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - started
        )
    detail = f"{path}" + (f"; {note}" if note else "")
    return ImportOutcome(
        folder.name,
        key,
        IMPORTED,
        detail,
        rows=rows,
        size=path.stat().st_size,
        seconds=time.monotonic() - started,
        split_mode=REDEAL if redeal else KEEP_REFERENCE,
    )


def import_reference(
    root: Path,
    offline_dir: Path,
    *,
    names: Iterable[str] | None = None,
    force: bool = False,
    redeal: bool = False,
    on_done: Callable[[ImportOutcome], None] | None = None,
) -> list[ImportOutcome]:
    """Import every dataset folder under ``root`` (or those ``names``: reference folder names or
    catalogue keys), one at a time, each in bounded memory; ``redeal``: see the module doc."""
    folders = dataset_folders(Path(root))
    if names is not None:
        wanted = list(dict.fromkeys(names))
        by_name = {p.name: p for p in folders}
        for p in folders:
            try:
                by_name.setdefault(load_catalogue().find(p.name).key, p)
            except DatasetNotFoundError:
                pass
        chosen = [by_name.get(n) for n in wanted]
    else:
        wanted, chosen = [p.name for p in folders], list(folders)
    outcomes = []
    for name, folder in zip(wanted, chosen, strict=True):
        outcome = (
            ImportOutcome(name, "", SKIPPED, f"no folder {name!r} under {root}")
            if folder is None
            else import_folder(folder, offline_dir, force=force, redeal=redeal)
        )
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
    return outcomes


__all__ = [
    "FAILED",
    "IMPORTED",
    "PRESENT",
    "SKIPPED",
    "ImportOutcome",
    "import_dataset",
    "import_folder",
    "import_reference",
    "split_mode_of",
]
