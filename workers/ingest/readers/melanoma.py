"""ISIC 2017 melanoma classification: three image zips, each with a Part 3 ground-truth CSV.

A CSV row ``image_id,melanoma,seborrheic_keratosis`` names ``<zip stem>/<image_id>.jpg`` in
its zip; melanoma -> class 0, seborrheic keratosis -> 1, neither -> benign nevi (2), both is
an error, as in the dm_nevis handler. Training, Validation and Test_v2 are the source's
train, val and test (the stream's rule: train drawn 80/20 into train/dev, val is dev-test).
Other zip members (superpixel masks, metadata) are not read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.writers.parquet_writer import ImageRow

CLASSES = ("melanoma", "seborrheic keratosis", "benign nevi")
PARTS = (  # (images zip, ground truth CSV, split)
    ("ISIC-2017_Training_Data.zip", "ISIC-2017_Training_Part3_GroundTruth.csv", "train"),
    ("ISIC-2017_Validation_Data.zip", "ISIC-2017_Validation_Part3_GroundTruth.csv", "val"),
    ("ISIC-2017_Test_v2_Data.zip", "ISIC-2017_Test_v2_Part3_GroundTruth.csv", "test"),
)


def ground_truth(csv: Path, zip_name: str) -> dict[str, int]:
    """Zip member path -> class index, from a Part 3 ground-truth CSV."""
    table = pd.read_csv(csv, dtype={"image_id": str})
    missing = {"image_id", "melanoma", "seborrheic_keratosis"} - set(table.columns)
    if missing:
        raise DatasetFormatError(f"{csv.name} lacks the column(s) {sorted(missing)}.")
    root = Path(zip_name).stem
    labels: dict[str, int] = {}
    for image_id, mel, sk in zip(table["image_id"], table["melanoma"], table["seborrheic_keratosis"]):
        mel, sk = float(mel) == 1, float(sk) == 1
        if mel and sk:
            raise DatasetFormatError(f"{csv.name}: {image_id} is both melanoma and seborrheic keratosis.")
        labels[f"{root}/{image_id}.jpg"] = 0 if mel else 1 if sk else 2
    return labels


def _rows(path: Path, labels: dict[str, int], split: str) -> Iterator[ImageRow]:
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        absent = sorted(set(labels) - names)
        if absent:
            raise DatasetFormatError(
                f"{path.name} lacks {len(absent)} image(s) its ground truth lists, e.g. {absent[0]}."
            )
        for name in sorted(labels):
            yield ImageRow(image=archive.read(name), label=labels[name], split=split)


@reader("melanoma")
def read_melanoma(files: SourceFolder) -> ConvertedSource:
    parts = [(files.path(z), ground_truth(files.path(c), z), s) for z, c, s in PARTS]

    def rows() -> Iterator[ImageRow]:
        for path, labels, split in parts:
            yield from _rows(path, labels, split)

    return ConvertedSource(
        rows=rows(),
        class_names=CLASSES,
        official_split=True,
        source_facts={
            "labels": "Part 3 ground truth CSVs",
            "reference_dev": "the reference draws dev as the last 20% of a default_rng(1) permutation of Training",
        },
    )


__all__ = ["CLASSES", "PARTS", "ground_truth"]
