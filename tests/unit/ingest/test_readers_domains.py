"""Office-Caltech-10 and PACS: ten / seven classes with a domain per row."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.domains import PACS_SIZES, pacs_images, write_office_caltech_10, write_pacs
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream
from workers.ingest.readers.office_caltech import CLASSES
from workers.ingest.readers.pacs import domains_by_name


def test_office_caltech_maps_both_tables_and_holds_out_caltech(tmp_path):
    raw, expected = convert_fixture("office_caltech_10", write_office_caltech_10, tmp_path)
    assert raw.class_names == CLASSES
    assert row_facts(raw, "domain") == expected_facts(expected)
    counts = split_by_stream(raw, "office_caltech_10").counts
    assert counts["dev_test"] + counts["test"] == 4  # the Caltech rows
    assert counts["train"] + counts["dev"] == 6


def test_pacs_finds_domains_by_shared_images_and_folds_duplicates(tmp_path):
    raw, expected = convert_fixture("pacs", write_pacs, tmp_path)
    assert row_facts(raw, "domain") == expected_facts(expected)
    assert len(raw.labels) == sum(PACS_SIZES.values())
    counts = split_by_stream(raw, "pacs").counts
    assert counts["dev_test"] + counts["test"] == PACS_SIZES["sketch"]
    rgb = {bgr[..., ::-1].tobytes() for images, _ in pacs_images().values() for bgr in images}
    assert {raw.images[i].tobytes() for i in range(len(raw.labels))} == rgb  # BGR made RGB


def test_pacs_uses_domain_names_when_files_have_them():
    paths = [Path(f"{d}_{p}.hdf5") for d in ("photo", "sketch") for p in ("train", "test")]
    assert domains_by_name(paths) == {p: p.name.rsplit("_", 1)[0] for p in paths}
    assert domains_by_name([Path("gdrive-1e2W")]) is None
