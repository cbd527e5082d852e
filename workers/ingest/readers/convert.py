"""Convert several sources and say, for each, what happened: the table `nevis data convert`
prints. One source failing does not stop the others; the caller decides the exit status."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from workers.ingest.readers.base import READERS, MissingSourceFileError, convert_source, source_folder
from workers.ingest.sources.locations import sources_dir
from workers.ingest.sources.placed import ACCEPT_FLAG, check_placed

CONVERTED, PRESENT, MISSING, NO_READER, FAILED = "converted", "present", "missing files", "no reader yet", "failed"


@dataclass(frozen=True)
class ConvertOutcome:
    """One source's result: ``status`` is one of the five names above."""

    key: str
    status: str
    detail: str = ""
    rows: int = 0
    size: int = 0  # bytes of the written file
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in (CONVERTED, PRESENT)


def convert_one(
    key: str,
    data_dir: Path,
    offline_dir: Path,
    *,
    force: bool = False,
    accept_count_change: bool = False,
    accept_checksum_change: bool = False,
) -> ConvertOutcome:
    """Convert one source unless its file is there already (``force`` rewrites it).

    Its files are first held to the catalogue's checksums (:mod:`..sources.placed`: a file
    that differs fails the source unless ``accept_checksum_change``), and the result to its
    pinned counts (:mod:`..sources.pinned`, ``accept_count_change``); the outcome's detail
    says what was verified, what was not, and any change accepted."""
    folder = source_folder(key, data_dir)
    key = folder.source.key
    target = Path(offline_dir) / f"{key}.parquet"
    if target.is_file() and not force:
        return ConvertOutcome(key, PRESENT, f"{target} (--force rewrites it)", size=target.stat().st_size)
    if key not in READERS:
        return ConvertOutcome(key, NO_READER, f"no reader in workers/ingest/readers for {folder.source.archive or key}")
    missing = folder.missing()
    if missing:
        return ConvertOutcome(key, MISSING, f"not fetched: {', '.join(missing)} (run `nevis data fetch`)")
    started = time.monotonic()
    files = check_placed(folder.source, sources_dir(Path(data_dir)), accept=accept_checksum_change)
    if not files.ok:
        return ConvertOutcome(
            key,
            FAILED,
            f"{files.summary()}. Fetch the file(s) again (`nevis data "
            f"fetch`), or pass {ACCEPT_FLAG} if the change is known.",
            seconds=time.monotonic() - started,
        )
    try:
        written = convert_source(key, data_dir, offline_dir, accept_count_change=accept_count_change)
    except MissingSourceFileError as exc:
        return ConvertOutcome(key, MISSING, str(exc))
    except Exception as exc:  # noqa: BLE001 - one source's failure is reported, the rest go on
        return ConvertOutcome(
            key, FAILED, f"{type(exc).__name__}: {exc}; {files.summary()}", seconds=time.monotonic() - started
        )
    accepted = written.counts.get("accepted_change")
    counts = (
        f"; counts differ from pinned, accepted by {accepted['flag']}: {'; '.join(accepted['differences'])}"
        if accepted
        else ""
    )
    return ConvertOutcome(
        key,
        CONVERTED,
        f"{written.path}; {files.summary()}{counts}",
        rows=written.num_rows,
        size=written.path.stat().st_size,
        seconds=time.monotonic() - started,
    )


def convert_sources(
    keys: Iterable[str],
    data_dir: Path,
    offline_dir: Path,
    *,
    force: bool = False,
    on_done: Callable[[ConvertOutcome], None] | None = None,
    accept_count_change: bool = False,
    accept_checksum_change: bool = False,
) -> list[ConvertOutcome]:
    """:func:`convert_one` for each key in turn (each source is written in bounded memory)."""
    outcomes = []
    for key in keys:
        outcome = convert_one(
            key,
            data_dir,
            offline_dir,
            force=force,
            accept_count_change=accept_count_change,
            accept_checksum_change=accept_checksum_change,
        )
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
    return outcomes


__all__ = ["CONVERTED", "FAILED", "MISSING", "NO_READER", "PRESENT", "ConvertOutcome", "convert_one", "convert_sources"]
