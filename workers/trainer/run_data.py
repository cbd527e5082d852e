"""A runner's stored data: the stream prepared once per runner, a task's splits, indexes.

The coordinator starts a runner per task, so what a runner does once, every task pays: a task
checks the stream by listing it (:meth:`RunData.prepare` with ``verify=False``), and relies on
the checksum every read of a shard makes, instead of re-hashing the whole stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from services.core.config import Settings
from services.core.errors import DataIntegrityError
from services.store.deployment_salt import split_salt
from services.store.objects import ObjectStore
from workers.stream.catalog import database_recorder
from workers.stream.manifest import StreamManifest, TaskSpec, eval_split
from workers.stream.prepare import prepare_stream
from workers.stream.shard_stream import split_bytes
from workers.stream.split_rule import split_rule_key
from workers.stream.task_data import TaskData, load_task_data, load_task_index


class RunData:
    """The stream's shards as one runner reads them."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session], store: ObjectStore) -> None:
        self.settings, self.sessions, self.store = settings, sessions, store
        self._prepared: set[tuple[str, str, int]] = set()
        self._indices: dict[tuple[str, int, str], Any] = {}

    def prepare(self, manifest: StreamManifest, size: int, *, verify: bool = True) -> None:
        """Make sure the stream's shards exist and verify, once per stream and size in this
        runner (every later read checks each shard's checksum again anyway).

        ``verify=False`` is a task's check (a process per task under the coordinator): datasets
        already stored are checked by listing their shards' sizes, not by reading them all:
        re-hashing the whole stream before every task read the stream once per task (on S3,
        downloaded it). A shard damaged since is found by the read that needs it, and the
        task's own data is then rebuilt (:meth:`task_data`)."""
        key = _stream_key(manifest, size)
        if key in self._prepared:
            return
        prepare_stream(
            manifest,
            self.store,
            image_size=size,
            offline_dir=self.settings.offline_data_dir,
            stored_scale=self.settings.stored_scale,
            verify=verify,
            on_prepared=database_recorder(self.sessions, self.store),
            split_salt=split_salt(self.sessions, self.settings.split_salt),
        )
        self._prepared.add(key)

    def for_task(self, manifest: StreamManifest, task: TaskSpec, size: int, phase: str) -> TaskData:
        """What a task reads before its trials: the stream checked (listed, once per runner),
        then the task's train split (unless it is too large and goes to learners by shard),
        dev split and evaluation split."""
        self.prepare(manifest, size, verify=False)
        whole = split_bytes(self.index(task, size), "train") <= self.settings.stream_train_bytes
        return self.task_data(manifest, task, size, ("train", "dev", eval_split(phase))[not whole :])

    def task_data(self, manifest: StreamManifest, task: TaskSpec, size: int, splits: Sequence[str]) -> TaskData:
        """The task's splits (training crops come from the train split's originals). A shard
        that fails its checksum has the stream verified in full, which rebuilds its dataset,
        and is read again: a task's check did not re-hash the stream (:meth:`prepare`)."""

        def load() -> TaskData:
            return load_task_data(
                self.store,
                task,
                image_size=size,
                splits=tuple(splits),
                originals=("train",),
                index=self.index(task, size),
            )

        try:
            return load()
        except DataIntegrityError:
            self._prepared.discard(_stream_key(manifest, size))
            self._indices.pop(_index_key(task, size), None)  # a rebuilt dataset has a new index
            self.prepare(manifest, size, verify=True)
            return load()

    def index(self, task: TaskSpec, size: int) -> Any:
        """A task's shard index (class names, counts), read and checked against the task's split
        rule once per runner."""
        key = _index_key(task, size)
        if key not in self._indices:
            self._indices[key] = load_task_index(self.store, task, image_size=size)
        return self._indices[key]


def _index_key(task: TaskSpec, size: int) -> tuple[str, int, str]:
    return task.dataset, size, repr(split_rule_key(task.split))


def _stream_key(manifest: StreamManifest, size: int) -> tuple[str, str, int]:
    """What a runner prepares once: one version of a stream at one task resolution."""
    return manifest.name, manifest.version, size


__all__ = ["RunData"]
