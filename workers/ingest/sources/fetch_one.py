"""Fetch one file of one source: present already, or from the mirror, the origin, Kaggle.

The order is fixed: a verified local copy; the mirror (``NEVIS_DATA_MIRROR``), for every
file including Kaggle and manual ones; the catalogue's URLs; then the Kaggle client for a
Kaggle source. A file is kept only once its checksum is right; until then it is a
``.part`` file, which a later attempt (or a later run) resumes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from workers.ingest.sources.kaggle import CREDENTIALS_HINT, KaggleError, kaggle_credentials, kaggle_download
from workers.ingest.sources.locations import local_path, mirror_url, relative_name
from workers.ingest.sources.transfer import TransferError, download
from workers.ingest.sources.verify import FetchState, check_file, expected_checksum
from workers.stream.sources.catalogue import Source, SourceFile

FETCHED, PRESENT, KAGGLE, MANUAL, FAILED = "fetched", "present", "kaggle", "manual", "failed"


class Progress:
    """Where byte counts go (the CLI draws bars from them); this one ignores them."""

    def begin(self, label: str) -> Any:
        return label

    def update(self, handle: Any, *, total: int | None = None, completed: int | None = None, advance: int = 0) -> None:
        return None

    def end(self, handle: Any) -> None:
        return None


@dataclass(frozen=True)
class FetchContext:
    """What every file's fetch shares."""

    dest: Path
    state: FetchState
    mirror: str | None = None
    s3_client: Any = None
    progress: Progress = field(default_factory=Progress)
    attempts: int = 4
    timeout: float = 60.0
    kaggle: Callable[[str, Path], Path] = kaggle_download


@dataclass(frozen=True)
class FileResult:
    """What happened to one file; ``detail`` is the reason or the instruction shown to the user."""

    source: str
    name: str
    status: str
    detail: str = ""
    size: int = 0


def _drive_direct(url: str) -> list[str]:
    """Drive's direct-download host for a Drive URL (it skips the virus-scan page), else nothing."""
    parts = urlsplit(url)
    ident = (parse_qs(parts.query).get("id") or [""])[0]
    if "drive.google.com" not in parts.netloc or not ident:
        return []
    return [f"https://drive.usercontent.google.com/download?id={ident}&export=download&confirm=t"]


def candidate_urls(source: Source, file: SourceFile, mirror: str | None) -> list[str]:
    """The URLs tried, in order: the mirror, then (unless Kaggle or manual) the origins."""
    urls = [mirror_url(mirror, source, file)] if mirror else []
    if source.needs == "none" and not file.is_kaggle:
        urls += [file.url, *file.mirrors, *_drive_direct(file.url)]
    return urls


def _present(source: Source, file: SourceFile, ctx: FetchContext) -> tuple[bool, str]:
    """Whether a verified copy is in place; a copy that fails its check is moved aside."""
    path, rel = local_path(ctx.dest, source, file), relative_name(source, file)
    if not path.is_file():
        return False, ""
    recorded = ctx.state.recorded_sha256(rel)
    if recorded and ctx.state.unchanged(rel, path):  # noqa: SIM102
        if not (file.checksum or "").startswith("sha256:") or file.checksum == f"sha256:{recorded}":
            return True, ""
    verdict = check_file(path, expected_checksum(file.checksum, ctx.state, rel))
    if verdict.ok:
        ctx.state.record(rel, path, verdict.sha256)
        return True, ""
    os.replace(path, path.with_name(path.name + ".bad"))
    return False, f"the copy in place did not verify ({verdict.reason}); moved to {path.name}.bad"


def _keep(part: Path, source: Source, file: SourceFile, ctx: FetchContext) -> str:
    """Verify a finished download and move it into place; returns '' or why it was refused."""
    rel = relative_name(source, file)
    verdict = check_file(part, expected_checksum(file.checksum, ctx.state, rel))
    if not verdict.ok:
        part.unlink(missing_ok=True)
        return verdict.reason
    final = local_path(ctx.dest, source, file)
    os.replace(part, final)
    ctx.state.record(rel, final, verdict.sha256)
    return ""


def _from_urls(source: Source, file: SourceFile, ctx: FetchContext, reasons: list[str]) -> bool:
    final = local_path(ctx.dest, source, file)
    part = final.with_name(final.name + ".part")
    for url in candidate_urls(source, file, ctx.mirror):
        handle = ctx.progress.begin(f"{source.key}/{file.name}")
        try:
            download(
                url,
                part,
                attempts=ctx.attempts,
                timeout=ctx.timeout,
                s3_client=ctx.s3_client,
                on_total=lambda total, done, h=handle: ctx.progress.update(h, total=total, completed=done),
                on_bytes=lambda n, h=handle: ctx.progress.update(h, advance=n),
            )
        except TransferError as exc:
            reasons.append(str(exc))
            continue
        finally:
            ctx.progress.end(handle)
        refused = _keep(part, source, file, ctx)
        if not refused:
            return True
        reasons.append(f"{url}: {refused}")
    return False


def _from_kaggle(source: Source, file: SourceFile, ctx: FetchContext, reasons: list[str]) -> FileResult:
    where = kaggle_credentials()
    if where is None:
        detail = f"Kaggle dataset {source.kaggle}: {CREDENTIALS_HINT}"
        return FileResult(source.key, file.name, KAGGLE, "; ".join([detail, *reasons]))
    final = local_path(ctx.dest, source, file)
    try:
        path = ctx.kaggle(str(source.kaggle), final.parent)
    except KaggleError as exc:
        return FileResult(source.key, file.name, FAILED, "; ".join([str(exc), *reasons]))
    refused = _keep(path, source, file, ctx) if path == final else "the client wrote another file name"
    if refused:
        return FileResult(source.key, file.name, FAILED, f"Kaggle {source.kaggle}: {refused}")
    return FileResult(source.key, file.name, FETCHED, f"with the kaggle client ({where})", final.stat().st_size)


def fetch_file(source: Source, file: SourceFile, ctx: FetchContext) -> FileResult:
    """Make one file present and verified, or say exactly why it is not."""
    present, note = _present(source, file, ctx)
    final = local_path(ctx.dest, source, file)
    if present:
        return FileResult(source.key, file.name, PRESENT, "", final.stat().st_size)
    final.parent.mkdir(parents=True, exist_ok=True)
    reasons = [note] if note else []
    if _from_urls(source, file, ctx, reasons):
        return FileResult(source.key, file.name, FETCHED, "", final.stat().st_size)
    if source.needs == "kaggle":
        return _from_kaggle(source, file, ctx, reasons)
    if source.needs == "manual":
        checksum = f" ({file.checksum})" if file.checksum else ""
        detail = f"place {file.name}{checksum} at {final}"
        return FileResult(source.key, file.name, MANUAL, "; ".join([detail, *reasons]))
    return FileResult(source.key, file.name, FAILED, "; ".join(reasons) or "no URL to try")


__all__ = [
    "FAILED",
    "FETCHED",
    "KAGGLE",
    "MANUAL",
    "PRESENT",
    "FetchContext",
    "FileResult",
    "Progress",
    "candidate_urls",
    "fetch_file",
]
