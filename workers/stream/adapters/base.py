"""The adapter contract: turn a dataset key's name into a :class:`RawDataset`.

An adapter knows one *source* (the part of a dataset key before the colon). It can say
whether a dataset is available (:meth:`DatasetAdapter.find`, cheap: no pixels read) and load
it (:meth:`DatasetAdapter.load`). Everything after loading (resizing, splitting, dedup,
sharding) is shared code, so an adapter only has to get the pixels, labels, class names and
any split the source itself provides.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from services.core.errors import DatasetFormatError, InvalidKeyError
from workers.stream.image_rows import ImageRows

DatasetKind = Literal["single", "multi"]

# A dataset name becomes one segment of an object-store key, so it is kept to a safe alphabet.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
OFFLINE_VAR = "NEVIS_OFFLINE_DATA_DIR"


@dataclass(frozen=True)
class AdapterContext:
    """Where adapters may look for local files, and the stored resolution.

    ``image_size`` is the task resolution the dataset is being prepared for; no adapter
    resizes to it (sources whose images differ in size give :class:`ImageRows` instead), but
    a generated source may draw at it.
    """

    offline_dir: Path | None = None
    image_size: int = 64

    def describe_offline_dir(self) -> str:
        """The offline folder as a user would set it, or a note that it is unset."""
        if self.offline_dir is None:
            return f"{OFFLINE_VAR} is not set"
        return f"{OFFLINE_VAR}={self.offline_dir}"


@dataclass(frozen=True)
class GivenSplits:
    """Row-index lists a source ships with its data.

    ``val`` is ``None`` when the source only has an official train / test split.
    ``official`` says the train / test cut is the source's own (not a draw by whoever
    packaged the files), which matters only for documentation.
    """

    train: np.ndarray
    test: np.ndarray
    val: np.ndarray | None = None
    official: bool = False

    @property
    def pool(self) -> np.ndarray:
        """Every non-test row (train and val together), sorted."""
        parts = [self.train] if self.val is None else [self.train, self.val]
        return np.sort(np.concatenate(parts))


@dataclass(frozen=True)
class RawDataset:
    """A dataset as its source gives it, before resizing and splitting.

    ``images`` is uint8 ``[N, H, W, C]`` (C = 1 or 3, any H and W) when every image has one
    shape, else :class:`~workers.stream.image_rows.ImageRows` (each row its own extent, never
    squashed). ``labels`` is int64 ``[N]`` for single-label data or uint8 multi-hot ``[N, K]``
    for multi-label data.
    """

    key: str
    images: np.ndarray | ImageRows
    labels: np.ndarray
    class_names: tuple[str, ...]
    kind: DatasetKind
    source_checksum: str  # sha256 of the source file(s) or of the generated content
    given_splits: GivenSplits | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)  # JSON-able, for the index
    # Per-row facts a split rule may need (a view-angle bin, a subject, a domain): name ->
    # array [N] of ints or strings. Empty when the source gives none.
    attributes: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_raw_arrays(self.key, self.images, self.labels, self.kind, len(self.class_names))
        if self.given_splits is not None:
            check_given_splits(self.key, self.given_splits, len(self.images))
        check_attributes(self.key, self.attributes, len(self.images))

    @property
    def num_examples(self) -> int:
        return len(self.images)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


@dataclass(frozen=True)
class MissingDataset:
    """Why a dataset could not be found, and how a user can provide it."""

    dataset: str
    looked_in: str
    how_to_provide: str  # may say <name> for the dataset's name

    def message(self, name: str) -> str:
        """A one-dataset error message."""
        how = self.how_to_provide.replace("<name>", name)
        return f"Dataset {self.dataset!r} not found ({self.looked_in}); to provide it, {how}."


@runtime_checkable
class DatasetAdapter(Protocol):
    """Reads the datasets of one source."""

    source: str

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        """``None`` if the dataset is available, else what is missing (reads no pixels)."""
        ...

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        """Load the dataset (raises DatasetNotFoundError if :meth:`find` would not be None)."""
        ...


def check_name(source: str, name: str) -> str:
    """Check that a dataset name is a safe single key segment."""
    if not _NAME_RE.match(name):
        raise InvalidKeyError(
            f"Dataset name {name!r} of source {source!r} must start with a letter or digit and "
            "hold only letters, digits, '.', '_' and '-'."
        )
    return name


def content_checksum(*arrays: np.ndarray) -> str:
    """sha256 over the dtype, shape and bytes of each array (for generated data)."""
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def file_checksum(*paths: Path) -> str:
    """sha256 of one file, or of the concatenated sha256s of several files in order."""
    hashes = []
    for path in paths:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        hashes.append(digest.hexdigest())
    if len(hashes) == 1:
        return hashes[0]
    return hashlib.sha256("".join(hashes).encode()).hexdigest()


def as_nhwc(key: str, images: np.ndarray) -> np.ndarray:
    """Accept ``[N, H, W]`` or ``[N, H, W, C]`` uint8 images and return ``[N, H, W, C]``."""
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4:
        raise DatasetFormatError(
            f"Dataset {key!r}: images must have shape [N, H, W] or [N, H, W, C]; got {images.shape}."
        )
    return images


def check_raw_arrays(key: str, images: np.ndarray | ImageRows, labels: np.ndarray, kind: str, num_classes: int) -> None:
    """Raise DatasetFormatError unless the arrays match the RawDataset contract (the pixels of
    ImageRows are checked row by row as they are read)."""
    problem = None
    if not isinstance(images, ImageRows) and (
        images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] not in (1, 3)
    ):
        problem = f"images must be uint8 [N, H, W, 1|3]; got {images.dtype} {images.shape}"
    elif len(images) == 0:
        problem = "it has no examples"
    elif labels.shape[0] != len(images):
        problem = f"{labels.shape[0]} labels for {len(images)} images"
    elif kind == "single":
        if labels.dtype != np.int64 or labels.ndim != 1:
            problem = f"single-label labels must be int64 [N]; got {labels.dtype} {labels.shape}"
        elif labels.min() < 0 or labels.max() >= num_classes:
            problem = (
                f"labels must lie in 0..{num_classes - 1} (one per class name); got {labels.min()}..{labels.max()}"
            )
    elif kind == "multi":
        if labels.dtype != np.uint8 or labels.shape != (len(images), num_classes):
            problem = f"multi-label labels must be uint8 [N, {num_classes}]; got {labels.dtype} {labels.shape}"
        elif labels.max() > 1:
            problem = "multi-hot labels must be 0 or 1"
    else:
        problem = f"kind must be 'single' or 'multi'; got {kind!r}"
    if problem:
        raise DatasetFormatError(f"Dataset {key!r}: {problem}.")


def check_given_splits(key: str, given: GivenSplits, n: int) -> None:
    """Raise DatasetFormatError unless the index lists are in range and disjoint."""
    parts = {"train": given.train, "test": given.test}
    if given.val is not None:
        parts["val"] = given.val
    seen = np.zeros(n, dtype=bool)
    for name, rows in parts.items():
        if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
            raise DatasetFormatError(f"Dataset {key!r}: split {name!r} must be a list of ints.")
        if rows.size and (rows.min() < 0 or rows.max() >= n):
            raise DatasetFormatError(f"Dataset {key!r}: split {name!r} has row ids outside 0..{n - 1}.")
        if seen[rows].any() or len(np.unique(rows)) != len(rows):
            raise DatasetFormatError(f"Dataset {key!r}: split {name!r} repeats rows or shares rows with another split.")
        seen[rows] = True


def check_attributes(key: str, attributes: Mapping[str, np.ndarray], n: int) -> None:
    """Raise DatasetFormatError unless each attribute is one int or string per row."""
    for name, values in attributes.items():
        kind = getattr(values, "dtype", np.dtype(object)).kind
        if values.ndim != 1 or len(values) != n or kind not in "iuU":
            raise DatasetFormatError(
                f"Dataset {key!r}: attribute {name!r} must hold one int or string per row "
                f"({n} rows); got {getattr(values, 'dtype', type(values))} "
                f"{getattr(values, 'shape', '')}."
            )


def dataset_folder(source: str, name: str, ctx: AdapterContext) -> Path | None:
    """``NEVIS_OFFLINE_DATA_DIR/<name>/`` if it exists (for sources read from a folder)."""
    check_name(source, name)
    if ctx.offline_dir is None:
        return None
    folder = ctx.offline_dir / name
    return folder if folder.is_dir() else None


def read_class_names(folder: Path, count: int) -> tuple[str, ...]:
    """Names from ``classes.txt`` (one per line) if the user gave one, else ``"0".."count-1"``."""
    listing = folder / "classes.txt"
    if listing.is_file():
        names = tuple(line.strip() for line in listing.read_text().splitlines() if line.strip())
        if len(names) < count:
            raise DatasetFormatError(f"{listing} lists {len(names)} class names, but the labels need {count}.")
        return names
    return tuple(str(i) for i in range(count))


__all__ = [
    "OFFLINE_VAR",
    "AdapterContext",
    "DatasetAdapter",
    "DatasetKind",
    "GivenSplits",
    "MissingDataset",
    "RawDataset",
    "as_nhwc",
    "check_attributes",
    "check_given_splits",
    "check_name",
    "check_raw_arrays",
    "content_checksum",
    "dataset_folder",
    "file_checksum",
    "read_class_names",
]
