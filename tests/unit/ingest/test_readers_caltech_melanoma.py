"""Caltech categories (tars in zips) and ISIC 2017 melanoma (zips + ground-truth CSVs)."""

from __future__ import annotations

import pytest

from services.core.errors import DatasetFormatError
from tests.support.source_fixtures.caltech_melanoma import write_caltech_categories, write_melanoma
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


def test_caltech_categories_labels_by_archive_and_skips_readme_and_mat(tmp_path):
    raw, expected = convert_fixture("caltech_categories", write_caltech_categories, tmp_path)
    assert raw.class_names == ("car", "motorcycle")
    assert row_facts(raw) == expected_facts(expected)
    assert raw.given_splits is None
    assert sum(split_by_stream(raw, "caltech_categories").counts.values()) == 9


def test_melanoma_three_classes_and_the_official_parts(tmp_path):
    raw, expected = convert_fixture("melanoma", write_melanoma, tmp_path)
    assert raw.class_names == ("melanoma", "seborrheic keratosis", "benign nevi")
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, "melanoma").counts
    assert counts["dev_test"] == 2 and counts["test"] == 3 and counts["train"] + counts["dev"] == 5


def test_melanoma_refuses_a_row_of_two_classes(tmp_path):
    def writer(folder):
        write_melanoma(folder)
        csv = folder / "ISIC-2017_Validation_Part3_GroundTruth.csv"
        csv.write_text(csv.read_text().replace("ISIC_0001770,0.0,0.0", "ISIC_0001770,1.0,1.0"))

    with pytest.raises(DatasetFormatError, match="both melanoma"):
        convert_fixture("melanoma", writer, tmp_path)
