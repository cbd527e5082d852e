"""Prepared datasets are mirrored in the database: once, and refreshed only when rebuilt."""

from __future__ import annotations

from sqlalchemy import select

from services.store.db import sessions_on
from services.store.db.models import Dataset, Shard
from services.store.objects import LocalObjectStore
from workers.stream.catalog import database_recorder
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import prepare_stream


def test_prepare_records_datasets_and_shards_idempotently(database_url, tmp_path, tiny_stream) -> None:
    manifest = load_stream(str(tiny_stream))
    store = LocalObjectStore(tmp_path / "store")
    sessions = sessions_on(database_url)
    record = database_recorder(sessions, store)
    prepare_stream(manifest, store, image_size=16, offline_dir=None, on_prepared=record)
    with sessions() as session:
        datasets = session.scalars(select(Dataset).order_by(Dataset.key)).all()
        shards = session.scalars(select(Shard)).all()
        first_ids = sorted(s.id for s in shards)
    assert [d.key for d in datasets] == ["shapes:hue", "shapes:multi", "shapes:shape"]
    assert all(sum(d.split_counts.values()) == 1200 for d in datasets)
    assert {s.split for s in shards} == {"train", "dev", "dev_test", "test"}
    for shard in shards:
        assert store.info(shard.object_key).sha256 == shard.sha256
    # A second prepare finds everything present and leaves the rows alone.
    prepare_stream(manifest, store, image_size=16, offline_dir=None, on_prepared=record)
    with sessions() as session:
        assert sorted(s.id for s in session.scalars(select(Shard))) == first_ids
    # A dataset rebuilt at another size is another row; the first is untouched.
    prepare_stream(manifest, store, image_size=8, offline_dir=None, on_prepared=record)
    with sessions() as session:
        sizes = session.scalars(select(Dataset.image_size).where(Dataset.key == "shapes:hue")).all()
    assert sorted(sizes) == [8, 16]
