"""Sources whose labels and splits come from list files."""

from __future__ import annotations

import pytest

from tests.support.source_fixtures.list_files import (
    write_food101,
    write_german_tsr,
    write_oxford_iiit_pet,
    write_tiny_imagenet,
    write_wiki_paintings_style,
)
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


@pytest.mark.parametrize(
    "key, writer, classes",
    [
        ("food101", write_food101, 101),
        ("tiny_imagenet", write_tiny_imagenet, 3),
        ("german_tsr", write_german_tsr, 43),
        ("oxford_iiit_pet", write_oxford_iiit_pet, 37),
        ("wiki_paintings_style", write_wiki_paintings_style, 27),
    ],
)
def test_list_file_sources(tmp_path, key, writer, classes):
    raw, expected = convert_fixture(key, writer, tmp_path)
    assert len(raw.class_names) == classes
    assert row_facts(raw) == expected_facts(expected)
    counts = split_by_stream(raw, key, "nevis22-full").counts
    assert counts["test"] == sum(s == "test" for _, s in expected.values())
