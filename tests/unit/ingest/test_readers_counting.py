"""Readers of the counting sources (TRANCOS, Mall, ShanghaiTech) on tiny fixtures in their
exact layouts: each image's count lands in its equal-frequency bucket, with the source's own
split, read back through ``nevis:<key>``; every FULL task of the source can split the rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.source_fixtures import counting as fixtures
from tests.support.source_fixtures.converted import convert_and_load, split_of
from workers.ingest.readers.counting import count_buckets
from workers.stream.manifest_files import load_stream
from workers.stream.splits import assign_splits

WRITERS: dict[str, Callable[[Path], list[tuple[str, str | None]]]] = {
    "trancos": fixtures.write_trancos,
    "mall": fixtures.write_mall,
    "shanghai_tech": fixtures.write_shanghai_tech,
}


@pytest.mark.parametrize("key", sorted(WRITERS))
def test_each_image_is_in_the_bucket_of_its_count(tmp_path: Path, key: str) -> None:
    expected = WRITERS[key](tmp_path / "data")
    raw = convert_and_load(key, tmp_path)
    assert list(raw.class_names) == fixtures.BUCKET_NAMES
    assert [(raw.class_names[v], s) for v, s in zip(raw.labels, split_of(raw), strict=True)] == expected
    for task in load_stream("nevis22-full").tasks:
        if task.dataset == f"nevis:{key}":
            assignment = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes)
            assert sum(len(r) for r in assignment.rows.values()) == raw.num_examples


def test_buckets_hold_about_equally_many_images_and_refuse_a_single_count() -> None:
    label_of, names = count_buckets(list(range(100)) * 2 + [150, 160], cap=100)  # over the cap: last bucket
    assert len(names) == 10 and names[-1].endswith("+") and label_of[99] == 9
    sizes = [sum(label_of[min(c, 99)] == k for c in list(range(100)) * 2 + [150, 160]) for k in range(10)]
    assert max(sizes) - min(sizes) <= 4
    with pytest.raises(ValueError, match="buckets"):
        count_buckets([0] * 40 + [5], cap=100)
