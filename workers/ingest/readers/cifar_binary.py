"""CIFAR-10 and CIFAR-100, binary version (``cifar-1x-binary.tar.gz``), as TFDS reads them.

CIFAR-10: ``cifar-10-batches-bin/data_batch_{1..5}.bin`` (train) and ``test_batch.bin``,
records of one label byte and a 3x32x32 image; names in ``batches.meta.txt``. CIFAR-100:
``cifar-100-binary/train.bin`` and ``test.bin``, records of a coarse and a fine label byte;
the fine label is the class (``fine_label_names.txt``), the coarse one is kept as the row
attribute ``coarse_label``. The tar is read twice (names, then records), never extracted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.readers.layouts import cifar_records, iter_members
from workers.ingest.writers.parquet_writer import ImageRow


def _names(archive: Path, file_name: str) -> list[str]:
    for member in iter_members(archive, lambda n: PurePosixPath(n).name == file_name):
        return [line.strip() for line in member.data.decode().splitlines() if line.strip()]
    raise ValueError(f"{archive.name} has no {file_name}.")


def _split_of(name: str) -> str | None:
    stem = PurePosixPath(name).stem
    if stem.startswith(("data_batch", "train")):
        return "train"
    if stem.startswith(("test_batch", "test")):
        return "test"
    return None


def _rows(archive: Path, label_bytes: int) -> Iterator[ImageRow]:
    batches = iter_members(archive, lambda n: n.endswith(".bin") and _split_of(n) is not None)
    for member in batches:
        split = _split_of(member.name)
        for labels, image in cifar_records(member.data, label_bytes, member.name):
            if label_bytes == 1:
                yield ImageRow(image=image, label=labels[0], split=split)
            else:
                yield ImageRow(image=image, label=labels[1], split=split, attributes={"coarse_label": labels[0]})


@reader("cifar10")
def read_cifar10(files: SourceFolder) -> ConvertedSource:
    archive = files.path("cifar-10-binary.tar.gz")
    return ConvertedSource(rows=_rows(archive, 1), class_names=_names(archive, "batches.meta.txt"), official_split=True)


@reader("cifar100")
def read_cifar100(files: SourceFolder) -> ConvertedSource:
    archive = files.path("cifar-100-binary.tar.gz")
    coarse = _names(archive, "coarse_label_names.txt")
    return ConvertedSource(
        rows=_rows(archive, 2),
        class_names=_names(archive, "fine_label_names.txt"),
        official_split=True,
        source_facts={"coarse_label_names": coarse},
    )


__all__ = ["read_cifar10", "read_cifar100"]
