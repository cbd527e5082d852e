"""The source catalogue: one entry per NEVIS'22 source, read from package data.

Data, not code: the entries live in ``catalogue.json`` beside this module, so a new mirror
URL or checksum is an edit of that file (through its generator), never of the fetcher.
``NEVIS_SOURCE_CATALOGUE`` names another file of the same format to read instead (a mirror
of re-packed files, or the test fixtures' mirror).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from services.core.config import get_settings
from services.core.errors import ConfigError, DatasetNotFoundError, ManifestError, unknown_name_message

CATALOGUE_FORMAT = 1
NEEDS = ("none", "kaggle", "manual")
HASHES = ("md5", "sha256")
DATASET_PREFIX = "nevis:"


@dataclass(frozen=True)
class SourceFile:
    """One file of a source: where it is stored locally (``name``) and where it comes from."""

    name: str
    url: str  # ``kaggle:<owner>/<slug>`` for a Kaggle dataset
    mirrors: tuple[str, ...] = ()  # other URLs of the same bytes
    checksum: str | None = None  # "md5:<hex>" or "sha256:<hex>"
    size: int | None = None

    @property
    def is_kaggle(self) -> bool:
        return self.url.startswith("kaggle:")


@dataclass(frozen=True)
class Source:
    """One source of one or more tasks (a source that recurs in a stream is fetched once)."""

    key: str  # the manifest's dataset is ``nevis:<key>``
    files: tuple[SourceFile, ...]
    needs: str = "none"
    tasks: Mapping[str, tuple[int, ...]] | None = None  # {"FULL": (...), "SHORT": (...)}
    reference_key: str = ""
    titles: tuple[str, ...] = ()
    kaggle: str | None = None  # "<owner>/<slug>"
    source_kind: str = ""
    archive: str = ""
    torchvision: str = ""
    requires_tools: tuple[str, ...] = ()
    approx_size: str | None = None
    notes: tuple[str, ...] = ()
    # what the reference or TFDS fixes of the source's size (checked by convert and prepare)
    expected_classes: int | None = None
    expected_rows: Mapping[str, int] | None = None  # split -> rows, the readers' split names
    expected_from: str = ""

    @property
    def dataset(self) -> str:
        return DATASET_PREFIX + self.key

    @property
    def known_size(self) -> int | None:
        """Total bytes when every file's size is known, else ``None``."""
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[arg-type]


def _file(doc: Mapping[str, Any], where: str) -> SourceFile:
    checksum = doc.get("checksum")
    if checksum is not None and checksum.split(":", 1)[0] not in HASHES:
        raise ManifestError(f"{where}: checksum {checksum!r} is not md5:<hex> or sha256:<hex>")
    name = str(doc["name"])
    if "/" in name or name.startswith("."):
        raise ManifestError(f"{where}: file name {name!r} must be a plain name")
    return SourceFile(
        name=name, url=str(doc["url"]), mirrors=tuple(doc.get("mirrors", ())), checksum=checksum, size=doc.get("size")
    )


def parse_source(doc: Mapping[str, Any]) -> Source:
    """One catalogue entry, checked.

    Raises:
        ManifestError: a field is missing or has a value the fetcher does not know.
    """
    key = str(doc.get("key", ""))
    if doc.get("needs") not in NEEDS:
        raise ManifestError(f"source {key!r}: needs must be one of {NEEDS}; got {doc.get('needs')!r}")
    if doc["needs"] == "kaggle" and not doc.get("kaggle"):
        raise ManifestError(f"source {key!r}: needs kaggle but names no Kaggle dataset")
    tasks = doc.get("tasks") or {}
    expected = doc.get("expected") or {}
    rows = expected.get("rows")
    if not all(isinstance(n, int) and n >= 0 for n in [expected.get("classes", 0), *(rows or {}).values()]):
        raise ManifestError(f"source {key!r}: expected classes and rows must be ints >= 0; got {expected!r}")
    return Source(
        key=key,
        files=tuple(_file(f, f"source {key!r}") for f in doc["files"]),
        needs=doc["needs"],
        tasks={s: tuple(v) for s, v in tasks.items()},
        reference_key=doc.get("reference_key", key),
        titles=tuple(doc.get("titles", ())),
        kaggle=doc.get("kaggle"),
        source_kind=doc.get("source_kind", ""),
        archive=doc.get("archive", ""),
        torchvision=doc.get("torchvision", ""),
        requires_tools=tuple(doc.get("requires_tools") or ()),
        approx_size=doc.get("approx_size"),
        notes=tuple(doc.get("notes", ())),
        expected_classes=expected.get("classes"),
        expected_rows=dict(rows) if rows else None,
        expected_from=str(expected.get("from", "")),
    )


