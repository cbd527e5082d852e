"""Dataset adapters: from a dataset key ``"<source>:<name>"`` to a :class:`RawDataset`.

Sources:

- ``sklearn``: data bundled in scikit-learn (``sklearn:digits``);
- ``shapes``: procedural 3dshapes-like scenes (``shapes:shape|hue|scale|multi``);
- ``offline``: ``<name>.npz`` + ``<name>.json`` in ``NEVIS_OFFLINE_DATA_DIR``;
- ``nevis``: the same files, also found by their NEVIS'22 name (the sidecar's ``nevis_name``);
- ``idx``, ``cifar``, ``images``: public download formats a user unpacks into
  ``NEVIS_OFFLINE_DATA_DIR/<name>/`` (never downloaded here);
- ``parquet``: ``<name>.parquet`` in ``NEVIS_OFFLINE_DATA_DIR``, the format for images of
  different sizes (docs/data-format.md); ``nevis:<name>`` finds such a file too.

An unknown source is an :class:`~services.core.errors.UnknownNameError` with a "did you mean".
"""

from __future__ import annotations

from services.core.errors import InvalidKeyError
from services.core.registry import Registry
from workers.stream.adapters.base import AdapterContext, DatasetAdapter, GivenSplits, MissingDataset, RawDataset
from workers.stream.adapters.cifar import CifarAdapter
from workers.stream.adapters.idx import IdxAdapter
from workers.stream.adapters.image_folder import ImageFolderAdapter
from workers.stream.adapters.npz_folder import NpzFolderAdapter
from workers.stream.adapters.parquet_file import ParquetAdapter
from workers.stream.adapters.shapes import ShapesAdapter
from workers.stream.adapters.sklearn_digits import SklearnAdapter

__all__ = [
    "ADAPTERS",
    "AdapterContext",
    "DatasetAdapter",
    "GivenSplits",
    "MissingDataset",
    "RawDataset",
    "find_dataset",
    "get_adapter",
    "load_dataset",
    "split_key",
]

ADAPTERS: Registry[DatasetAdapter] = Registry("dataset source")
for _adapter in (
    SklearnAdapter(),
    ShapesAdapter(),
    NpzFolderAdapter("offline", match_nevis_names=False),
    NpzFolderAdapter("nevis", match_nevis_names=True),
    IdxAdapter(),
    CifarAdapter(),
    ImageFolderAdapter(),
    ParquetAdapter(),
):
    ADAPTERS.register(_adapter.source, _adapter)


def split_key(key: str) -> tuple[str, str]:
    """``"source:name"`` → ``("source", "name")``.

    Raises:
        InvalidKeyError: the key has no colon or an empty part.
    """
    source, sep, name = key.partition(":")
    if not sep or not source or not name:
        raise InvalidKeyError(f"Dataset key {key!r} must look like '<source>:<name>', e.g. 'sklearn:digits'.")
    return source, name


def get_adapter(source: str) -> DatasetAdapter:
    """The adapter of a source, or UnknownNameError with close matches."""
    return ADAPTERS.get(source)


def find_dataset(key: str, ctx: AdapterContext) -> MissingDataset | None:
    """``None`` if the dataset can be loaded, else what is missing (reads no pixels)."""
    source, name = split_key(key)
    return get_adapter(source).find(name, ctx)


def load_dataset(key: str, ctx: AdapterContext) -> RawDataset:
    """Load a dataset by key (raises DatasetNotFoundError if it is missing)."""
    source, name = split_key(key)
    return get_adapter(source).load(name, ctx)
