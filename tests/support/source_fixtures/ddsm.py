"""A tiny CBIS-DDSM Kaggle zip: JPEGs, dicom_info.csv and the four case description CSVs."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny_archives import image_bytes, write_zip

CASES = {  # patient id -> (split, pathology of its case rows, in order)
    "Calc-Training_P_00005_RIGHT_CC": ("train", ["MALIGNANT", "BENIGN"]),
    "Mass-Training_P_00001_LEFT_MLO": ("train", ["BENIGN_WITHOUT_CALLBACK"]),
    "Calc-Test_P_00038_LEFT_CC": ("test", ["BENIGN"]),
    "Mass-Test_P_00016_LEFT_CC": ("test", ["MALIGNANT"]),
}


def write_ddsm(folder: Path) -> dict[str, tuple[str, str]]:
    members: dict[str, bytes] = {}
    dicom = ["file_path,image_path,PatientID,SeriesDescription"]
    expected = {}
    for n, (patient, (split, pathologies)) in enumerate(CASES.items()):
        series = f"1.3.6.1.4.1.9590.100.1.2.{n}"
        image = f"jpeg/{series}/1-{n}.jpg"
        members[image] = image_bytes(40, 50 + n, seed=n, mode="L", fmt="JPEG")
        dicom.append(f"CBIS-DDSM/dicom/{n}.dcm,CBIS-DDSM/{image},{patient},full mammogram images")
        roi = f"jpeg/{series}9/2-{n}.jpg"  # a ROI image under another PatientID: not joined
        members[roi] = image_bytes(8, 8, seed=50 + n, mode="L", fmt="JPEG")
        dicom.append(f"CBIS-DDSM/dicom/r{n}.dcm,CBIS-DDSM/{roi},{patient}_1,ROI mask images")
        expected[image] = (pathologies[0], split)
    members["csv/dicom_info.csv"] = ("\n".join(dicom) + "\n").encode()
    header = "patient_id,breast density,pathology,image file path"
    for split in ("train", "test"):
        for kind, prefix in (("calc", "Calc"), ("mass", "Mass")):
            rows = [header]
            for patient, (part, pathologies) in CASES.items():
                if part == split and patient.startswith(prefix):
                    rows += [f"P,3,{p},{patient}/1.3.6/000000.dcm" for p in pathologies]
            members[f"csv/{kind}_case_description_{split}_set.csv"] = ("\n".join(rows) + "\n").encode()
    members["csv/meta.csv"] = b"SeriesInstanceUID\n"
    write_zip(folder / "cbis-ddsm-breast-cancer-image-dataset.zip", members)
    return expected


__all__ = ["write_ddsm"]
