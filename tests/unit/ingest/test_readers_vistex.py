"""VisTex: reference textures through LZW inner archives and symbolic links."""

from __future__ import annotations

from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream
from tests.support.source_fixtures.vistex import write_vistex


def test_vistex_reads_reference_links_across_inner_archives(tmp_path):
    raw, expected = convert_fixture("vistex", write_vistex, tmp_path)
    assert raw.class_names == ("Bark", "Brick", "Water")
    assert row_facts(raw) == expected_facts(expected)  # the scene link is not an example
    assert sorted(int(w) for w in raw.images.shapes[:, 1]) == [16, 17, 18, 19]
    assert sum(split_by_stream(raw, "vistex", "nevis22-full").counts.values()) == 4
