"""The stream and dataset tables: what a run is evaluated on, stored whole and checksummed.

A stream version keeps its manifest (so a run can always be replayed) and its tasks; a
dataset keeps its checksummed shards. Part of the schema of :mod:`services.store.db.models`,
which imports and re-exports every name here (the contract stated there holds for these too).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from services.store.db.base import KEY_LENGTH, Base, created_column, named_check, non_negative, one_of, sha256_check
from services.store.db.types import JSONDoc

PHASES: tuple[str, ...] = ("meta_train", "meta_test")
TASK_KINDS: tuple[str, ...] = ("single", "multi")
SHARD_SPLITS: tuple[str, ...] = ("train", "dev", "dev_test", "test")


# A named, versioned stream manifest, stored whole so a run can always be replayed.
class StreamVersion(Base):
    __tablename__ = "stream_versions"
    __table_args__ = (UniqueConstraint("name", "version"), sha256_check("manifest_sha256"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    version: Mapped[str] = mapped_column(String(50))
    manifest_sha256: Mapped[str] = mapped_column(String(64))
    manifest: Mapped[dict[str, Any]] = mapped_column(JSONDoc)
    created_at: Mapped[datetime] = created_column()

    tasks: Mapped[list[StreamTask]] = relationship(
        back_populates="stream_version", order_by="StreamTask.order", passive_deletes=True
    )


# One task of a stream version, in causal order (1-based ``order``).
class StreamTask(Base):
    __tablename__ = "stream_tasks"
    __table_args__ = (
        UniqueConstraint("stream_version_id", "order"),
        named_check('"order" >= 1', "order_positive"),
        named_check(one_of("phase", PHASES), "phase"),
        named_check(one_of("kind", TASK_KINDS), "kind"),
        named_check("num_classes IS NULL OR num_classes >= 1", "num_classes_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    stream_version_id: Mapped[int] = mapped_column(ForeignKey("stream_versions.id", ondelete="CASCADE"))
    order: Mapped[int] = mapped_column("order", Integer)
    year: Mapped[int] = mapped_column(Integer)
    dataset: Mapped[str] = mapped_column(String(200))
    phase: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))
    num_classes: Mapped[int | None] = mapped_column(Integer)
    domain: Mapped[str | None] = mapped_column(String(100))
    split_rule: Mapped[dict[str, Any]] = mapped_column(JSONDoc)

    stream_version: Mapped[StreamVersion] = relationship(back_populates="tasks")


# A dataset turned into shards at one image size; the index object lists every shard.
class Dataset(Base):
    __tablename__ = "datasets"
    __table_args__ = (
        UniqueConstraint("key", "image_size"),
        named_check("image_size >= 1", "image_size_positive"),
        named_check(one_of("kind", TASK_KINDS), "kind"),
        named_check("num_classes >= 1", "num_classes_positive"),
        sha256_check("index_sha256"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(200))
    image_size: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    num_classes: Mapped[int] = mapped_column(Integer)
    index_key: Mapped[str] = mapped_column(String(KEY_LENGTH))
    index_sha256: Mapped[str] = mapped_column(String(64))
    split_counts: Mapped[dict[str, Any]] = mapped_column(JSONDoc)
    created_at: Mapped[datetime] = created_column()

    shards: Mapped[list[Shard]] = relationship(back_populates="dataset", passive_deletes=True)


# One checksummed shard object of one split of a dataset.
class Shard(Base):
    __tablename__ = "shards"
    __table_args__ = (
        UniqueConstraint("dataset_id", "split", "part"),
        named_check(one_of("split", SHARD_SPLITS), "split"),
        *non_negative("part", "num_examples", "size_bytes"),
        sha256_check("sha256"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    split: Mapped[str] = mapped_column(String(16))
    part: Mapped[int] = mapped_column(Integer)
    object_key: Mapped[str] = mapped_column(String(KEY_LENGTH))
    num_examples: Mapped[int] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))

    dataset: Mapped[Dataset] = relationship(back_populates="shards")


__all__ = ["PHASES", "SHARD_SPLITS", "TASK_KINDS", "Dataset", "Shard", "StreamTask", "StreamVersion"]
