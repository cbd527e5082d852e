"""AnimalWeb: class from the file-name prefix, duplicates dropped before the split."""

from __future__ import annotations

from tests.support.source_fixtures.animal_web import write_animal_web
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


def test_animal_web_prefix_labels_and_one_copy_of_duplicates(tmp_path):
    raw, expected = convert_fixture("animal_web", write_animal_web, tmp_path)
    assert len(raw.class_names) == 352 and raw.class_names[0] == "saluki"
    assert row_facts(raw) == expected_facts(expected)
    assert sum(split_by_stream(raw, "animal_web", "nevis22-full").counts.values()) == 4
