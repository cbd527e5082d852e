"""Prepare a stream's datasets as shards (read back for a task by :mod:`.task_data`).

:func:`prepare_stream` is idempotent. For each distinct dataset of the manifest:

- an index that exists, matches the task's split rule and whose shards all verify means the
  dataset is *present* and is left alone;
- shards without an index (an interrupted run) or shards that fail verification are
  removed and the dataset is built again.

One dataset at one task resolution has one split and one stored side: if the manifest's
split rule or the stored side (``stored_scale`` × S) changes, the dataset is rebuilt, as is
one whose train rows were stored in source order (an index without ``train_order``). An
index of an older shard format is unreadable to this version and is rebuilt too.

Before it writes anything it checks that every dataset it has to build can be found; if any
cannot, one :class:`~services.core.errors.DatasetNotFoundError` lists all of them, so a
stream is never silently shortened and a failed run leaves the store as it was.

"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from services.core.errors import DataIntegrityError, DatasetNotFoundError, ManifestError
from services.store.objects.base import ObjectStore
from workers.stream.adapters import AdapterContext, MissingDataset, find_dataset, get_adapter, split_key
from workers.stream.build import build_dataset
from workers.stream.images import check_image_size, stored_side
from workers.stream.manifest import StreamManifest, TaskSpec
from workers.stream.shards import (
    DEFAULT_MAX_EXAMPLES_PER_SHARD,
    DatasetIndex,
    check_dataset_listed,
    dataset_prefix,
    load_index,
    verify_dataset,
)
from workers.stream.split_rule import split_rule_key
from workers.stream.split_salt import salt_digest
from workers.stream.task_data import follows_rule

DEFAULT_STORED_SCALE = 1.5  # the settings' default: originals' long side = 1.5 S (96 px at 64)

# "write": each chunk of rows resized, deduplicated and stored, shard by shard (.build).
STAGES = ("check", "load", "split", "write", "done")


@dataclass(frozen=True)
class ProgressEvent:
    """One step of :func:`prepare_stream`, for a progress display."""

    dataset: str
    position: int  # 1-based among the stream's distinct datasets
    total: int
    stage: str  # one of STAGES


@dataclass(frozen=True)
class DatasetReport:
    """What happened to one dataset."""

    dataset: str
    status: str  # "prepared", "rebuilt" (was damaged or unfinished) or "present"
    counts: Mapping[str, int]
    num_shards: int
    num_bytes: int
    duplicates_removed: int
    index_key: str
    seconds: float
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrepareReport:
    """The outcome of one :func:`prepare_stream` call."""

    stream: str
    image_size: int
    datasets: tuple[DatasetReport, ...] = field(default_factory=tuple)
    stored_side: int = 0  # long side of the stored originals

    @property
    def written(self) -> tuple[DatasetReport, ...]:
        return tuple(d for d in self.datasets if d.status != "present")

    @property
    def nothing_to_do(self) -> bool:
        return not self.written

    @property
    def shards_verified(self) -> int:
        """Shards of already-present datasets, each re-checked this run."""
        return sum(d.num_shards for d in self.datasets if d.status == "present")


def stored_image_size(
    manifest: StreamManifest, *, settings_size: int, settings_explicit: bool, override: int | None = None
) -> int:
    """The stored resolution of a stream's shards.

    The first that is given wins: ``override`` (a command-line option), ``NEVIS_IMAGE_SIZE``
    when it was set explicitly, the manifest's ``image_size``, the settings' default (64).
    """
    if override is not None:
        return check_image_size(override)
    if settings_explicit or manifest.image_size is None:
        return check_image_size(settings_size)
    return check_image_size(manifest.image_size)


def dataset_rules(manifest: StreamManifest) -> dict[str, TaskSpec]:
    """The first task of each distinct dataset, checking repeats use the same split rule."""
    first: dict[str, TaskSpec] = {}
    for task in manifest.tasks:
        seen = first.setdefault(task.dataset, task)
        if split_rule_key(seen.split) != split_rule_key(task.split):
            raise ManifestError(
                f"Stream {manifest.name!r}: tasks {seen.order} and {task.order} use dataset "
                f"{task.dataset!r} with different split rules; one dataset is prepared once, "
                "so its tasks must share one rule."
            )
    return first


def prepare_stream(
    manifest: StreamManifest,
    store: ObjectStore,
    *,
    image_size: int,
    offline_dir: Path | None,
    progress: Callable[[ProgressEvent], None] | None = None,
    on_prepared: Callable[[DatasetIndex], None] | None = None,
    max_examples_per_shard: int = DEFAULT_MAX_EXAMPLES_PER_SHARD,
    stored_scale: float = DEFAULT_STORED_SCALE,
    verify: bool = True,
    accept_count_change: bool = False,
    split_salt: str = "",
) -> PrepareReport:
    """Make sure every dataset of ``manifest`` is stored as verified shards.

    Args:
        manifest: the stream.
        store: where shards go.
        image_size: the task resolution S.
        offline_dir: ``NEVIS_OFFLINE_DATA_DIR`` (None when unset).
        progress: called at each stage of each dataset.
        on_prepared: called with the index of every dataset that is ready after this run
            (newly written or already present), so a database can record it idempotently.
        max_examples_per_shard: shard size limit.
        stored_scale: long side of the stored originals as a multiple of S
            (``NEVIS_STORED_SCALE``).
        verify: re-hash every shard of a dataset already present (False: one listing of each
            dataset's folder checks that its shards are there at their sizes; what a task's
            worker does, since every read checks a shard's bytes anyway). Datasets built now
            are verified as they are written either way.
        accept_count_change: build a dataset whose classes differ from its task's, or whose
            classes or rows per split differ from the catalogue's pinned counts (the index's
            ``source.counts_check`` records it); otherwise that fails.
        split_salt: the deployment's secret split salt (``NEVIS_SPLIT_SALT``, see
            :mod:`workers.stream.split_salt`); a dataset split with another salt is rebuilt.

    Raises:
        CountMismatchError: a dataset's counts differ (naming the dataset, split, expected
            and found); datasets before it in the stream are kept.
        DatasetNotFoundError: listing every dataset that must be built but cannot be found;
            nothing has been written then.
        UnknownNameError: a dataset key names an unknown source.
    """
    size = check_image_size(image_size)
    side = stored_side(size, stored_scale)
    with _preparing(store):
        return _prepare(
            manifest,
            store,
            size=size,
            side=side,
            offline_dir=offline_dir,
            progress=progress,
            on_prepared=on_prepared,
            max_examples_per_shard=max_examples_per_shard,
            verify=verify,
            accept_count_change=accept_count_change,
            split_salt=split_salt,
        )


@contextmanager
def _preparing(store: ObjectStore) -> Iterator[None]:
    """One preparer at a time per local store: two workers starting the same stream together
    would otherwise see each other's half-written shards as damaged and rebuild them. (An S3
    store shared across machines has no such lock; prepare a stream once before a big run.)"""
    root = getattr(store, "root", None)
    if not isinstance(root, Path):
        yield
        return
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".prepare.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prepare(
    manifest: StreamManifest,
    store: ObjectStore,
    *,
    size: int,
    side: int,
    offline_dir: Path | None,
    progress: Callable[[ProgressEvent], None] | None,
    on_prepared: Callable[[DatasetIndex], None] | None,
    max_examples_per_shard: int,
    verify: bool = True,
    accept_count_change: bool = False,
    split_salt: str = "",
) -> PrepareReport:
    ctx = AdapterContext(offline_dir=offline_dir, image_size=size)
    tasks = dataset_rules(manifest)
    total = len(tasks)
    notify = progress or (lambda event: None)
    for key in tasks:
        get_adapter(split_key(key)[0])  # unknown sources fail before any work
    present: dict[str, tuple[DatasetReport, DatasetIndex]] = {}
    todo: dict[str, str] = {}  # dataset → "prepared" or "rebuilt"
    for position, (key, task) in enumerate(tasks.items(), 1):
        notify(ProgressEvent(key, position, total, "check"))
        status, found = _existing(store, task, size, side, verify=verify, salt=salt_digest(split_salt))
        if found is not None:
            present[key] = found
        else:
            todo[key] = status
    missing = [m for m in (find_dataset(k, ctx) for k in todo) if m is not None]
    if missing:
        raise DatasetNotFoundError(_missing_message(manifest, missing, total))
    reports = []
    for position, (key, task) in enumerate(tasks.items(), 1):
        if key in present:
            report, index = present[key]
        else:

            def stage(name: str, key: str = key, position: int = position) -> None:
                notify(ProgressEvent(key, position, total, name))

            report, index = _build(
                store, task, ctx, side, todo[key], max_examples_per_shard, stage, accept_count_change, split_salt
            )
        notify(ProgressEvent(key, position, total, "done"))
        if on_prepared is not None:
            on_prepared(index)
        reports.append(report)
    return PrepareReport(stream=manifest.name, image_size=size, datasets=tuple(reports), stored_side=side)


def _existing(
    store: ObjectStore, task: TaskSpec, size: int, side: int, *, verify: bool = True, salt: str = ""
) -> tuple[str, tuple[DatasetReport, DatasetIndex] | None]:
    """("present", (report, index)) for a complete, verified dataset; else (status, None)."""
    start = time.perf_counter()
    try:
        index = load_index(store, task.dataset, size)
    except DataIntegrityError:
        index = None  # an unreadable index is rebuilt like a missing one
    if index is None:
        unfinished = any(True for _ in store.list(dataset_prefix(task.dataset, size)))
        return ("rebuilt" if unfinished else "prepared"), None
    if not follows_rule(index, task):
        return "rebuilt", None  # the manifest's rule changed since: the split must follow it
    if index.split_salt != salt:
        return "rebuilt", None  # split with another deployment salt (digest): draw again
    if index.stored_side != side:
        return "rebuilt", None  # NEVIS_STORED_SCALE changed since: originals must follow it
    if not index.train_order:
        return "rebuilt", None  # train rows stored in source order (before they were mixed)
    try:
        (verify_dataset if verify else check_dataset_listed)(store, index)
    except DataIntegrityError:
        return "rebuilt", None
    return "present", (_report(index, "present", time.perf_counter() - start, _accepted(index)), index)


def _build(
    store: ObjectStore,
    task: TaskSpec,
    ctx: AdapterContext,
    side: int,
    status: str,
    max_per_shard: int,
    stage: Callable[[str], None],
    accept_count_change: bool = False,
    split_salt: str = "",
) -> tuple[DatasetReport, DatasetIndex]:
    """Build one dataset in bounded memory (:mod:`.build`); returns (report, index)."""
    start = time.perf_counter()
    index = build_dataset(
        store, task, ctx, side, max_per_shard, stage, accept_count_change=accept_count_change, split_salt=split_salt
    )
    return _report(index, status, time.perf_counter() - start, _accepted(index)), index


def _accepted(index: DatasetIndex) -> tuple[str, ...]:
    """Notes naming each count difference ``--accept-count-change`` let through."""
    check = index.source.get("counts_check") or {}
    notes = []
    if "task_classes" in check:
        task = check["task_classes"]
        notes.append(
            f"accepted ({task['accepted_change']}): the manifest says {task['expected']} "
            f"classes, the data has {task['found']}"
        )
    if "accepted_change" in check:
        notes.append(
            f"accepted ({check['accepted_change']['flag']}): " + "; ".join(check["accepted_change"]["differences"])
        )
    return tuple(notes)


def _report(index: DatasetIndex, status: str, seconds: float, notes: tuple[str, ...] = ()) -> DatasetReport:
    return DatasetReport(
        dataset=index.dataset,
        status=status,
        counts=dict(index.counts),
        num_shards=len(index.all_shards),
        num_bytes=sum(s.size for s in index.all_shards),
        duplicates_removed=int(index.dedup.get("total_removed", 0)),
        index_key=index.key,
        seconds=seconds,
        notes=tuple(notes),
    )


def _missing_message(manifest: StreamManifest, missing: Sequence[MissingDataset], total: int) -> str:
    """One message naming every missing dataset, grouped by where and how to provide them."""
    lines = [
        f"Stream {manifest.name!r} needs {len(missing)} of its {total} datasets that cannot be "
        "found. Nothing was written: a stream is never run with datasets left out."
    ]
    groups: dict[tuple[str, str], list[str]] = {}
    for item in missing:
        groups.setdefault((item.looked_in, item.how_to_provide), []).append(item.dataset)
    for (looked_in, how), datasets in groups.items():
        lines.append(f"Missing ({len(datasets)}): {', '.join(datasets)}")
        lines.append(f"  Looked in: {looked_in}.")
        lines.append(f"  To provide a dataset <source>:<name>, {how}.")
    return "\n".join(lines)


def verify_stream(manifest: StreamManifest, store: ObjectStore, *, image_size: int) -> dict[str, str]:
    """Re-check every prepared shard of a stream.

    Returns:
        dataset → ``"ok (N shards)"``, ``"not prepared"`` or the integrity problem.
    """
    out: dict[str, str] = {}
    for key in dataset_rules(manifest):
        try:
            index = load_index(store, key, image_size)
            if index is None:
                out[key] = "not prepared"
                continue
            out[key] = f"ok ({verify_dataset(store, index)} shards)"
        except DataIntegrityError as exc:
            out[key] = str(exc)
    return out


__all__ = [
    "DEFAULT_STORED_SCALE",
    "STAGES",
    "DatasetReport",
    "PrepareReport",
    "ProgressEvent",
    "dataset_rules",
    "prepare_stream",
    "stored_image_size",
    "verify_stream",
]
