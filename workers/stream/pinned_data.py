"""The counts check of ``prepare``: a dataset's classes against its task's, and a NEVIS'22
source's classes and rows per split against the catalogue's pinned counts.

``convert`` checks a source as it writes it; this checks what ``prepare`` actually loads
(an older conversion, an imported reference dataset, a file copied in by hand: any file that
names the catalogue source it was made from), so a dataset of another size never becomes
shards unflagged. A subset packed under a NEVIS'22 name (the offline ``.npz`` datasets) is
not the source's files, and only the task's class count applies to it. Differences pass only with ``--accept-count-change``,
and the index's ``source.counts_check`` records them.
"""

from __future__ import annotations

from typing import Any

from services.core.errors import DatasetNotFoundError
from workers.stream.adapters import RawDataset
from workers.stream.manifest import TaskSpec
from workers.stream.sources.catalogue import load_catalogue
from workers.stream.sources.pinned import ACCEPT_FLAG, CountMismatchError, count_record


def given_rows(raw: RawDataset) -> dict[str, int]:
    """Rows per split the source ships (``train`` / ``val`` / ``test``), or ``none``: all."""
    given = raw.given_splits
    if given is None:
        return {"none": raw.num_examples}
    rows = {"train": len(given.train), "test": len(given.test)}
    if given.val is not None:
        rows["val"] = len(given.val)
    return rows


def check_counts(task: TaskSpec, raw: RawDataset, *, accept: bool) -> dict[str, Any]:
    """``{"counts_check": ...}`` for the index's ``source`` (empty when nothing is pinned).

    Raises:
        CountMismatchError: naming the dataset and what differs, unless ``accept``.
    """
    classes = len(raw.class_names)
    record: dict[str, Any] = {}
    if task.num_classes is not None and task.num_classes != classes:
        if not accept:
            raise CountMismatchError(
                f"Dataset {task.dataset!r}: task {task.order} of the manifest says "
                f"{task.num_classes} classes, the data has {classes}. Fix the manifest or the "
                f"data; if the change is known, pass {ACCEPT_FLAG} (the index records it)."
            )
        record["task_classes"] = {"expected": task.num_classes, "found": classes, "accepted_change": ACCEPT_FLAG}
    if task.dataset.startswith("nevis:"):
        try:
            source = load_catalogue().find(task.dataset)
        except DatasetNotFoundError:
            source = None  # a user's own nevis:<name> file: nothing is pinned for it
        # pins describe the source's own files: they apply to what convert or import-reference
        # made of them (the file names the source), not to a subset packed under its name
        if source is not None and raw.metadata.get("key") == source.key:
            record.update(count_record(source, classes, given_rows(raw), accept=accept))
    return {"counts_check": record} if record else {}


__all__ = ["check_counts", "given_rows"]
