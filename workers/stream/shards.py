"""The shard format: a prepared dataset as checksummed ``.npz`` parts plus an index.

Layout in the object store, for dataset ``<source>:<name>`` at stored size ``S``::

    datasets/<source>/<name>/<S>px/<split>-00000.npz   images uint8 [n,S,S,3], labels, rows
    datasets/<source>/<name>/<S>px/index.json          written last

Guarantees:

- ``index.json`` is written only after every shard is stored, so its presence marks a
  complete dataset; a folder of shards without an index is an interrupted run;
- the index records each shard's key, size, sha256 and example count; every read checks the
  bytes against it (the store checks its own record too) and the arrays against the counts,
  and a mismatch is an :class:`~services.core.errors.IntegrityError` naming the shard;
- shard bytes are deterministic (fixed zip timestamps), so preparing the same data twice
  gives the same checksums.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from services.core.errors import IntegrityError, ObjectNotFoundError
from services.store.objects.base import ObjectStore
from workers.stream.adapters import split_key
from workers.stream.manifest import SPLITS

FORMAT_VERSION = 1
DEFAULT_MAX_EXAMPLES_PER_SHARD = 4096
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class ShardInfo:
    """One stored part of one split."""

    key: str
    size: int
    sha256: str
    num_examples: int


@dataclass(frozen=True)
class DatasetIndex:
    """What ``index.json`` records about a prepared dataset."""

    dataset: str
    kind: str  # "single" or "multi"
    class_names: tuple[str, ...]
    image_size: int
    resize_method: str
    split_rule: Mapping[str, Any]
    split_how: str
    counts: Mapping[str, int]
    shards: Mapping[str, tuple[ShardInfo, ...]]
    dedup: Mapping[str, Any]
    source_checksum: str
    source: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def key(self) -> str:
        """Object-store key of this index."""
        return index_key(self.dataset, self.image_size)

    @property
    def all_shards(self) -> tuple[ShardInfo, ...]:
        return tuple(s for split in SPLITS for s in self.shards[split])

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["num_classes"] = self.num_classes
        doc["class_names"] = list(self.class_names)
        doc["shards"] = {s: [asdict(i) for i in self.shards[s]] for s in SPLITS}
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, *, key: str) -> DatasetIndex:
        """Parse an index; IntegrityError naming ``key`` if it is not a valid index."""
        try:
            doc = json.loads(data)
            if doc["format_version"] != FORMAT_VERSION:
                raise ValueError(f"format_version {doc['format_version']} != {FORMAT_VERSION}")
            shards = {s: tuple(ShardInfo(**i) for i in doc["shards"][s]) for s in SPLITS}
            return cls(
                dataset=str(doc["dataset"]),
                kind=str(doc["kind"]),
                class_names=tuple(str(n) for n in doc["class_names"]),
                image_size=int(doc["image_size"]),
                resize_method=str(doc["resize_method"]),
                split_rule=dict(doc["split_rule"]),
                split_how=str(doc["split_how"]),
                counts={s: int(doc["counts"][s]) for s in SPLITS},
                shards=shards,
                dedup=dict(doc["dedup"]),
                source_checksum=str(doc["source_checksum"]),
                source=dict(doc.get("source", {})),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(
                f"Shard index {key} is unreadable ({exc}); re-run `nevis data prepare` "
                "to rebuild the dataset."
            ) from None


def dataset_prefix(dataset: str, image_size: int) -> str:
    """``datasets/<source>/<name>/<S>px``: the folder of one prepared dataset."""
    source, name = split_key(dataset)
    return f"datasets/{source}/{name}/{image_size}px"


def index_key(dataset: str, image_size: int) -> str:
    return f"{dataset_prefix(dataset, image_size)}/index.json"


def encode_shard(images: np.ndarray, labels: np.ndarray, rows: np.ndarray) -> bytes:
    """An ``.npz`` (deflated) whose bytes depend only on the arrays."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in (("images", images), ("labels", labels), ("rows", rows)):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as handle:
                np.lib.format.write_array(handle, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def write_dataset(
    store: ObjectStore,
    *,
    images: np.ndarray,
    labels: np.ndarray,
    split_rows: Mapping[str, np.ndarray],
    index: DatasetIndex,
    max_examples_per_shard: int = DEFAULT_MAX_EXAMPLES_PER_SHARD,
) -> DatasetIndex:
    """Store each split's rows as shards, then the index (last).

    ``index`` supplies everything but counts and shards, which are filled in here.

    Returns:
        The index as written.
    """
    if max_examples_per_shard < 1:
        raise ValueError(
            "The 'max_examples_per_shard' parameter of write_dataset must be an int in "
            f"[1, inf). Got {max_examples_per_shard} instead."
        )
    prefix = dataset_prefix(index.dataset, index.image_size)
    shards: dict[str, tuple[ShardInfo, ...]] = {}
    for split in SPLITS:
        rows = np.asarray(split_rows[split], dtype=np.int64)
        parts = []
        for number, start in enumerate(range(0, len(rows), max_examples_per_shard)):
            chunk = rows[start : start + max_examples_per_shard]
            data = encode_shard(images[chunk], labels[chunk], chunk)
            info = store.put_bytes(f"{prefix}/{split}-{number:05d}.npz", data)
            parts.append(ShardInfo(info.key, info.size, _sha256(data), len(chunk)))
        shards[split] = tuple(parts)
    counts = {s: sum(p.num_examples for p in shards[s]) for s in SPLITS}
    final = replace(index, counts=counts, shards=shards)
    store.put_bytes(final.key, final.to_json())
    return final


def load_index(store: ObjectStore, dataset: str, image_size: int) -> DatasetIndex | None:
    """The dataset's index, or None when it has not been (completely) prepared."""
    key = index_key(dataset, image_size)
    try:
        data = store.get_bytes(key)
    except ObjectNotFoundError:
        return None
    return DatasetIndex.from_json(data, key=key)


def read_split(
    store: ObjectStore, index: DatasetIndex, split: str
) -> tuple[np.ndarray, np.ndarray]:
    """All images and labels of one split, every shard checked.

    Returns:
        images uint8 ``[n, S, S, 3]`` and labels (int64 ``[n]`` or uint8 ``[n, K]``).

    Raises:
        IntegrityError: a shard is missing, damaged, or does not hold what the index says.
    """
    if split not in SPLITS:
        raise ValueError(f"The 'split' parameter must be one of {SPLITS}. Got {split!r} instead.")
    images, labels = [], []
    for shard in index.shards[split]:
        x, y = _read_shard(store, index, shard)
        images.append(x)
        labels.append(y)
    size = index.image_size
    if not images:
        label_shape = (0,) if index.kind == "single" else (0, index.num_classes)
        label_dtype = np.int64 if index.kind == "single" else np.uint8
        return np.zeros((0, size, size, 3), np.uint8), np.zeros(label_shape, label_dtype)
    return np.concatenate(images), np.concatenate(labels)


def verify_dataset(store: ObjectStore, index: DatasetIndex) -> int:
    """Re-check every shard's bytes against the index; returns the number of shards.

    Raises:
        IntegrityError: naming the first shard that is missing or damaged.
    """
    for shard in index.all_shards:
        try:
            info = store.verify(shard.key)
        except (IntegrityError, ObjectNotFoundError) as exc:
            raise _damaged(index, shard, str(exc)) from None
        if info.sha256 != shard.sha256 or info.size != shard.size:
            raise _damaged(index, shard, f"store has sha256 {info.sha256}, size {info.size}")
    return len(index.all_shards)


def _read_shard(store: ObjectStore, index: DatasetIndex, shard: ShardInfo):
    try:
        data = store.get_bytes(shard.key)
    except (IntegrityError, ObjectNotFoundError) as exc:
        raise _damaged(index, shard, str(exc)) from None
    if _sha256(data) != shard.sha256:
        raise _damaged(index, shard, f"its sha256 is {_sha256(data)}")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            images, labels = arrays["images"], arrays["labels"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise _damaged(index, shard, f"unreadable npz: {exc}") from None
    n, s = shard.num_examples, index.image_size
    label_shape = (n,) if index.kind == "single" else (n, index.num_classes)
    if images.shape != (n, s, s, 3) or images.dtype != np.uint8 or labels.shape != label_shape:
        raise _damaged(
            index, shard, f"holds images {images.shape} and labels {labels.shape}, "
            f"expected {(n, s, s, 3)} and {label_shape}"
        )
    return images, labels


def _damaged(index: DatasetIndex, shard: ShardInfo, why: str) -> IntegrityError:
    return IntegrityError(
        f"Shard {shard.key} of dataset {index.dataset!r} does not match its index "
        f"(expected sha256 {shard.sha256}, {shard.num_examples} examples): {why}. "
        "Re-run `nevis data prepare` to rebuild the dataset."
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = [
    "DEFAULT_MAX_EXAMPLES_PER_SHARD", "FORMAT_VERSION", "DatasetIndex", "ShardInfo",
    "dataset_prefix", "encode_shard", "index_key", "load_index", "read_split", "verify_dataset",
    "write_dataset",
]
