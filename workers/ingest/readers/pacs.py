"""PACS: twelve HDF5 files (``images`` BGR uint8 [N, 227, 227, 3], ``labels`` 1..7), three per
domain (the authors' train, val and test lists, the test file holding the whole domain).

As in the dm_nevis handler: images become RGB, labels 0..6, and each group of domains (photo +
art_painting + cartoon, and sketch) is de-duplicated on (pixels, label), which folds the
three files of a domain into the domain once. ``attr.domain`` carries the domain for the
stream's ``held_out`` rule.

The reference finds a file's domain in its name; Google Drive names the files only when they
are downloaded, and the catalogue stores them as ``gdrive-<id>``. A name holding a domain is
used as it is; otherwise the files are grouped by the images they share (a domain's train and
val files are subsets of its test file), and the four groups, ordered by size, are PACS's
domains in the order of their published sizes: photo (1,670 images) < art_painting (2,048) <
cartoon (2,344) < sketch (3,929).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.writers.parquet_writer import ImageRow

CLASSES = ("dog", "elephant", "giraffe", "guitar", "horse", "house", "person")
DOMAINS_BY_SIZE = ("photo", "art_painting", "cartoon", "sketch")
GROUPS = (("photo", "art_painting", "cartoon"), ("sketch",))


def _h5(path: Path):  # noqa: ANN202 - an h5py.File
    import h5py  # noqa: PLC0415 (only PACS needs HDF5)

    handle = h5py.File(path, "r")
    if "images" not in handle or "labels" not in handle:
        handle.close()
        raise DatasetFormatError(f"{path.name} is not a PACS HDF5 file (no 'images' and 'labels' datasets).")
    return handle


def _examples(path: Path) -> Iterator[tuple[np.ndarray, int]]:
    """(RGB uint8 pixels, label 0..6) of each image of a file, one read at a time."""
    with _h5(path) as handle:
        images, labels = handle["images"], handle["labels"]
        for i in range(len(labels)):
            label = int(np.asarray(labels[i]).reshape(-1)[0]) - 1
            if not 0 <= label < len(CLASSES):
                raise DatasetFormatError(f"{path.name}: image {i} has label {label + 1}, not 1..7.")
            pixels = np.asarray(images[i])[..., ::-1].astype(np.uint8)
            yield np.ascontiguousarray(pixels), label


def _digest(pixels: np.ndarray) -> bytes:
    return hashlib.md5(pixels.tobytes()).digest()  # noqa: S324 - identity, not security


def domains_by_name(paths: list[Path]) -> dict[Path, str] | None:
    """Each file's domain from its name, when every name holds exactly one."""
    found = {}
    for path in paths:
        hits = [d for d in DOMAINS_BY_SIZE if d in path.name]
        if len(hits) != 1:
            return None
        found[path] = hits[0]
    return found


def domains_by_content(paths: list[Path]) -> dict[Path, str]:
    """Each file's domain from the images the files share (see the module doc).

    Raises:
        DatasetFormatError: the files do not fall into four groups.
    """
    digests = {p: {_digest(px) for px, _ in _examples(p)} for p in paths}
    group = {p: i for i, p in enumerate(paths)}
    for a in paths:
        for b in paths:
            smaller = min(len(digests[a]), len(digests[b])) or 1
            if group[a] != group[b] and len(digests[a] & digests[b]) * 2 > smaller:
                old, new = group[b], group[a]
                group = {p: new if g == old else g for p, g in group.items()}
    members: dict[int, list[Path]] = {}
    for path, g in group.items():
        members.setdefault(g, []).append(path)
    if len(members) != len(DOMAINS_BY_SIZE):
        raise DatasetFormatError(
            f"PACS: the {len(paths)} files share images in {len(members)} groups, not 4 "
            "domains; name each file after its domain (e.g. photo_train.hdf5) and convert again."
        )
    sizes = {g: len(set().union(*(digests[p] for p in ps))) for g, ps in members.items()}
    order = sorted(members, key=lambda g: sizes[g])
    return {p: DOMAINS_BY_SIZE[order.index(g)] for p, g in group.items()}


@reader("pacs")
def read_pacs(files: SourceFolder) -> ConvertedSource:
    paths = [files.path(f.name) for f in files.source.files]
    by_name = domains_by_name(paths)
    domain_of = by_name if by_name is not None else domains_by_content(paths)

    def rows() -> Iterator[ImageRow]:
        for domains in GROUPS:
            seen: set[tuple[bytes, int]] = set()
            for path in paths:
                if domain_of[path] not in domains:
                    continue
                for pixels, label in _examples(path):
                    key = (_digest(pixels), label)
                    if key not in seen:
                        seen.add(key)
                        yield ImageRow(image=pixels, label=label, attributes={"domain": domain_of[path]})

    how = "file names" if by_name is not None else "shared images, groups ordered by size"
    return ConvertedSource(
        rows=rows(),
        class_names=CLASSES,
        source_facts={
            "labels": "HDF5 labels - 1; BGR made RGB; de-duplicated per domain group",
            "attributes": {"domain": f"photo / art_painting / cartoon / sketch, by {how}"},
        },
    )


__all__ = ["CLASSES", "DOMAINS_BY_SIZE", "domains_by_content", "domains_by_name"]
