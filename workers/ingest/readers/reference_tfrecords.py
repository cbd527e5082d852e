"""Import datasets the reference (dm_nevis) already prepared, so its users need not download again.

The reference prepares a dataset into ``<NEVIS_DATA_DIR>/stable/<name>/``:

- ``metadata``: the dataset's facts (class count, class names, records per split), see
  :mod:`.reference_metadata`;
- ``status``: ``ready`` once preparation finished;
- ``<split>/data-<i>-of-<n>``: TFRecord shards of ``tf.train.Example`` records, one per image,
  with the image as PNG bytes under ``png_encoded_image`` and the class index under ``label``
  (int64) or the positive classes under ``multi_label`` (int64 list). Example ``i`` of a split
  went to shard ``i mod n``; reading the shards round-robin gives back the written order.

The splits are the reference's final ones (``train``, ``dev``, ``dev-test``, ``test``;
``train_and_dev`` is the union of the first two and is read only where they are absent). Each
becomes rows of ``<NEVIS_OFFLINE_DATA_DIR>/<key>.parquet`` (docs/data-format.md):
``attr.reference_split`` keeps the reference's own split of every row, and ``split`` says what
the source's own split most likely was (train and dev from its train part, dev-test from val,
test from test). Which of the two a stream's rule uses is the import's split mode
(:mod:`.reference_import`). The PNG bytes are stored as they are: the pixels are the
reference's. This module reads a folder; :mod:`.reference_import` writes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from services.core.errors import DataIntegrityError, DatasetFormatError, DatasetNotFoundError
from workers.ingest.readers.reference_metadata import METADATA_FILE, ReferenceMetadata, read_reference_metadata
from workers.ingest.readers.tfrecord import TFRecordError, iter_records, parse_example
from workers.ingest.writers.parquet_writer import ImageRow
from workers.stream.imported_splits import REFERENCE_SPLIT_ATTRIBUTE
from workers.stream.sources.catalogue import Source, load_catalogue

IMAGE_FEATURE, LABEL_FEATURE, MULTI_LABEL_FEATURE = "png_encoded_image", "label", "multi_label"
STATUS_FILE, READY, VERSION_FOLDER = "status", "ready", "stable"
# reference split folder -> (the Parquet ``split``, the reference split as this service names it)
SPLIT_MAP: dict[str, tuple[str, str]] = {
    "train": ("train", "train"),
    "dev": ("train", "dev"),
    "dev-test": ("val", "dev_test"),
    "test": ("test", "test"),
}
UNION_SPLIT = "train_and_dev"  # = train + dev; read as train only where neither is there
_SHARD = re.compile(r"^data-(\d+)-of-(\d+)$")


@dataclass(frozen=True)
class ReferenceDataset:
    """A recognised reference folder: its source, metadata and shards per split folder."""

    folder: Path
    source: Source
    metadata: ReferenceMetadata
    shards: dict[str, list[Path]]  # split folder -> its shards in index order, read order of SPLIT_MAP

    def split_rows(self) -> list[tuple[str, str, str]]:
        """``(folder, parquet split, reference split)`` in read order."""
        if "train" in self.shards or "dev" in self.shards or UNION_SPLIT not in self.shards:
            return [(name, *SPLIT_MAP[name]) for name in SPLIT_MAP if name in self.shards]
        return [(UNION_SPLIT, "train", "train")] + [
            (name, *SPLIT_MAP[name]) for name in SPLIT_MAP if name in self.shards
        ]


class NotAReferenceDataset(Exception):
    """A folder that is skipped: the message says why (not an error of the import)."""


def dataset_folders(root: Path) -> list[Path]:
    """The dataset folders under ``root``: ``root`` itself if it is one, else its subfolders
    (those of ``root/stable`` where the reference's data folder was given)."""
    root = Path(root)
    if _looks_like_dataset(root):
        return [root]
    if (root / VERSION_FOLDER).is_dir():
        root = root / VERSION_FOLDER
    return _subfolders(root)


def _subfolders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _looks_like_dataset(folder: Path) -> bool:
    return (folder / METADATA_FILE).is_file() or any(
        _SHARD.match(f.name) for sub in _subfolders(folder) for f in sub.iterdir()
    )


def recognise(folder: Path) -> ReferenceDataset:
    """Check a folder is a complete reference dataset of a source the catalogue knows.

    Raises:
        NotAReferenceDataset: it is not (the message is the table's reason).
        DatasetFormatError / TFRecordError: it is one, but damaged (missing shards, bad metadata).
    """
    shards = _shards(folder)
    if not shards and not (folder / METADATA_FILE).is_file():
        raise NotAReferenceDataset(
            "no metadata file and no data-*-of-* TFRecord shards: not a dataset the reference prepared"
        )
    try:
        source = load_catalogue().find(folder.name)
    except DatasetNotFoundError:
        raise NotAReferenceDataset(
            f"{folder.name!r} is not a source of any NEVIS'22 stream of this "
            "service (workers/stream/sources/catalogue.json)"
        ) from None
    status = folder / STATUS_FILE
    if status.is_file() and status.read_text(encoding="utf-8", errors="replace").strip() != READY:
        raise NotAReferenceDataset(
            f"its status file says {status.read_text(errors='replace').strip()!r}, "
            "not 'ready': the reference did not finish preparing it"
        )
    unknown = sorted(set(shards) - set(SPLIT_MAP) - {UNION_SPLIT})
    if unknown:
        raise NotAReferenceDataset(
            f"split folder(s) {', '.join(unknown)} are none of the reference's ({', '.join([*SPLIT_MAP, UNION_SPLIT])})"
        )
    if not shards:
        raise NotAReferenceDataset("no split folder holds data-*-of-* TFRecord shards")
    return ReferenceDataset(folder=folder, source=source, metadata=read_reference_metadata(folder), shards=shards)


def _shards(folder: Path) -> dict[str, list[Path]]:
    """Each split folder's shards in index order; every one of ``n`` must be there."""
    found: dict[str, list[Path]] = {}
    for sub in _subfolders(folder):
        numbered = {}
        totals = set()
        for path in sub.iterdir():
            match = _SHARD.match(path.name)
            if match and path.is_file():
                numbered[int(match.group(1))] = path
                totals.add(int(match.group(2)))
        if not numbered:
            continue
        if len(totals) != 1 or sorted(numbered) != list(range(totals.pop())):
            raise DatasetFormatError(
                f"{sub}: the shards data-<i>-of-<n> are not all there (found "
                f"{', '.join(sorted(p.name for p in numbered.values()))}); the "
                "split would be incomplete."
            )
        found[sub.name] = [numbered[i] for i in sorted(numbered)]
    return found


def _records(shards: Sequence[Path]) -> Iterator[tuple[str, bytes]]:
    """``(where, payload)`` round-robin over the shards: the order the reference wrote them in.
    One open file per shard, one record in memory."""
    streams = [(path, enumerate(iter_records(path))) for path in shards]
    while streams:
        alive = []
        for path, stream in streams:
            item = next(stream, None)
            if item is not None:
                number, payload = item
                yield f"{path}: record {number}", payload
                alive.append((path, stream))
        streams = alive


def _features(where: str, payload: bytes) -> dict[str, list]:
    try:
        return parse_example(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TFRecordError(f"{where}: the record is not a tf.train.Example: {exc}") from None


def _label(where: str, features: dict[str, list], kind: str) -> int | list[int]:
    if kind == "multi":
        values = features.get(MULTI_LABEL_FEATURE)
        if values is None or not all(isinstance(v, int) for v in values):
            raise DatasetFormatError(
                f"{where}: no int64 {MULTI_LABEL_FEATURE!r} feature, which every record of a multi-label dataset has."
            )
        return sorted(set(values))
    values = features.get(LABEL_FEATURE)
    if values is None or len(values) != 1 or not isinstance(values[0], int):
        raise DatasetFormatError(f"{where}: the {LABEL_FEATURE!r} feature is not one int64 (found {values!r}).")
    return values[0]


def label_kind(dataset: ReferenceDataset) -> str:
    """``single`` or ``multi``, from the first record's features (one record is read)."""
    for folder, _, _ in dataset.split_rows():
        with closing(_records(dataset.shards[folder][:1])) as records:
            first = next(records, None)
        if first is not None:
            features = _features(*first)
            where = first[0]
            if MULTI_LABEL_FEATURE in features:
                return "multi"
            if LABEL_FEATURE in features:
                return "single"
            raise DatasetFormatError(
                f"{where}: neither {LABEL_FEATURE!r} nor {MULTI_LABEL_FEATURE!r} "
                f"among the features ({', '.join(sorted(features))})."
            )
    raise DatasetFormatError(f"{dataset.folder}: the shards hold no records.")


def reference_rows(dataset: ReferenceDataset, kind: str) -> Iterator[ImageRow]:
    """The dataset's images as rows, split by split, checking each split's count against the
    metadata's (a shard that lost records is an error, not a shorter split)."""
    for folder, split, reference_split in dataset.split_rows():
        count = 0
        for where, payload in _records(dataset.shards[folder]):
            features = _features(where, payload)
            images = features.get(IMAGE_FEATURE)
            if not images or len(images) != 1 or not isinstance(images[0], bytes):
                raise DatasetFormatError(
                    f"{where}: no {IMAGE_FEATURE!r} bytes feature (found "
                    f"{', '.join(sorted(features)) or 'no features'})."
                )
            yield ImageRow(
                image=images[0],
                label=_label(where, features, kind),
                split=split,
                attributes={REFERENCE_SPLIT_ATTRIBUTE: reference_split},
            )
            count += 1
        expected = dataset.metadata.split_counts.get(folder)
        if expected is not None and expected != count:
            raise DataIntegrityError(
                f"{dataset.folder / folder}: the metadata counts {expected} records "
                f"in this split, its shards hold {count}."
            )


__all__ = [
    "SPLIT_MAP",
    "UNION_SPLIT",
    "NotAReferenceDataset",
    "ReferenceDataset",
    "dataset_folders",
    "label_kind",
    "recognise",
    "reference_rows",
]
