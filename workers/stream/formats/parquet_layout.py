"""The Parquet dataset format: one file per dataset, one row per image (docs/data-format.md).

Columns (``REQUIRED`` always, one of the label columns, the rest optional):

- ``image`` binary: the image, encoded (PNG, JPEG, or any format Pillow reads) or, where
  ``encoding`` is ``raw``, its uint8 pixels row-major ``[height, width, channels]``;
- ``encoding`` string: ``raw`` or the encoded format's name (``PNG``, ``JPEG``, ...);
- ``height``, ``width`` int32: the image's extent, so readers know every geometry without
  decoding; ``channels`` int8: 1 (grey) or 3;
- ``label`` int64 (single-label: the class index) or ``labels`` list<int32> (multi-label: the
  indices of the positive classes);
- ``split`` string (nullable): the source's own split of the row, ``train`` / ``val`` /
  ``test``, or null where the source gives none;
- ``attr.<name>`` int64 or string: per-row facts a split rule may need (a subject, a view
  angle bin, a domain).

The file's key-value metadata ``nevis.dataset`` holds a JSON object: ``format``
(``FORMAT_NAME``), ``version``, ``kind`` (``single`` | ``multi``), ``class_names``,
``official_split`` (the ``split`` column is the source's published split) and ``source``
(free JSON, copied into the shard index: where the data came from).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.core.errors import DatasetFormatError

FORMAT_NAME = "nevis-images"
FORMAT_VERSION = 1
METADATA_KEY = b"nevis.dataset"
SUFFIX = ".parquet"
IMAGE, ENCODING, HEIGHT, WIDTH, CHANNELS = "image", "encoding", "height", "width", "channels"
LABEL, LABELS, SPLIT = "label", "labels", "split"
REQUIRED = (IMAGE, ENCODING, HEIGHT, WIDTH, CHANNELS)
ATTRIBUTE_PREFIX = "attr."
RAW = "raw"
SPLIT_NAMES = ("train", "val", "test")


@dataclass(frozen=True)
class DatasetHeader:
    """What a Parquet dataset says about itself (its ``nevis.dataset`` metadata)."""

    kind: str
    class_names: tuple[str, ...]
    official_split: bool = False
    source: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("single", "multi"):
            raise ValueError(f"The 'kind' parameter must be 'single' or 'multi'. Got {self.kind!r} instead.")
        if not self.class_names or not all(isinstance(n, str) for n in self.class_names):
            raise ValueError("The 'class_names' parameter must be a non-empty list of strings.")

    @property
    def label_column(self) -> str:
        return LABEL if self.kind == "single" else LABELS

    def to_metadata(self) -> dict[bytes, bytes]:
        doc = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "class_names": list(self.class_names),
            "official_split": self.official_split,
            "source": dict(self.source),
        }
        return {METADATA_KEY: json.dumps(doc, sort_keys=True).encode()}

    @classmethod
    def from_metadata(cls, metadata: Mapping[bytes, bytes] | None, where: str) -> DatasetHeader:
        """Parse a file's metadata; DatasetFormatError naming ``where`` if it is not ours."""
        raw = (metadata or {}).get(METADATA_KEY)
        if raw is None:
            raise DatasetFormatError(
                f"{where} has no {METADATA_KEY.decode()!r} metadata: it was "
                "not written as a NEVIS image dataset (docs/data-format.md)."
            )
        try:
            doc = json.loads(raw)
            if doc.get("format") != FORMAT_NAME or doc.get("version") != FORMAT_VERSION:
                raise ValueError(
                    f"format {doc.get('format')!r} version {doc.get('version')!r}, "
                    f"this version reads {FORMAT_NAME!r} version {FORMAT_VERSION}"
                )
            return cls(
                kind=doc["kind"],
                class_names=tuple(doc["class_names"]),
                official_split=bool(doc.get("official_split", False)),
                source=dict(doc.get("source", {})),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise DatasetFormatError(f"{where}: unreadable dataset metadata ({exc}).") from None


def attribute_column(name: str) -> str:
    """The column of attribute ``name``."""
    return ATTRIBUTE_PREFIX + name


def attribute_names(columns: Sequence[str]) -> tuple[str, ...]:
    """The attributes a file's columns hold, in column order."""
    return tuple(c[len(ATTRIBUTE_PREFIX) :] for c in columns if c.startswith(ATTRIBUTE_PREFIX))


__all__ = [
    "ATTRIBUTE_PREFIX",
    "CHANNELS",
    "ENCODING",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "HEIGHT",
    "IMAGE",
    "LABEL",
    "LABELS",
    "METADATA_KEY",
    "RAW",
    "REQUIRED",
    "SPLIT",
    "SPLIT_NAMES",
    "SUFFIX",
    "WIDTH",
    "DatasetHeader",
    "attribute_column",
    "attribute_names",
]
