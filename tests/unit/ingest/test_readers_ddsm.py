"""CBIS-DDSM: case descriptions joined to dicom_info, one row per full mammogram."""

from __future__ import annotations

from tests.support.source_fixtures.ddsm import write_ddsm
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream
from workers.ingest.readers.ddsm import CLASSES


def test_ddsm_joins_cases_to_images_first_case_wins(tmp_path):
    raw, expected = convert_fixture("ddsm", write_ddsm, tmp_path)
    assert raw.class_names == CLASSES
    assert row_facts(raw) == expected_facts(expected)
    assert split_by_stream(raw, "ddsm", "nevis22-full").counts["test"] == 2
