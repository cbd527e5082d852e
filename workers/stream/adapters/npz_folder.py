"""Datasets stored as ``<name>.npz`` + ``<name>.json`` in ``NEVIS_OFFLINE_DATA_DIR``.

This is the format of the offline datasets (see the README beside them) and the format in
which users bring their own data:

- ``<name>.npz`` holds ``images`` (uint8 ``[N, H, W]`` or ``[N, H, W, C]``, C = 1 or 3) and
  ``labels`` (int64 ``[N]`` with values ``0 .. num_classes-1``, or uint8 multi-hot
  ``[N, K]``);
- ``<name>.json`` holds at least ``class_names``; optionally ``split`` with ``train`` / ``val``
  / ``test`` row-index lists, ``npz_sha256`` (checked when present) and ``attributes``
  (per-row values some split rules need; see :mod:`workers.stream.adapters.attributes`).

Two sources share this reader. ``offline:<name>`` means exactly those two files. ``nevis:<name>``
names a dataset the way the NEVIS'22 stream does: ``<name>.parquet`` (the format of sources
whose images differ in size, read by :mod:`.parquet_file`) wins where it exists; the pair is
also found through a sidecar whose
``nevis_name`` (or ``name`` / ``title``) matches after normalising case and punctuation
(``nevis:olivetti_face`` finds ``orl_faces.json``, whose ``nevis_name`` is "Olivetti Face
Dataset").
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from services.core.errors import DataIntegrityError, DatasetFormatError, DatasetNotFoundError
from workers.stream.adapters.attributes import read_attributes
from workers.stream.adapters.base import (
    AdapterContext,
    GivenSplits,
    MissingDataset,
    RawDataset,
    as_nhwc,
    check_name,
    file_checksum,
)
from workers.stream.adapters.parquet_file import parquet_path, read_parquet_dataset
from workers.stream.formats.parquet_layout import SUFFIX as PARQUET_SUFFIX

HOW_TO_PROVIDE = (
    "put <name>.npz (arrays 'images' uint8 [N,H,W,C] and 'labels' int64 [N]) and <name>.json "
    "(at least 'class_names'; optionally 'split' with train/val/test row lists) in "
    "NEVIS_OFFLINE_DATA_DIR, in the format its README describes"
)
NEVIS_HINT = (
    "; a pair whose JSON 'nevis_name' is the NEVIS'22 name also counts, and so does "
    "<name>.parquet (images of any size, docs/data-format.md), read first"
)
# Sidecar fields copied into the shard index, so a result can be traced to its source.
_META_FIELDS = (
    "name",
    "title",
    "nevis_name",
    "year_introduced",
    "domain",
    "source",
    "license",
    "original_resolution",
    "stored_resolution",
    "preprocessing",
    "npz_sha256",
)


class NpzFolderAdapter:
    """Reads ``<name>.npz`` + ``<name>.json`` pairs from the offline data folder."""

    def __init__(self, source: str, *, match_nevis_names: bool) -> None:
        self.source = source
        self.match_nevis_names = match_nevis_names

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        if self._locate(name, ctx) is not None:
            return None
        return MissingDataset(
            dataset=f"{self.source}:{name}",
            looked_in=ctx.describe_offline_dir(),
            how_to_provide=HOW_TO_PROVIDE + (NEVIS_HINT if self.match_nevis_names else ""),
        )

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        found = self._locate(name, ctx)
        if found is None:
            missing = self.find(name, ctx)
            raise DatasetNotFoundError(missing.message(name))
        if found.suffix == PARQUET_SUFFIX:
            return read_parquet_dataset(found, key=f"{self.source}:{name}")
        return read_npz_pair(found, key=f"{self.source}:{name}")

    def _locate(self, name: str, ctx: AdapterContext) -> Path | None:
        """The ``.npz`` path of the dataset (for ``nevis``, a ``<name>.parquet`` first), or None."""
        check_name(self.source, name)
        folder = ctx.offline_dir
        if folder is None or not folder.is_dir():
            return None
        if self.match_nevis_names and (parquet := parquet_path(self.source, name, ctx)):
            return parquet
        direct = folder / f"{name}.npz"
        if direct.is_file() and direct.with_suffix(".json").is_file():
            return direct
        if not self.match_nevis_names:
            return None
        wanted = normalise_name(name)
        for stem, aliases in _sidecar_aliases(folder.resolve()):
            npz = folder / f"{stem}.npz"
            if wanted in aliases and npz.is_file():
                return npz
        return None


def normalise_name(text: str) -> str:
    """Lower case, letters and digits only, without a trailing 'dataset' / 'database'."""
    flat = re.sub(r"[^a-z0-9]", "", text.lower())
    return re.sub(r"(dataset|database)$", "", flat) or flat


def _sidecar_aliases(folder: Path) -> tuple[tuple[str, frozenset[str]], ...]:
    """(file stem, names it answers to) for every sidecar in ``folder``, sorted by stem."""
    stamps = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.json")) if p.is_file())
    return _aliases_cached(folder, stamps)


@lru_cache(maxsize=8)
def _aliases_cached(folder: Path, stamps: tuple[tuple[str, int], ...]):  # noqa: ANN202
    out = []
    for file_name, _ in stamps:
        path = folder / file_name
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not a sidecar; reading it for real reports the problem
        if not isinstance(meta, dict):
            continue
        names = {path.stem}
        names.update(str(meta[k]) for k in ("name", "nevis_name", "title") if meta.get(k))
        out.append((path.stem, frozenset(normalise_name(n) for n in names)))
    return tuple(out)


def read_npz_pair(npz_path: Path, *, key: str) -> RawDataset:
    """Read one ``.npz`` + ``.json`` pair into a :class:`RawDataset`.

    Raises:
        DataIntegrityError: the npz does not match the sidecar's ``npz_sha256``, or is unreadable.
        DatasetFormatError: arrays or sidecar fields do not follow the format.
    """
    json_path = npz_path.with_suffix(".json")
    try:
        meta = json.loads(json_path.read_text())
    except (OSError, ValueError) as exc:
        raise DatasetFormatError(f"Dataset {key!r}: cannot read {json_path}: {exc}") from None
    if not isinstance(meta, dict):
        raise DatasetFormatError(f"Dataset {key!r}: {json_path} must hold a JSON object.")
    checksum = file_checksum(npz_path)
    expected = meta.get("npz_sha256")
    if expected and expected != checksum:
        raise DataIntegrityError(
            f"Dataset {key!r}: {npz_path} has sha256 {checksum}, but {json_path.name} records "
            f"{expected}; the file is damaged or was replaced. Restore the original file."
        )
    try:
        with np.load(npz_path, allow_pickle=False) as arrays:
            images, labels = arrays["images"], arrays["labels"]
    except (OSError, ValueError, KeyError) as exc:
        raise DataIntegrityError(
            f"Dataset {key!r}: cannot read arrays 'images' and 'labels' from {npz_path}: {exc}"
        ) from None
    class_names = _class_names(key, meta, labels)
    kind = "multi" if labels.ndim == 2 else "single"
    if kind == "single" and labels.dtype != np.int64:
        if not np.issubdtype(labels.dtype, np.integer):
            raise DatasetFormatError(f"Dataset {key!r}: labels must be integers; got {labels.dtype}.")
        labels = labels.astype(np.int64)
    return RawDataset(
        key=key,
        images=as_nhwc(key, images),
        labels=labels,
        class_names=class_names,
        kind=kind,
        source_checksum=checksum,
        given_splits=_given_splits(key, meta.get("split")),
        metadata={"file": npz_path.name, **{k: meta[k] for k in _META_FIELDS if k in meta}},
        attributes=read_attributes(key, meta, int(labels.shape[0])),
    )


def _class_names(key: str, meta: dict[str, Any], labels: np.ndarray) -> tuple[str, ...]:
    names = meta.get("class_names")
    if names is None:
        count = labels.shape[1] if labels.ndim == 2 else int(labels.max()) + 1
        count = int(meta.get("num_classes", count))
        return tuple(str(i) for i in range(count))
    if not isinstance(names, list) or not names:
        raise DatasetFormatError(f"Dataset {key!r}: 'class_names' must be a non-empty list.")
    if "num_classes" in meta and meta["num_classes"] != len(names):
        raise DatasetFormatError(
            f"Dataset {key!r}: num_classes is {meta['num_classes']} but class_names lists {len(names)} names."
        )
    return tuple(str(n) for n in names)


def _given_splits(key: str, block: Any) -> GivenSplits | None:
    if block is None:
        return None
    if not isinstance(block, dict) or "train" not in block or "test" not in block:
        raise DatasetFormatError(
            f"Dataset {key!r}: 'split' must be an object with 'train' and 'test' row lists (and optionally 'val')."
        )

    def rows(name: str) -> np.ndarray:
        values = block[name]
        if not isinstance(values, list) or not all(isinstance(v, int) for v in values):
            raise DatasetFormatError(f"Dataset {key!r}: split {name!r} must be a list of ints.")
        return np.asarray(values, dtype=np.int64)

    rule = str(block.get("rule", "")).lower()
    return GivenSplits(
        train=rows("train"),
        test=rows("test"),
        val=rows("val") if block.get("val") is not None else None,
        official="official" in rule,
    )


__all__ = ["HOW_TO_PROVIDE", "NEVIS_HINT", "NpzFolderAdapter", "normalise_name", "read_npz_pair"]
