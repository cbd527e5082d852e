"""The shard format: a prepared dataset as checksummed ``.npz`` parts plus an index.

Layout in the object store, for dataset ``<source>:<name>`` at task resolution ``S``::

    datasets/<source>/<name>/<S>px/<split>-00000.npz   images, labels, rows, originals, extents
    datasets/<source>/<name>/<S>px/index.json          written last

A shard (format 2) holds ``images`` uint8 ``[n, S, S, 3]`` (the central square of each source
image at S: the reference's evaluation input), ``labels``, ``rows``, ``originals`` uint8
``[n, H, W, 3]`` (aspect ratio kept, long side fitted to the stored side, see
:mod:`workers.stream.images`) and ``extents`` int32 ``[n, 2]`` (each original's valid height
and width). Readers decompress only the members they ask for: the default reads decompress
no more than format 1's (they still fetch and checksum the whole shard).

Guarantees:

- ``index.json`` is written only after every shard is stored, so its presence marks a
  complete dataset; a folder of shards without an index is an interrupted run;
- the index records each shard's key, size, sha256 and example count; every read checks the
  bytes against it (the store checks its own record too) and the arrays against the counts,
  and a mismatch is an :class:`~services.core.errors.DataIntegrityError` naming the shard;
- shard bytes are deterministic (fixed zip timestamps), so preparing the same data twice
  gives the same checksums;
- an index of another format version is refused with a message to re-prepare (``nevis data
  prepare`` rebuilds it), so shards of two formats are never mixed.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from services.core.errors import DataIntegrityError, ObjectNotFoundError
from services.store import key_layout
from services.store.objects.base import ObjectStore
from workers.stream.adapters import split_key
from workers.stream.manifest import SPLITS
from workers.stream.task_info import LabelledData, Originals

# 2: aspect-preserving originals beside the central-square images (1: squashed S x S only).
FORMAT_VERSION = 2
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
    stored_side: int  # long side C the originals were fitted to
    stored_shape: tuple[int, int]  # (H, W) of the originals' canvas
    originals_method: str
    split_rule: Mapping[str, Any]
    split_how: str
    counts: Mapping[str, int]
    shards: Mapping[str, tuple[ShardInfo, ...]]
    dedup: Mapping[str, Any]
    source_checksum: str
    source: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    # seed and buckets of the train rows' stored order (workers.stream.train_order); empty:
    # an index written before train rows were mixed (source order), which prepare rebuilds
    train_order: Mapping[str, Any] = field(default_factory=dict)
    # digest of the deployment's split salt the draws used (workers.stream.split_salt);
    # "" (and absent from the JSON): the public, reproducible splits
    split_salt: str = ""

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
        if not self.split_salt:
            del doc["split_salt"]  # unsalted indexes read as they always have
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, *, key: str) -> DatasetIndex:
        """Parse an index; DataIntegrityError naming ``key`` if it is not a valid index."""
        try:
            doc = json.loads(data)
            if doc["format_version"] != FORMAT_VERSION:
                raise ValueError(
                    f"it was written in shard format {doc['format_version']}, this version "
                    f"reads format {FORMAT_VERSION} only"
                )
            shards = {s: tuple(ShardInfo(**i) for i in doc["shards"][s]) for s in SPLITS}
            return cls(
                dataset=str(doc["dataset"]),
                kind=str(doc["kind"]),
                class_names=tuple(str(n) for n in doc["class_names"]),
                image_size=int(doc["image_size"]),
                resize_method=str(doc["resize_method"]),
                stored_side=int(doc["stored_side"]),
                stored_shape=(int(doc["stored_shape"][0]), int(doc["stored_shape"][1])),
                originals_method=str(doc["originals_method"]),
                split_rule=dict(doc["split_rule"]),
                split_how=str(doc["split_how"]),
                counts={s: int(doc["counts"][s]) for s in SPLITS},
                shards=shards,
                dedup=dict(doc["dedup"]),
                source_checksum=str(doc["source_checksum"]),
                source=dict(doc.get("source", {})),
                train_order=dict(doc.get("train_order", {})),
                split_salt=str(doc.get("split_salt", "")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise DataIntegrityError(
                f"Shard index {key} is unreadable ({exc}); re-run `nevis data prepare` to rebuild the dataset."
            ) from None


def dataset_prefix(dataset: str, image_size: int) -> str:
    """``datasets/<source>/<name>/<S>px``: the folder of one prepared dataset."""
    return key_layout.dataset_prefix(*split_key(dataset), image_size)


def index_key(dataset: str, image_size: int) -> str:
    return key_layout.index_key(dataset_prefix(dataset, image_size))


def encode_shard(images: np.ndarray, labels: np.ndarray, rows: np.ndarray, originals: Originals) -> bytes:
    """An ``.npz`` (deflated) whose bytes depend only on the arrays."""
    buffer = io.BytesIO()
    members = (
        ("images", images),
        ("labels", labels),
        ("rows", rows),
        ("originals", originals.images),
        ("extents", originals.extents),
    )
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in members:
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
    originals: Originals,
    split_rows: Mapping[str, np.ndarray],
    index: DatasetIndex,
    max_examples_per_shard: int = DEFAULT_MAX_EXAMPLES_PER_SHARD,
) -> DatasetIndex:
    """Store each split's rows as shards, then the index (last).

    ``index`` supplies everything but counts and shards, which are filled in here; its
    ``stored_shape`` must be the canvas of ``originals``.

    Returns:
        The index as written.
    """
    if max_examples_per_shard < 1:
        raise ValueError(
            "The 'max_examples_per_shard' parameter of write_dataset must be an int in "
            f"[1, inf). Got {max_examples_per_shard} instead."
        )
    if tuple(originals.images.shape[1:3]) != tuple(index.stored_shape) or len(originals) != len(images):
        raise ValueError(
            f"The 'originals' parameter of write_dataset must hold {len(images)} images on a "
            f"{tuple(index.stored_shape)} canvas (the index's stored_shape). Got "
            f"{originals.images.shape} instead."
        )
    prefix = dataset_prefix(index.dataset, index.image_size)
    shards: dict[str, tuple[ShardInfo, ...]] = {}
    for split in SPLITS:
        rows = np.asarray(split_rows[split], dtype=np.int64)
        parts = []
        for number, start in enumerate(range(0, len(rows), max_examples_per_shard)):
            chunk = rows[start : start + max_examples_per_shard]
            data = encode_shard(images[chunk], labels[chunk], chunk, originals.take(chunk))
            info = store.put_bytes(key_layout.shard_key(prefix, split, number), data)
            parts.append(ShardInfo(info.key, info.size, sha256_hex(data), len(chunk)))
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


def read_split(store: ObjectStore, index: DatasetIndex, split: str) -> tuple[np.ndarray, np.ndarray]:
    """All task-resolution images and labels of one split, every shard checked.

    Returns:
        images uint8 ``[n, S, S, 3]`` (central squares at S) and labels (int64 ``[n]`` or
        uint8 ``[n, K]``).

    Raises:
        DataIntegrityError: a shard is missing, damaged, or does not hold what the index says.
    """
    data = read_labelled(store, index, split, originals=False)
    return data.images, data.labels


def read_labelled(store: ObjectStore, index: DatasetIndex, split: str, *, originals: bool) -> LabelledData:
    """One split as :class:`LabelledData`; with ``originals``, the stored originals too.

    Raises:
        DataIntegrityError: a shard is missing, damaged, or does not hold what the index says.
    """
    if split not in SPLITS:
        raise ValueError(f"The 'split' parameter must be one of {SPLITS}. Got {split!r} instead.")
    parts = [read_shard(store, index, shard, originals) for shard in index.shards[split]]
    if not parts:
        size, (height, width) = index.image_size, index.stored_shape
        label_shape = (0,) if index.kind == "single" else (0, index.num_classes)
        label_dtype = np.int64 if index.kind == "single" else np.uint8
        empty = Originals(np.zeros((0, height, width, 3), np.uint8), np.zeros((0, 2), np.int32))
        return LabelledData(
            np.zeros((0, size, size, 3), np.uint8), np.zeros(label_shape, label_dtype), empty if originals else None
        )
    stored = None
    if originals:
        stored = Originals(np.concatenate([p[2].images for p in parts]), np.concatenate([p[2].extents for p in parts]))
    return LabelledData(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), stored)


def verify_dataset(store: ObjectStore, index: DatasetIndex) -> int:
    """Re-check every shard's bytes against the index; returns the number of shards.

    Raises:
        DataIntegrityError: naming the first shard that is missing or damaged.
    """
    for shard in index.all_shards:
        try:
            info = store.verify(shard.key)
        except (DataIntegrityError, ObjectNotFoundError) as exc:
            raise _damaged(index, shard, str(exc)) from None
        if info.sha256 != shard.sha256 or info.size != shard.size:
            raise _damaged(index, shard, f"store has sha256 {info.sha256}, size {info.size}")
    return len(index.all_shards)


def check_dataset_listed(store: ObjectStore, index: DatasetIndex) -> int:
    """Check that every shard is stored at its indexed size, from one listing of the dataset's
    folder (no shard is read); returns the number of shards. What a task's worker checks before
    its task: hashing every shard of the stream there cost a read of the whole stream per task
    (the store's, on S3 a download), while each shard's bytes are checked on every read anyway.

    Raises:
        DataIntegrityError: naming the first shard that is missing or of another size.
    """
    sizes = {listed.key: listed.size for listed in store.list_objects(dataset_prefix(index.dataset, index.image_size))}
    for shard in index.all_shards:
        if sizes.get(shard.key) != shard.size:
            found = "missing" if shard.key not in sizes else f"{sizes[shard.key]} bytes, not {shard.size}"
            raise _damaged(index, shard, f"store listing: {found}")
    return len(index.all_shards)


# numpy parses each member's header with ast.literal_eval, which CPython 3.11 does not make
# thread-safe ("AST constructor recursion depth mismatch", seen once in CI when a stream's
# reader threads read shards at once): one shard is parsed at a time per process; its
# download and checksum, before the parse, stay concurrent.
_NPZ_LOCK = threading.Lock()


def read_shard(
    store: ObjectStore, index: DatasetIndex, shard: ShardInfo, originals: bool = False
) -> tuple[np.ndarray, np.ndarray, Originals | None]:
    """One shard's images, labels and (with ``originals``) originals, checked against the
    index (DataIntegrityError naming the shard otherwise): the unit a stream reads."""
    try:
        data = store.get_bytes(shard.key)
    except (DataIntegrityError, ObjectNotFoundError) as exc:
        raise _damaged(index, shard, str(exc)) from None
    if sha256_hex(data) != shard.sha256:
        raise _damaged(index, shard, f"its sha256 is {sha256_hex(data)}")
    try:
        with _NPZ_LOCK, np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            images, labels = arrays["images"], arrays["labels"]
            pair = (arrays["originals"], arrays["extents"]) if originals else None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise _damaged(index, shard, f"unreadable npz: {exc}") from None
    n, s = shard.num_examples, index.image_size
    label_shape = (n,) if index.kind == "single" else (n, index.num_classes)
    if images.shape != (n, s, s, 3) or images.dtype != np.uint8 or labels.shape != label_shape:
        raise _damaged(
            index,
            shard,
            f"holds images {images.shape} and labels {labels.shape}, expected {(n, s, s, 3)} and {label_shape}",
        )
    if pair is None:
        return images, labels, None
    expected = (n, *index.stored_shape, 3)
    if pair[0].shape != expected or pair[1].shape != (n, 2):
        raise _damaged(
            index,
            shard,
            f"holds originals {pair[0].shape} and extents {pair[1].shape}, expected {expected} and {(n, 2)}",
        )
    try:
        return images, labels, Originals(pair[0], pair[1].astype(np.int32, copy=False))
    except ValueError as exc:
        raise _damaged(index, shard, str(exc)) from None


def _damaged(index: DatasetIndex, shard: ShardInfo, why: str) -> DataIntegrityError:
    return DataIntegrityError(
        f"Shard {shard.key} of dataset {index.dataset!r} does not match its index "
        f"(expected sha256 {shard.sha256}, {shard.num_examples} examples): {why}. "
        "Re-run `nevis data prepare` to rebuild the dataset."
    )


def sha256_hex(data: bytes) -> str:
    """The checksum an index records of a shard's bytes."""
    return hashlib.sha256(data).hexdigest()


__all__ = [
    "DEFAULT_MAX_EXAMPLES_PER_SHARD",
    "FORMAT_VERSION",
    "DatasetIndex",
    "ShardInfo",
    "check_dataset_listed",
    "dataset_prefix",
    "encode_shard",
    "index_key",
    "load_index",
    "read_labelled",
    "read_shard",
    "read_split",
    "sha256_hex",
    "verify_dataset",
    "write_dataset",
]
