"""Check a source's files before conversion, however they got into its folder.

``nevis data fetch`` verifies what it downloads and records it (:class:`FetchState`), but a
file placed by hand (ImageNet's manual tars, a copy from another machine) or changed since
was trusted as it was. :func:`check_placed` holds every file of the source to the catalogue's
checksum: a file whose sha256 the state recorded, equal to the catalogue's sha256, and that is
unchanged since (same size and mtime) is not hashed again; any other (an md5 checksum cannot
be compared with the recorded sha256) is hashed now, and recorded when it matches. A file the catalogue has
no checksum for is reported as not verified, never passed silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workers.ingest.sources.locations import local_path, relative_name
from workers.ingest.sources.verify import FetchState, check_file
from workers.stream.sources.catalogue import Source

ACCEPT_FLAG = "--accept-checksum-change"


@dataclass(frozen=True)
class PlacedCheck:
    """What checking one source's files found (file names in each group)."""

    verified_at_fetch: tuple[str, ...] = ()
    verified_now: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()  # no checksum known
    mismatched: tuple[str, ...] = ()  # "name: reason"
    accepted: bool = False  # mismatches let through by ACCEPT_FLAG

    @property
    def ok(self) -> bool:
        return not self.mismatched or self.accepted

    def summary(self) -> str:
        """One line for the convert table."""
        verified = len(self.verified_at_fetch) + len(self.verified_now)
        parts = [f"checksums: {verified} of {verified + len(self.unverified) + len(self.mismatched)} files verified"]
        if self.unverified:
            parts.append(f"NOT verified (no checksum in the catalogue): {', '.join(self.unverified)}")
        if self.mismatched:
            parts.append(
                ("mismatch accepted by " + ACCEPT_FLAG + ": " if self.accepted else "MISMATCH: ")
                + "; ".join(self.mismatched)
            )
        return "; ".join(parts)


def check_placed(source: Source, dest: Path, *, accept: bool = False) -> PlacedCheck:
    """Hold every present file of ``source`` under ``dest`` (``<data>/sources``) to its checksum."""
    state = FetchState(dest)
    groups: dict[str, list[str]] = {"fetch": [], "now": [], "none": [], "bad": []}
    for file in source.files:
        path, rel = local_path(dest, source, file), relative_name(source, file)
        if not path.is_file():
            continue
        recorded = state.recorded_sha256(rel)
        if not file.checksum:
            groups["none"].append(file.name)  # a sha256 recorded at fetch proves only "unchanged"
            continue
        if file.checksum == f"sha256:{recorded}" and state.unchanged(rel, path):
            groups["fetch"].append(file.name)
            continue
        verdict = check_file(path, file.checksum)
        if verdict.ok:
            state.record(rel, path, verdict.sha256)
            groups["now"].append(file.name)
        else:
            groups["bad"].append(f"{file.name}: {verdict.reason}")
    return PlacedCheck(
        tuple(groups["fetch"]),
        tuple(groups["now"]),
        tuple(groups["none"]),
        tuple(groups["bad"]),
        accepted=accept and bool(groups["bad"]),
    )


__all__ = ["ACCEPT_FLAG", "PlacedCheck", "check_placed"]
