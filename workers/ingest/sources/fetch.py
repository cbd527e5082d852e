"""Fetch the files of many sources in parallel and sum up each source's outcome.

One outcome per source, worst first: ``failed`` beats ``needs a manual download`` beats
``needs Kaggle credentials`` beats ``fetched`` beats ``already present``. Only the last two
mean the source is there; the CLI exits non-zero otherwise, so a stream is never shortened
without a word.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from workers.ingest.sources.fetch_one import (
    FAILED,
    FETCHED,
    KAGGLE,
    MANUAL,
    PRESENT,
    FetchContext,
    FileResult,
    Progress,
    fetch_file,
)
from workers.ingest.sources.kaggle import kaggle_download
from workers.ingest.sources.locations import check_mirror, s3_client
from workers.ingest.sources.verify import FetchState
from workers.stream.sources.catalogue import Source, SourceFile

OUTCOME_TEXT = {
    FETCHED: "fetched",
    PRESENT: "already present",
    KAGGLE: "needs Kaggle credentials",
    MANUAL: "needs a manual download",
    FAILED: "failed",
}
_RANK = (FAILED, MANUAL, KAGGLE, FETCHED, PRESENT)


@dataclass(frozen=True)
class SourceResult:
    """One source's outcome and its files' results."""

    key: str
    status: str
    files: tuple[FileResult, ...]

    @property
    def outcome(self) -> str:
        return OUTCOME_TEXT[self.status]

    @property
    def ok(self) -> bool:
        return self.status in (FETCHED, PRESENT)

    @property
    def detail(self) -> str:
        """The reasons or instructions of the files that set the outcome."""
        lines = [
            f"{f.name}: {f.detail}" if len(self.files) > 1 else f.detail
            for f in self.files
            if f.status == self.status and f.detail
        ]
        return "; ".join(lines)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def summarise(key: str, files: Sequence[FileResult]) -> SourceResult:
    status = min((f.status for f in files), key=_RANK.index) if files else FAILED
    return SourceResult(key, status, tuple(files))


def _guarded(source: Source, file: SourceFile, ctx: FetchContext) -> FileResult:
    """One file's fetch; an unexpected error (a full disk) fails that file, not the others."""
    try:
        return fetch_file(source, file, ctx)
    except OSError as exc:
        return FileResult(source.key, file.name, FAILED, f"{type(exc).__name__}: {exc}")


def fetch_sources(
    sources: Sequence[Source],
    dest: Path,
    *,
    mirror: str | None = None,
    jobs: int = 4,
    progress: Progress | None = None,
    s3_endpoint_url: str | None = None,
    attempts: int = 4,
    timeout: float = 60.0,
    kaggle: Callable[[str, Path], Path] = kaggle_download,
) -> list[SourceResult]:
    """Fetch every file of ``sources`` into ``dest/<key>/`` with ``jobs`` threads.

    Args:
        mirror: an ``http(s)://`` or ``s3://`` prefix tried before the origins.
        kaggle: how a Kaggle dataset is downloaded (the official client by default).

    Raises:
        ConfigError: the mirror URL is not http(s):// or s3://.
    """
    mirror = check_mirror(mirror) if mirror else None
    dest.mkdir(parents=True, exist_ok=True)
    client = s3_client(s3_endpoint_url) if mirror and mirror.startswith("s3://") else None
    ctx = FetchContext(
        dest=dest,
        state=FetchState(dest),
        mirror=mirror,
        s3_client=client,
        progress=progress or Progress(),
        attempts=attempts,
        timeout=timeout,
        kaggle=kaggle,
    )
    work = [(source, file) for source in sources for file in source.files]
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="fetch") as pool:
        results = list(pool.map(lambda item: _guarded(item[0], item[1], ctx), work))
    by_source: dict[str, list[FileResult]] = {s.key: [] for s in sources}
    for result in results:
        by_source[result.source].append(result)
    return [summarise(key, files) for key, files in by_source.items()]


__all__ = ["OUTCOME_TEXT", "SourceResult", "fetch_sources", "summarise"]
