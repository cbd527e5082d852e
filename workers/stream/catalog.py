"""Record prepared datasets and their shards in the database (idempotent upsert).

The object store's ``index.json`` is the source of truth for a dataset's shards; the rows
written here mirror it so that runs, the API and the leaderboard can join on datasets
without reading the store. Re-recording an unchanged index changes nothing; a rebuilt index
(another checksum) replaces the shard rows in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from services.store.db import transaction
from services.store.db.models import Dataset, Shard
from services.store.objects import ObjectStore
from workers.stream.shards import DatasetIndex


def record_dataset(session: Session, *, index: DatasetIndex, index_sha256: str) -> Dataset:
    """Insert or refresh the rows of one prepared dataset; returns its row."""
    row = session.scalar(select(Dataset).where(Dataset.key == index.dataset, Dataset.image_size == index.image_size))
    if row is not None and row.index_sha256 == index_sha256:
        return row
    if row is None:
        row = Dataset(key=index.dataset, image_size=index.image_size)
        session.add(row)
    row.kind, row.num_classes = index.kind, index.num_classes
    row.index_key, row.index_sha256 = index.key, index_sha256
    row.split_counts = {split: int(n) for split, n in index.counts.items()}
    session.flush()
    session.execute(delete(Shard).where(Shard.dataset_id == row.id))
    for split, shards in index.shards.items():
        for part, shard in enumerate(shards):
            session.add(
                Shard(
                    dataset_id=row.id,
                    split=split,
                    part=part,
                    object_key=shard.key,
                    num_examples=shard.num_examples,
                    size_bytes=shard.size,
                    sha256=shard.sha256,
                )
            )
    session.flush()
    return row


def database_recorder(sessions: sessionmaker[Session], store: ObjectStore) -> Callable[[DatasetIndex], None]:
    """An ``on_prepared`` callback for :func:`workers.stream.prepare.prepare_stream`."""

    def record(index: DatasetIndex) -> None:
        sha = store.info(index.key).sha256
        with transaction(sessions) as session:
            record_dataset(session, index=index, index_sha256=sha)

    return record


__all__ = ["database_recorder", "record_dataset"]
