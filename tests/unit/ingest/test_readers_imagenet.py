"""ImageNet 2012 from its manual tars: nested per-class tars and TFDS's validation labels."""

from __future__ import annotations

from tests.support.source_fixtures.imagenet import VAL_IMAGES, write_imagenet2012
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream
from workers.ingest.readers.imagenet import validation_synsets


def test_shipped_validation_labels_are_tfds_list():
    synsets = validation_synsets()
    assert len(synsets) == 50_000 and len(set(synsets)) == 1000
    assert synsets[:3] == ("n01751748", "n09193705", "n02105855")


def test_imagenet_train_from_nested_tars_and_validation_as_test(tmp_path):
    raw, expected = convert_fixture("imagenet2012", write_imagenet2012, tmp_path)
    assert list(raw.class_names) == sorted(raw.class_names)
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, "imagenet2012").counts
    assert counts["test"] == VAL_IMAGES
