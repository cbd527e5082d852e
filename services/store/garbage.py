"""Garbage collection of the object store: remove objects no database row references any more.

Only keys under the roots the service itself writes are looked at
(:data:`COLLECTED_PREFIXES`); anything else in the store (a key put there by hand to pass as
``--pretrained``, another tool's objects) is never touched. Which rows reference which keys is
declared once per key family (:mod:`services.store.key_families`: dataset indexes and shards,
learner bundles, pretrained checkpoints, checkpoints, predictors, states, logs, predictions,
kept intervals, probe features); a key is also kept while it lies under the prefix of a task
attempt still pending or running: its trials write predictors, states and checkpoints long
before the task's commit records them.

An unreferenced key (an *orphan*: a deleted submission's objects, the predictors of trials that
were not chosen, a failed attempt's state) is removed only once it is older than ``min_age_s``,
so a write whose row is not committed yet (a dataset being prepared, a bundle being
registered) keeps its object. The store is listed before the database is read, so a row
committed in between still protects its key.

The store must belong to this database alone: another database's objects in the same store
look unreferenced here. On a local store the removed keys' bytes are freed by its blob
collection (:meth:`~services.store.objects.LocalObjectStore.gc`), run afterwards with the same
minimum age; S3 frees them with the key.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from services.core.errors import NevisError
from services.store.db.models import ACTIVE_TASK_RUN_STATUSES, StreamTask, TaskRun
from services.store.key_families import COLLECTED_PREFIXES, is_referenced, referenced_keys
from services.store.key_layout import attempt_prefix
from services.store.objects import GcStats, ListedObject, LocalObjectStore, ObjectStore

# Longer than any write waits for its row, the attempts of running tasks aside (they are kept
# by their status): the largest dataset's prepare, an upload, a run's start.
DEFAULT_MIN_AGE_S = 24 * 3600.0


@dataclass(frozen=True)
class PrefixReport:
    """What one collected prefix holds and what collection found unreferenced there."""

    prefix: str
    objects: int
    bytes: int
    orphans: int  # unreferenced and old enough: removed (on a dry run: would be)
    orphan_bytes: int
    young: int  # unreferenced but younger than the minimum age: kept
    young_bytes: int


@dataclass(frozen=True)
class GarbageReport:
    """The outcome of one :func:`collect_garbage` pass."""

    dry_run: bool
    min_age_s: float
    prefixes: tuple[PrefixReport, ...]
    orphan_keys: tuple[str, ...]  # removed, or on a dry run the ones that would be
    blobs: GcStats | None  # the local store's blob collection; None on S3 and on a dry run

    @property
    def orphans(self) -> int:
        return sum(p.orphans for p in self.prefixes)

    @property
    def orphan_bytes(self) -> int:
        return sum(p.orphan_bytes for p in self.prefixes)

    @property
    def young(self) -> int:
        return sum(p.young for p in self.prefixes)


def active_prefixes(session: Session) -> tuple[str, ...]:
    """The prefixes (ending in ``/``) of task attempts still pending or running."""
    rows = session.execute(
        select(TaskRun.submission_id, StreamTask.order, TaskRun.attempt)
        .join(StreamTask, StreamTask.id == TaskRun.stream_task_id)
        .where(TaskRun.status.in_(ACTIVE_TASK_RUN_STATUSES))
    )
    return tuple(sorted(attempt_prefix(*row) + "/" for row in rows))


def collect_garbage(
    store: ObjectStore,
    sessions: sessionmaker[Session],
    *,
    min_age_s: float = DEFAULT_MIN_AGE_S,
    dry_run: bool = False,
    now: float | None = None,
) -> GarbageReport:
    """Remove the store's unreferenced objects older than ``min_age_s`` (see the module).

    Args:
        store: The object store the database's rows point into.
        sessions: Sessions on that database (read only).
        min_age_s: Keep unreferenced objects written less than this long ago.
        dry_run: Report what would be removed; remove nothing, and skip the blob collection.
        now: The time ages are measured from, in POSIX seconds; default the clock.

    Raises:
        NevisError: ``min_age_s`` is negative.
    """
    if min_age_s < 0:
        raise NevisError(f"The minimum age of garbage must be 0 s or more; got {min_age_s}.")
    cutoff = (time.time() if now is None else now) - min_age_s
    listed = {prefix: list(store.list_objects(prefix)) for prefix in COLLECTED_PREFIXES}
    with sessions() as session:  # after the listing: a row committed meanwhile still counts
        referenced = referenced_keys(session)
        active = active_prefixes(session)
    reports: list[PrefixReport] = []
    orphans: list[str] = []
    for prefix, objects in listed.items():
        unreferenced = [o for o in objects if not is_referenced(o.key, referenced) and not o.key.startswith(active)]
        old = [o for o in unreferenced if o.modified <= cutoff]
        young = [o for o in unreferenced if o.modified > cutoff]
        reports.append(
            PrefixReport(
                prefix=prefix,
                objects=len(objects),
                bytes=_size(objects),
                orphans=len(old),
                orphan_bytes=_size(old),
                young=len(young),
                young_bytes=_size(young),
            )
        )
        orphans.extend(o.key for o in old)
    blobs = None
    if not dry_run:
        for key in orphans:
            store.delete(key)
        if isinstance(store, LocalObjectStore):
            blobs = store.gc(min_age_s=min_age_s)
    return GarbageReport(
        dry_run=dry_run, min_age_s=min_age_s, prefixes=tuple(reports), orphan_keys=tuple(orphans), blobs=blobs
    )


def _size(objects: Iterable[ListedObject]) -> int:
    return sum(o.size for o in objects)


__all__ = [
    "COLLECTED_PREFIXES",
    "DEFAULT_MIN_AGE_S",
    "GarbageReport",
    "PrefixReport",
    "active_prefixes",
    "collect_garbage",
    "referenced_keys",
]
