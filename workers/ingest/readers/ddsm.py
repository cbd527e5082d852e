"""CBIS-DDSM (Kaggle ``awsaf49/cbis-ddsm-breast-cancer-image-dataset``), as the dm_nevis
handler merges it: the calc and mass case descriptions (train and test CSVs) joined on the
patient id (the first part of ``image file path``) with ``csv/dicom_info.csv``'s
``PatientID``, one row per distinct ``jpeg/<series>/<file>`` image (the first case row of an
image gives its ``pathology``: benign, malignant, benign without callback). The train CSVs
are the train split, the test CSVs the test split.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import PurePosixPath

import pandas as pd

from services.core.errors import DatasetFormatError
from workers.ingest.readers.base import ConvertedSource, SourceFolder, reader
from workers.ingest.writers.parquet_writer import ImageRow

CLASSES = ("BENIGN", "MALIGNANT", "BENIGN_WITHOUT_CALLBACK")
_CASES = {
    "train": ("csv/calc_case_description_train_set.csv", "csv/mass_case_description_train_set.csv"),
    "test": ("csv/calc_case_description_test_set.csv", "csv/mass_case_description_test_set.csv"),
}


def _jpeg_path(path: str) -> str:
    """``CBIS-DDSM/jpeg/<series>/<file>.jpg`` -> ``jpeg/<series>/<file>.jpg``."""
    parts = PurePosixPath(path)
    return f"jpeg/{parts.parent.name}/{parts.name}"


def ddsm_images(handle: zipfile.ZipFile) -> list[tuple[str, int, str]]:
    """(image path in the zip, class, split) of every image, in the reference's order."""
    dicom = pd.read_csv(handle.open("csv/dicom_info.csv"))
    dicom["extracted_patient_id"] = dicom["PatientID"]
    dicom["image_path"] = dicom["image_path"].apply(_jpeg_path)
    out = []
    for split, names in _CASES.items():
        cases = pd.concat([pd.read_csv(handle.open(n)) for n in names])
        cases["extracted_patient_id"] = cases["image file path"].apply(lambda p: p.split("/")[0])
        merged = pd.merge(cases, dicom, on="extracted_patient_id", how="inner")
        merged = merged.drop_duplicates(subset="image_path", ignore_index=True)
        for path, pathology in zip(merged["image_path"], merged["pathology"]):
            if pathology not in CLASSES:
                raise DatasetFormatError(f"DDSM: pathology {pathology!r} is not one of {CLASSES}.")
            out.append((path, CLASSES.index(pathology), split))
    return out


@reader("ddsm")
def read_ddsm(files: SourceFolder) -> ConvertedSource:
    archive = files.path("cbis-ddsm-breast-cancer-image-dataset.zip")
    with zipfile.ZipFile(archive) as handle:
        images = ddsm_images(handle)

    def rows() -> Iterator[ImageRow]:
        with zipfile.ZipFile(archive) as handle:
            for path, label, split in images:
                yield ImageRow(image=handle.read(path), label=label, split=split)

    return ConvertedSource(
        rows=rows(),
        class_names=CLASSES,
        official_split=True,
        source_facts={"labels": "case descriptions' pathology, joined to dicom_info.csv on the patient id"},
    )


__all__ = ["CLASSES", "ddsm_images"]
