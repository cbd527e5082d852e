"""DomainNet: six domains, per-domain lists, sketch held out through held_out_parts."""

from __future__ import annotations

from tests.support.source_fixtures.domainnet import CLASSES, write_domainnet
from tests.support.source_fixtures.read_back import convert_fixture, expected_facts, row_facts, split_by_stream


def test_domainnet_lists_domains_and_the_held_out_sketch(tmp_path):
    raw, expected = convert_fixture("domainnet", write_domainnet, tmp_path)
    assert raw.class_names == CLASSES
    assert row_facts(raw, "domain") == expected_facts(expected)
    counts = split_by_stream(raw, "domainnet", "nevis22-full").counts
    assert counts == {"train": 15, "dev": 15, "dev_test": 3, "test": 3}
