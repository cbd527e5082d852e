"""What a fetch would do (``--dry-run``): per source, its tasks, what it needs and its size.

Nothing here touches the network; sizes come from the catalogue (exact where a checksum
file states them, an approximate figure where its notes give one), else "unknown".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workers.ingest.sources.kaggle import kaggle_credentials
from workers.ingest.sources.locations import local_path
from workers.stream.sources.catalogue import Source


@dataclass(frozen=True)
class PlanRow:
    """One source in a dry run."""

    key: str
    tasks: tuple[int, ...]
    needs: str
    files: int
    present: int  # files already in the data folder (not re-verified in a dry run)
    size: str
    requirement: str


def human_size(num_bytes: int) -> str:
    value = float(num_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def size_text(source: Source) -> str:
    if source.known_size is not None:
        return human_size(source.known_size)
    return f"unknown (about {source.approx_size})" if source.approx_size else "unknown"


def requirement(source: Source, dest: Path, *, mirror: str | None, kaggle_found: str | None) -> str:
    """What a source needs, in words a user can act on."""
    via = f"mirror {mirror} first, then " if mirror else ""
    if source.needs == "kaggle":
        creds = f"found in {kaggle_found}" if kaggle_found else "not set"
        return f"{via}Kaggle credentials ({creds}): kaggle datasets download {source.kaggle}"
    if source.needs == "manual":
        names = ", ".join(f.name for f in source.files)
        return f"{via}a manual download: place {names} in {dest / source.key}"
    drive = " (Google Drive)" if any("drive.google.com" in f.url for f in source.files) else ""
    return f"{via}nothing: direct download{drive}"


def plan_sources(
    sources: Sequence[Source], dest: Path, tasks: Mapping[str, Sequence[int]], *, mirror: str | None = None
) -> list[PlanRow]:
    """One row per source; ``tasks`` maps a source key to the stream's task orders it serves."""
    found = kaggle_credentials()
    return [
        PlanRow(
            key=s.key,
            tasks=tuple(tasks.get(s.key, ())),
            needs=s.needs,
            files=len(s.files),
            present=sum(local_path(dest, s, f).is_file() for f in s.files),
            size=size_text(s),
            requirement=requirement(s, dest, mirror=mirror, kaggle_found=found),
        )
        for s in sources
    ]


def _need(count: int) -> str:
    return f"{count} needs" if count == 1 else f"{count} need"


def plan_summary(sources: Sequence[Source], rows: Sequence[PlanRow]) -> str:
    """One paragraph: tasks and sources covered, needs, and the known part of the size."""
    needs = {n: sum(r.needs == n for r in rows) for n in ("none", "kaggle", "manual")}
    known = [s.known_size for s in sources if s.known_size is not None]
    num_tasks = sum(len(r.tasks) for r in rows)
    return (
        f"{num_tasks} tasks from {len(rows)} sources ({sum(r.files for r in rows)} files): "
        f"{needs['none']} direct downloads, {_need(needs['kaggle'])} Kaggle credentials, "
        f"{_need(needs['manual'])} a manual download. Size known for {len(known)} source(s) "
        f"({human_size(sum(known))}); unknown for {len(rows) - len(known)}."
    )


__all__ = ["PlanRow", "human_size", "plan_sources", "plan_summary", "requirement", "size_text"]
