"""Stanford Cars, FGVC Aircraft (family), CUB-200-2011 and Stanford Dogs readers."""

from __future__ import annotations

from tests.support.source_fixtures.fine_grained import (
    CAR_CLASSES,
    FAMILIES,
    write_caltech_birds2011,
    write_fgvc_aircraft_family,
    write_stanford_cars,
    write_stanford_dogs,
)
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


def _check(key, writer, tmp_path, classes=None):
    raw, expected = convert_fixture(key, writer, tmp_path)
    if classes is not None:
        assert raw.class_names == tuple(classes)
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, raw.key.split(":", 1)[1]).counts
    assert counts["test"] == sum(s == "test" for _, s in expected.values())
    return raw


def test_stanford_cars_from_the_annotation_struct(tmp_path):
    _check("stanford_cars", write_stanford_cars, tmp_path, CAR_CLASSES)


def test_fgvc_aircraft_families_in_file_order(tmp_path):
    _check("fgvc_aircraft_family", write_fgvc_aircraft_family, tmp_path, FAMILIES)


def test_cub_labels_from_folders_and_the_official_split(tmp_path):
    _check(
        "caltech_birds2011",
        write_caltech_birds2011,
        tmp_path,
        ["black_footed_albatross", "laysan_albatross", "sooty_albatross"],
    )


def test_stanford_dogs_labels_from_folders_and_the_mat_lists(tmp_path):
    _check(
        "stanford_dogs",
        write_stanford_dogs,
        tmp_path,
        ["n02085620-chihuahua", "n02085782-japanese_spaniel", "n02093256-staffordshire_bullterrier"],
    )
