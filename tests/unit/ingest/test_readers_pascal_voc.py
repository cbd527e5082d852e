"""Pascal VOC 2005-2012 readers on tiny archives in the sources' layouts."""

from __future__ import annotations

import numpy as np

from tests.support.source_fixtures.pascal_voc import (
    write_pascal_voc2005,
    write_pascal_voc2006,
    write_voc_2007,
    write_voc_2012,
)
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream
from workers.ingest.readers.pascal_voc import VOC_LABELS


def test_voc2005_reads_the_reference_folders_as_four_classes(tmp_path):
    raw, expected = convert_fixture("pascal_voc2005", write_pascal_voc2005, tmp_path)
    assert raw.class_names == ("car", "motorbike", "bike", "person")
    assert row_facts(raw) == expected_facts(expected)  # the extra UIUC folder is not read
    counts = split_by_stream(raw, "pascal_voc2005").counts
    assert counts["test"] == sum(s == "test" for _, s in expected.values())


def test_voc2006_takes_positives_and_the_last_list_wins(tmp_path):
    raw, expected = convert_fixture("pascal_voc2006", write_pascal_voc2006, tmp_path)
    assert raw.class_names == ("bicycle", "bus", "car")
    assert row_facts(raw) == expected_facts(expected)
    assert split_by_stream(raw, "pascal_voc2006").counts["test"] == 3


def test_voc2007_is_multi_label_with_train_val_test(tmp_path):
    raw, expected = convert_fixture("voc/2007", write_voc_2007, tmp_path)
    assert raw.kind == "multi" and raw.class_names == VOC_LABELS
    assert row_facts(raw) == expected_facts(expected)  # unlisted image 000999 left out
    counts = split_by_stream(raw, "voc_2007").counts
    assert counts["dev_test"] == 2 and counts["test"] == 2
    assert counts["train"] + counts["dev"] == 3


def test_voc2012_reads_trainval_only_and_the_rule_draws_test_from_val(tmp_path):
    raw, expected = convert_fixture("voc/2012", write_voc_2012, tmp_path)
    assert row_facts(raw) == expected_facts(expected)
    assert raw.given_splits is not None and len(raw.given_splits.test) == 0
    counts = split_by_stream(raw, "voc_2012").counts
    assert counts["dev_test"] + counts["test"] == 2
    widths = sorted(int(w) for w in raw.images.shapes[:, 1])
    assert widths == sorted(30 + int(n[-6:-4]) for n in expected)
    assert np.all(raw.images.shapes[:, 0] == 20)
