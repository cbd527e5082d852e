"""``parquet:<name>``: ``<name>.parquet`` in ``NEVIS_OFFLINE_DATA_DIR``, the format for sources
whose images differ in size (layout: :mod:`workers.stream.formats.parquet_layout`,
docs/data-format.md).

Reading keeps every image as it is: the extents come from the ``height`` / ``width`` columns,
and the pixels are decoded one row group at a time when the dataset is stored
(:class:`~workers.stream.image_rows.ImageRows`), so only the small columns (labels, splits,
attributes, extents) are read whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from services.core.errors import DataIntegrityError, DatasetFormatError, DatasetNotFoundError
from workers.stream.adapters.base import (
    AdapterContext,
    GivenSplits,
    MissingDataset,
    RawDataset,
    check_name,
    file_checksum,
)
from workers.stream.formats.parquet_layout import (
    CHANNELS,
    ENCODING,
    HEIGHT,
    IMAGE,
    LABEL,
    RAW,
    REQUIRED,
    SPLIT,
    SPLIT_NAMES,
    SUFFIX,
    WIDTH,
    DatasetHeader,
    attribute_column,
    attribute_names,
)
from workers.stream.image_rows import ImageRows, decode_image

HOW_TO_PROVIDE = (
    "put <name>.parquet (a NEVIS image dataset: one row per image, see docs/data-format.md; "
    "workers.ingest.writers.parquet_writer writes one) in NEVIS_OFFLINE_DATA_DIR"
)


class ParquetAdapter:
    """Reads ``<name>.parquet`` image datasets from the offline data folder."""

    source = "parquet"

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        if parquet_path(self.source, name, ctx) is not None:
            return None
        return MissingDataset(f"{self.source}:{name}", ctx.describe_offline_dir(), HOW_TO_PROVIDE)

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        path = parquet_path(self.source, name, ctx)
        if path is None:
            raise DatasetNotFoundError(self.find(name, ctx).message(name))
        return read_parquet_dataset(path, key=f"{self.source}:{name}")


def parquet_path(source: str, name: str, ctx: AdapterContext) -> Path | None:
    """``NEVIS_OFFLINE_DATA_DIR/<name>.parquet`` if it is a file."""
    check_name(source, name)
    if ctx.offline_dir is None:
        return None
    path = ctx.offline_dir / f"{name}{SUFFIX}"
    return path if path.is_file() else None


def read_parquet_dataset(path: Path, *, key: str) -> RawDataset:
    """Read a Parquet image dataset's small columns now; its images as :class:`ImageRows`.

    Raises:
        DataIntegrityError: the file is not readable Parquet.
        DatasetFormatError: it does not follow the format (naming what is wrong).
    """
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise DataIntegrityError(f"Dataset {key!r}: cannot read {path} as Parquet: {exc}") from None
    header = DatasetHeader.from_metadata(parquet.schema_arrow.metadata, f"Dataset {key!r} ({path})")
    names = parquet.schema_arrow.names
    wanted = [*REQUIRED, header.label_column]
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DatasetFormatError(f"Dataset {key!r}: {path.name} lacks the column(s) {missing}.")
    attrs = attribute_names(names)
    small = [
        HEIGHT,
        WIDTH,
        header.label_column,
        *([SPLIT] if SPLIT in names else []),
        *(attribute_column(a) for a in attrs),
    ]
    table = parquet.read(columns=small)
    shapes = np.stack([_ints(table, HEIGHT), _ints(table, WIDTH)], axis=1)
    groups = np.cumsum([0, *(parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups))])
    return RawDataset(
        key=key,
        images=ImageRows(shapes, _RowGroupReader(path, groups, key), key),
        labels=_labels(table, header, key),
        class_names=header.class_names,
        kind=header.kind,
        source_checksum=file_checksum(path),
        given_splits=_given_splits(table, header, key) if SPLIT in names else None,
        metadata={"file": path.name, **header.source},
        attributes={a: _attribute(table, attribute_column(a)) for a in attrs},
    )


class _RowGroupReader:
    """Row ``i``'s pixels, keeping the encoded bytes of one row group at a time."""

    def __init__(self, path: Path, starts: np.ndarray, key: str) -> None:
        self.path, self.starts, self.key = path, starts, key
        self.group = -1
        self.columns: dict[str, list] = {}

    def __call__(self, i: int) -> np.ndarray:
        group = int(np.searchsorted(self.starts, i, side="right")) - 1
        if group != self.group:
            columns = [IMAGE, ENCODING, HEIGHT, WIDTH, CHANNELS]
            table = pq.ParquetFile(self.path).read_row_group(group, columns=columns)
            self.columns = {c: table.column(c).to_pylist() for c in columns}
            self.group = group
        j = i - int(self.starts[group])
        blob, encoding = self.columns[IMAGE][j], self.columns[ENCODING][j]
        if encoding != RAW:
            return decode_image(blob, f"dataset {self.key!r}, row {i}")
        shape = tuple(self.columns[c][j] for c in (HEIGHT, WIDTH, CHANNELS))
        if len(blob) != int(np.prod(shape)) or shape[2] not in (1, 3):
            raise DatasetFormatError(
                f"Dataset {self.key!r}: row {i} holds {len(blob)} raw bytes, "
                f"not the {shape} its height, width and channels say."
            )
        return np.frombuffer(blob, dtype=np.uint8).reshape(shape)


def _ints(table: pa.Table, column: str) -> np.ndarray:
    return table.column(column).to_numpy().astype(np.int64)


def _labels(table: pa.Table, header: DatasetHeader, key: str) -> np.ndarray:
    if header.kind == "single":
        return _ints(table, LABEL)
    positives = table.column(header.label_column).combine_chunks()
    offsets = positives.offsets.to_numpy()
    classes = positives.values.to_numpy().astype(np.int64)
    count = len(header.class_names)
    if classes.size and (classes.min() < 0 or classes.max() >= count):
        raise DatasetFormatError(f"Dataset {key!r}: a multi-label row names a class outside 0..{count - 1}.")
    multi_hot = np.zeros((len(table), count), dtype=np.uint8)
    multi_hot[np.repeat(np.arange(len(table)), np.diff(offsets)), classes] = 1
    return multi_hot


def _given_splits(table: pa.Table, header: DatasetHeader, key: str) -> GivenSplits | None:
    split = np.asarray(table.column(SPLIT).to_pylist(), dtype=object)
    if all(s is None for s in split):
        return None
    unknown = sorted({str(s) for s in split if s is not None} - set(SPLIT_NAMES))
    if unknown:
        raise DatasetFormatError(f"Dataset {key!r}: split values {unknown} are not among {SPLIT_NAMES} (or null).")
    rows = {name: np.flatnonzero(split == name).astype(np.int64) for name in ("train", "val", "test")}
    return GivenSplits(
        train=rows["train"],
        test=rows["test"],
        val=rows["val"] if len(rows["val"]) else None,
        official=header.official_split,
    )


def _attribute(table: pa.Table, column: str) -> np.ndarray:
    values = table.column(column)
    if pa.types.is_integer(values.type):
        return values.to_numpy().astype(np.int64)
    return np.asarray(values.to_pylist(), dtype=str)


__all__ = ["HOW_TO_PROVIDE", "ParquetAdapter", "parquet_path", "read_parquet_dataset"]
