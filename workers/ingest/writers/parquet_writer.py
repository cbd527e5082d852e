"""Write a Parquet image dataset (docs/data-format.md) one row group at a time.

Converters of downloaded sources call :func:`write_parquet_dataset` with an iterable of
:class:`ImageRow`; it never holds more than one row group (at most ``row_group_rows`` rows or
``row_group_bytes`` of image bytes) in memory, so a source of any size converts in bounded
memory. The file appears under its name only when complete (written beside it, then renamed),
so an interrupted conversion never looks like a dataset.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from services.core.errors import DatasetFormatError
from workers.stream.formats.parquet_layout import (
    CHANNELS,
    ENCODING,
    HEIGHT,
    IMAGE,
    LABEL,
    LABELS,
    RAW,
    SPLIT,
    SPLIT_NAMES,
    WIDTH,
    DatasetHeader,
    attribute_column,
)
from workers.stream.image_rows import sniff_image

DEFAULT_ROW_GROUP_ROWS = 1024
DEFAULT_ROW_GROUP_BYTES = 64 << 20


class NoRowsError(DatasetFormatError):
    """The rows given to :func:`write_parquet_dataset` were none (a converter's rule kept none)."""


@dataclass(frozen=True)
class ImageRow:
    """One image of a source, with everything the format keeps about it.

    ``image`` is encoded bytes (PNG, JPEG, anything Pillow reads; stored as they are) or uint8
    pixels ``[h, w]`` / ``[h, w, 1|3]``. ``label`` is the class index (single-label) or the
    indices of the positive classes (multi-label). ``split`` is the source's own split of the
    row (``train`` / ``val`` / ``test``) or None.
    """

    image: bytes | np.ndarray
    label: int | Sequence[int]
    split: str | None = None
    attributes: Mapping[str, int | str] = field(default_factory=dict)


@dataclass(frozen=True)
class WrittenDataset:
    """What :func:`write_parquet_dataset` wrote."""

    path: Path
    num_rows: int
    num_row_groups: int
    split_rows: Mapping[str, int] = field(default_factory=dict)  # "none": rows without a split
    counts: Mapping[str, Any] = field(default_factory=dict)  # what a before_close check recorded


def write_parquet_dataset(
    rows: Iterable[ImageRow],
    path: Path | str,
    *,
    class_names: Sequence[str],
    kind: str = "single",
    splits: Mapping[str, Sequence[int]] | None = None,
    attributes: Mapping[str, Sequence[int | str]] | None = None,
    official_split: bool = False,
    source: Mapping[str, Any] | None = None,
    encode_pixels: str | None = None,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    before_close: Callable[[Mapping[str, int]], Mapping[str, Any]] | None = None,
) -> WrittenDataset:
    """Write ``rows`` as one Parquet dataset file at ``path``.

    Args:
        rows: the images in row order (consumed once, as a stream).
        path: the file to write (``<name>.parquet`` in ``NEVIS_OFFLINE_DATA_DIR``).
        class_names: one name per class; labels index into it.
        kind: ``single`` or ``multi``.
        splits: optional row-index lists (``train`` / ``val`` / ``test``), for converters that
            know a split up front; a row's own ``split`` wins where both are given.
        attributes: optional per-row values by attribute name (indexed by row number), beside
            each row's own ``attributes``.
        official_split: the splits are the source's published ones.
        source: JSON-able facts about the source, kept in the file and the shard index.
        encode_pixels: pixel arrays are stored raw when None, else encoded in this Pillow
            format (``PNG``: lossless and smaller).
        row_group_rows, row_group_bytes: a row group is written when either is reached.
        before_close: called with the rows per split once every row is read, before the file
            appears; what it returns is the result's ``counts``, and an exception it raises
            leaves no file (how a converter refuses a source of the wrong size).

    Raises:
        DatasetFormatError: a row breaks the format (naming the row).
        NoRowsError: there are no rows.
    """
    if row_group_rows < 1 or row_group_bytes < 1:
        raise ValueError(
            "The 'row_group_rows' and 'row_group_bytes' parameters of write_parquet_dataset must be ints in [1, inf)."
        )
    header = DatasetHeader(
        kind=kind, class_names=tuple(class_names), official_split=official_split, source=dict(source or {})
    )
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    given = _split_lookup(splits)
    columns = _Columns(header, given, dict(attributes or {}), encode_pixels)
    writer = None
    groups = 0
    try:
        for number, row in enumerate(rows):
            columns.add(number, row)
            if columns.rows >= row_group_rows or columns.image_bytes >= row_group_bytes:
                writer = writer or pq.ParquetWriter(partial, columns.schema)
                writer.write_table(columns.flush(), row_group_size=row_group_rows)
                groups += 1
        if columns.rows:
            writer = writer or pq.ParquetWriter(partial, columns.schema)
            writer.write_table(columns.flush(), row_group_size=row_group_rows)
            groups += 1
        if writer is None:
            raise NoRowsError(f"Dataset {path.name}: no rows to write.")
        counts = before_close(dict(columns.split_rows)) if before_close is not None else {}
        writer.close()
        writer = None
        os.replace(partial, path)
    finally:
        if writer is not None:
            writer.close()
        partial.unlink(missing_ok=True)
    return WrittenDataset(
        path=path,
        num_rows=columns.total,
        num_row_groups=groups,
        split_rows=dict(columns.split_rows),
        counts=dict(counts),
    )


def _split_lookup(splits: Mapping[str, Sequence[int]] | None) -> dict[int, str]:
    out: dict[int, str] = {}
    for name, row_ids in (splits or {}).items():
        if name not in SPLIT_NAMES:
            raise DatasetFormatError(f"Split {name!r} is not one of {SPLIT_NAMES}.")
        for row in row_ids:
            if out.setdefault(int(row), name) != name:
                raise DatasetFormatError(f"Row {row} is in splits {out[int(row)]!r} and {name!r}.")
    return out


class _Columns:
    """The rows of the row group being built, checked as they come."""

    def __init__(
        self,
        header: DatasetHeader,
        given: dict[int, str],
        attributes: dict[str, Sequence[int | str]],
        encode: str | None,
    ) -> None:
        self.header, self.given, self.extra, self.encode = header, given, attributes, encode
        self.schema: pa.Schema | None = None
        self.kinds: dict[str, type] = {}  # attribute name -> int or str
        self.total = 0
        self.split_rows: Counter[str] = Counter()
        self._reset()

    def _reset(self) -> None:
        self.data: dict[str, list[Any]] = {}
        self.rows = self.image_bytes = 0

    def add(self, number: int, row: ImageRow) -> None:
        where = f"row {number}"
        blob, encoding, height, width, channels = self._image(row.image, where)
        values = {
            IMAGE: blob,
            ENCODING: encoding,
            HEIGHT: height,
            WIDTH: width,
            CHANNELS: channels,
            self.header.label_column: self._label(row.label, where),
            SPLIT: self._split(number, row.split, where),
        }
        attrs = {**{n: v[number] for n, v in self.extra.items()}, **row.attributes}
        if self.schema is None:
            self.schema = self._schema(attrs, where)
        if set(attrs) != set(self.kinds):
            raise DatasetFormatError(
                f"{where} has attributes {sorted(attrs)}; every row must have the first row's: {sorted(self.kinds)}."
            )
        for name, value in attrs.items():
            if isinstance(value, np.generic):
                value = value.item()
            if type(value) is not self.kinds[name]:
                raise DatasetFormatError(
                    f"{where}: attribute {name!r} is {value!r}; it must be "
                    f"{self.kinds[name].__name__} as in the first row."
                )
            values[attribute_column(name)] = value
        for name, value in values.items():
            self.data.setdefault(name, []).append(value)
        self.rows += 1
        self.total += 1
        self.split_rows[values[SPLIT] or "none"] += 1
        self.image_bytes += len(blob)

    def flush(self) -> pa.Table:
        table = pa.Table.from_pydict(self.data, schema=self.schema)
        self._reset()
        return table

    def _schema(self, attrs: Mapping[str, Any], where: str) -> pa.Schema:
        label = (
            pa.field(LABEL, pa.int64(), nullable=False)
            if self.header.kind == "single"
            else pa.field(LABELS, pa.list_(pa.int32()), nullable=False)
        )
        fields = [
            pa.field(IMAGE, pa.binary(), nullable=False),
            pa.field(ENCODING, pa.string(), nullable=False),
            pa.field(HEIGHT, pa.int32(), nullable=False),
            pa.field(WIDTH, pa.int32(), nullable=False),
            pa.field(CHANNELS, pa.int8(), nullable=False),
            label,
            pa.field(SPLIT, pa.string()),
        ]
        for name, value in attrs.items():
            value = value.item() if isinstance(value, np.generic) else value
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise DatasetFormatError(f"{where}: attribute {name!r} must be an int or a string; got {value!r}.")
            self.kinds[name] = type(value)
            arrow = pa.int64() if isinstance(value, int) else pa.string()
            fields.append(pa.field(attribute_column(name), arrow, nullable=False))
        return pa.schema(fields, metadata=self.header.to_metadata())

    def _image(self, image: bytes | np.ndarray, where: str) -> tuple[bytes, str, int, int, int]:
        if isinstance(image, (bytes, bytearray, memoryview)):
            blob = bytes(image)
            fmt, height, width, channels = sniff_image(blob, where)
            return blob, fmt, height, width, channels
        pixels = np.asarray(image)
        if pixels.ndim == 3 and pixels.shape[-1] == 1:
            pixels = pixels[..., 0]
        if (
            pixels.dtype != np.uint8
            or pixels.ndim not in (2, 3)
            or pixels.ndim == 3
            and pixels.shape[-1] != 3
            or 0 in pixels.shape
        ):
            raise DatasetFormatError(
                f"{where}: pixels must be uint8 [h, w] or [h, w, 1|3]; got {pixels.dtype} {pixels.shape}."
            )
        height, width = pixels.shape[:2]
        channels = 1 if pixels.ndim == 2 else 3
        if self.encode is None:
            return np.ascontiguousarray(pixels).tobytes(), RAW, height, width, channels
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format=self.encode)
        return buffer.getvalue(), self.encode.upper(), height, width, channels

    def _label(self, label: int | Sequence[int], where: str) -> int | list[int]:
        count = len(self.header.class_names)
        if self.header.kind == "single":
            if (
                isinstance(label, (bool, np.bool_))
                or not isinstance(label, (int, np.integer))
                or not 0 <= int(label) < count
            ):
                raise DatasetFormatError(f"{where}: label {label!r} must be a class index in 0..{count - 1}.")
            return int(label)
        positives = [int(v) for v in label]
        if len(set(positives)) != len(positives) or any(not 0 <= v < count for v in positives):
            raise DatasetFormatError(f"{where}: labels {positives} must be distinct class indices in 0..{count - 1}.")
        return sorted(positives)

    def _split(self, number: int, split: str | None, where: str) -> str | None:
        split = split if split is not None else self.given.get(number)
        if split is not None and split not in SPLIT_NAMES:
            raise DatasetFormatError(f"{where}: split {split!r} is not one of {SPLIT_NAMES}.")
        return split


__all__ = [
    "DEFAULT_ROW_GROUP_BYTES",
    "DEFAULT_ROW_GROUP_ROWS",
    "ImageRow",
    "NoRowsError",
    "WrittenDataset",
    "write_parquet_dataset",
]
