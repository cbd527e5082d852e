"""The contract between a source's downloaded files and the Parquet image dataset it becomes.

One reader per archive layout turns ``<NEVIS_DATA_DIR>/sources/<key>/`` (what ``nevis data
fetch`` left there) into ``<NEVIS_OFFLINE_DATA_DIR>/<key>.parquet`` (docs/data-format.md),
which ``nevis:<key>`` then finds. Writing a reader:

- one module per source or family, ``workers/ingest/readers/<family>.py``; the package's
  ``__init__`` imports every module, so decorating is all the registration there is::

      @reader("mnist")
      def read_mnist(files: SourceFolder) -> ConvertedSource:
          images = files.path("train-images-idx3-ubyte.gz")   # a file of the catalogue entry
          ...
          return ConvertedSource(rows=generator, class_names=names, official_split=True)

- ``SourceFolder``: ``source`` (the catalogue entry), ``root`` (the folder), ``path(name)``
  (raises :class:`MissingSourceFileError` naming the file and ``nevis data fetch``), ``has(name)``.
- ``ConvertedSource``: ``rows`` (an iterable of ``ImageRow``, consumed once: make it a
  generator that reads one archive member at a time; never extract a whole archive),
  ``class_names``, ``kind`` (``single``/``multi``), ``official_split`` (the rows' ``split``
  is the source's published one), ``source_facts`` (JSON, merged over the catalogue's).
  Every per-row attribute a stream's split rule names (``attr.<name>``) must be on every row.
- :func:`convert_source` runs a reader and writes its file through ``write_parquet_dataset``.
  The helpers for common layouts (tar/zip members, one folder per class, IDX, CIFAR batches)
  are in :mod:`workers.ingest.readers.layouts`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.core.errors import DataIntegrityError, DatasetFormatError
from services.core.registry import Registry
from workers.ingest.sources.locations import sources_dir
from workers.ingest.writers.parquet_writer import ImageRow, NoRowsError, WrittenDataset, write_parquet_dataset
from workers.stream.sources.catalogue import Source, load_catalogue
from workers.stream.sources.pinned import count_record


class MissingSourceFileError(DataIntegrityError):
    """A reader needs a file of its source that is not in the data folder (not fetched yet)."""


class RuleKeepsNothingError(DatasetFormatError):
    """A reader's rule (which rows and classes of its files it keeps) kept none."""


@dataclass(frozen=True)
class SourceFolder:
    """A source's catalogue entry and the folder its fetched files are in."""

    source: Source
    root: Path  # <NEVIS_DATA_DIR>/sources/<key>

    def has(self, name: str) -> bool:
        return (self.root / name).is_file()

    def path(self, name: str) -> Path:
        """The fetched file ``name``.

        Raises:
            MissingSourceFileError: it is not there; the message says how to fetch it.
        """
        where = self.root / name
        if not where.is_file():
            raise MissingSourceFileError(
                f"Source {self.source.key!r} needs {name!r}, which is not at {where}. Run "
                f"`nevis data fetch --stream <stream> --datasets {self.source.key}` (or place "
                "the file there by hand) and convert again."
            )
        return where

    def missing(self) -> list[str]:
        """The catalogue's files of this source that are not here."""
        return [f.name for f in self.source.files if not self.has(f.name)]


@dataclass(frozen=True)
class ConvertedSource:
    """What a reader makes of a source: rows as a stream, and the dataset's header facts."""

    rows: Iterable[ImageRow]
    class_names: Sequence[str]
    kind: str = "single"
    official_split: bool = False
    source_facts: Mapping[str, Any] = field(default_factory=dict)
    encode_pixels: str | None = "PNG"  # pixel arrays are stored as lossless PNG
    keeps: str = ""  # the rule choosing rows and classes, named when it keeps none


Reader = Callable[[SourceFolder], ConvertedSource]
READERS: Registry[Reader] = Registry("source reader")


def reader(key: str) -> Callable[[Reader], Reader]:
    """Register the decorated function as the reader of catalogue source ``key``."""

    def register(function: Reader) -> Reader:
        return READERS.register(key, function)

    return register


def source_folder(key: str, data_dir: Path) -> SourceFolder:
    """The folder of source ``key`` (a catalogue key, reference key or ``nevis:<key>``)."""
    source = load_catalogue().find(key)
    return SourceFolder(source=source, root=sources_dir(Path(data_dir)) / source.key)


def catalogue_facts(source: Source) -> dict[str, Any]:
    """What the catalogue knows of a source, kept in the file so a result traces back to it."""
    facts: dict[str, Any] = {"key": source.key, "urls": [f.url for f in source.files]}
    if source.titles:
        facts["title"] = source.titles[0]
    if source.reference_key and source.reference_key != source.key:
        facts["reference_key"] = source.reference_key
    return facts


def convert_source(key: str, data_dir: Path, offline_dir: Path, *, accept_count_change: bool = False) -> WrittenDataset:
    """Read source ``key``'s fetched files and write ``<offline_dir>/<key>.parquet``.

    Its classes and rows per split are checked against the catalogue's pinned counts before
    the file appears (:mod:`workers.stream.sources.pinned`); the result's ``counts`` records
    the check (and ``accepted_change`` where ``accept_count_change`` let a difference pass).

    Raises:
        CountMismatchError: the counts differ from the pinned ones (no file is written).
        UnknownNameError: no reader is registered for the source.
        MissingSourceFileError: a file the reader needs was not fetched.
        RuleKeepsNothingError: the reader's rule kept no class or no row (naming the rule).
        DatasetFormatError: the reader produced a row the format refuses (naming the row).
    """
    folder = source_folder(key, data_dir)
    read = READERS.get(folder.source.key)
    converted = read(folder)
    rule = converted.keeps or "the reader's selection of the source's files"
    files = ", ".join(f.name for f in folder.source.files)
    if not converted.class_names:
        raise RuleKeepsNothingError(
            f"Source {folder.source.key!r}: its rule keeps no class "
            f"({rule}) in {files}; are these the source's real files?"
        )
    offline_dir = Path(offline_dir)
    offline_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _write(converted, folder, offline_dir, accept_count_change)
    except NoRowsError:
        raise RuleKeepsNothingError(
            f"Source {folder.source.key!r}: no row of {files} passed its rule ({rule}), so there "
            "is nothing to convert; are these the source's real files?"
        ) from None


def _write(
    converted: ConvertedSource, folder: SourceFolder, offline_dir: Path, accept_count_change: bool
) -> WrittenDataset:
    return write_parquet_dataset(
        converted.rows,
        offline_dir / f"{folder.source.key}.parquet",
        class_names=converted.class_names,
        kind=converted.kind,
        official_split=converted.official_split,
        source={**catalogue_facts(folder.source), **converted.source_facts},
        encode_pixels=converted.encode_pixels,
        before_close=lambda rows: count_record(
            folder.source, len(converted.class_names), rows, accept=accept_count_change
        ),
    )


__all__ = [
    "READERS",
    "ConvertedSource",
    "MissingSourceFileError",
    "Reader",
    "RuleKeepsNothingError",
    "SourceFolder",
    "catalogue_facts",
    "convert_source",
    "reader",
    "source_folder",
]
