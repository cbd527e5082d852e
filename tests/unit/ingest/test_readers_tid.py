"""TID2008 / TID2013: MSSIM values in 5 equal-size buckets, images from a RAR archive."""

from __future__ import annotations

import pytest

from tests.support.source_fixtures.read_back import convert_fixture, split_by_stream
from tests.support.source_fixtures.tid import write_tid2008, write_tid2013


@pytest.mark.parametrize("key, writer", [("tid2008", write_tid2008), ("tid2013", write_tid2013)])
def test_tid_buckets_mssim_values(tmp_path, key, writer):
    raw, expected = convert_fixture(key, writer, tmp_path)
    assert len(raw.class_names) == 5
    assert sorted(int(v) for v in raw.labels) == sorted(b for b, _ in expected.values())
    assert sum(split_by_stream(raw, key, "nevis22-full").counts.values()) == len(expected)