class Catalogue:
    """The sources by key, and the lookups a fetch needs."""

    def __init__(self, sources: Iterable[Source]) -> None:
        self.sources = tuple(sources)
        self._by_name: dict[str, Source] = {}
        for source in self.sources:
            for name in {source.key, source.reference_key, source.dataset}:
                self._by_name[name] = source

    def find(self, name: str) -> Source:
        """A source by key (``voc_2007``), reference key (``voc/2007``) or dataset (``nevis:voc_2007``).

        Raises:
            DatasetNotFoundError: no source has that name (the message suggests near names).
        """
        try:
            return self._by_name[name]
        except KeyError:
            known = [s.key for s in self.sources]
            raise DatasetNotFoundError(unknown_name_message("source", name, known)) from None

    def for_datasets(self, datasets: Iterable[str]) -> list[Source]:
        """The sources of a stream's datasets, in stream order, each once.

        Raises:
            DatasetNotFoundError: naming every dataset the catalogue has no source for.
        """
        found: dict[str, Source] = {}
        missing: list[str] = []
        for dataset in datasets:
            source = self._by_name.get(dataset)
            if source is None:
                missing.append(dataset)
            else:
                found.setdefault(source.key, source)
        if missing:
            raise DatasetNotFoundError(
                f"No download source for {len(missing)} dataset(s): {', '.join(missing)}. "
                "`nevis data fetch` knows the NEVIS'22 sources (nevis:<key>); other datasets "
                "are converted by hand (see docs/data-fetch.md)."
            )
        return list(found.values())


def parse_catalogue(doc: Mapping[str, Any]) -> Catalogue:
    """A whole catalogue document.

    Raises:
        ManifestError: an unknown format or a bad entry.
    """
    if doc.get("format") != CATALOGUE_FORMAT:
        raise ManifestError(f"source catalogue format {doc.get('format')!r} is not {CATALOGUE_FORMAT}")
    return Catalogue(parse_source(entry) for entry in doc["sources"])


def load_catalogue() -> Catalogue:
    """The catalogue in ``NEVIS_SOURCE_CATALOGUE`` when that is set, else the one shipped with
    the package (each read once per process).

    Raises:
        ConfigError: ``NEVIS_SOURCE_CATALOGUE`` names a file that cannot be read as JSON.
        ManifestError: the catalogue has an unknown format or a bad entry.
    """
    path = get_settings().source_catalogue
    return _read_catalogue(str(path) if path is not None else None)


@lru_cache(maxsize=4)
def _read_catalogue(path: str | None) -> Catalogue:
    if path is None:
        return parse_catalogue(
            json.loads(resources.files(__package__).joinpath("catalogue.json").read_text(encoding="utf-8"))
        )
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"NEVIS_SOURCE_CATALOGUE={path} cannot be read as a source catalogue: {exc}", field="source_catalogue"
        ) from None
    return parse_catalogue(doc)


__all__ = ["Catalogue", "Source", "SourceFile", "load_catalogue", "parse_catalogue", "parse_source"]
