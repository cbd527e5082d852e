"""Every source of the SHORT stream has a reader and a fixture: converting all 28 fixtures
gives a dataset for each of the 29 tasks, each task's split rule splits its dataset, and
``prepare`` builds the whole stream's shards from them (train and test rows in every task)."""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.short_stream import SHORT_FIXTURES, write_short_sources
from workers.stream.adapters import load_dataset
from workers.stream.adapters.base import AdapterContext
from services.store.objects import LocalObjectStore
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream
from workers.stream.readers.convert import convert_sources
from workers.stream.splits import assign_splits
from workers.stream.sources.catalogue import load_catalogue


def test_the_short_stream_converts_from_fixtures_and_every_task_splits(tmp_path: Path) -> None:
    manifest = load_stream("nevis22-short")
    keys = [s.key for s in load_catalogue().for_datasets(manifest.datasets)]
    assert sorted(keys) == sorted(SHORT_FIXTURES)
    write_short_sources(tmp_path / "data")
    outcomes = convert_sources(keys, tmp_path / "data", tmp_path / "offline")
    assert [o.key for o in outcomes if not o.ok] == [], [(o.key, o.status, o.detail) for o in outcomes if not o.ok]
    ctx = AdapterContext(offline_dir=tmp_path / "offline")
    for task in manifest.tasks:
        raw = load_dataset(task.dataset, ctx)
        rows = assign_splits(raw.labels, rule=task.split, given=raw.given_splits, attributes=raw.attributes,
                             dataset=task.dataset).rows
        assert sum(len(r) for r in rows.values()) > 0, task.dataset
    report = prepare_stream(manifest, LocalObjectStore(tmp_path / "store"), image_size=16,
                            offline_dir=tmp_path / "offline")
    assert len(report.datasets) == len(set(manifest.datasets))
    empty = [(item.dataset, split) for item in report.datasets for split in ("train", "test")
             if not item.counts.get(split)]
    assert empty == []
