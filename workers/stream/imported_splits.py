"""Data imported from the reference keeps the reference's own split of every row, unless told.

``nevis data import-reference`` writes each row's split as the reference (dm_nevis) made it
into ``attr.reference_split`` (``train``, ``dev``, ``dev_test``, ``test``), and records in the
file's ``source`` which use it was imported for (:data:`SPLIT_MODE_FIELD`):

- :data:`KEEP_REFERENCE` (the default): the rows keep the reference's split. Only a task whose
  rule reads that split (:data:`REFERENCE_RULE`, as the shipped ``nevis22-*-reference``
  streams do) may prepare the file; a stream rule that would deal the rows afresh is refused
  here, before anything is written, so the paper's exact test sets are never replaced by a
  re-deal without anyone asking for it.
- :data:`REDEAL` (``--redeal``): the stream's own rule deals the rows, as it does a converted
  download (the reference's split still rides along, so a reference rule may read it too).

Files without the field (converted downloads, imports made before it existed) are not checked.
"""

from __future__ import annotations

from services.core.errors import DatasetFormatError
from workers.stream.adapters import RawDataset
from workers.stream.manifest import TaskSpec
from workers.stream.split_rule import SPLITS, SplitRule

REFERENCE_SPLIT_ATTRIBUTE = "reference_split"
SPLIT_MODE_FIELD = "split_mode"
KEEP_REFERENCE, REDEAL = "reference", "redeal"
SPLIT_MODES = (KEEP_REFERENCE, REDEAL)
REDEAL_FLAG = "--redeal"
REFERENCE_STREAMS = ("nevis22-full-reference", "nevis22-short-reference")

# each row to the split the reference gave it: the rule of the reference variants' imported tasks
REFERENCE_RULE = SplitRule(
    kind="by_attribute",
    attribute=REFERENCE_SPLIT_ATTRIBUTE,
    values={split: (split,) for split in SPLITS},
    text="the reference's own split of each row (attr.reference_split, kept by nevis data import-reference)",
)


def reads_reference_split(rule: SplitRule) -> bool:
    """Whether ``rule`` places rows by the reference's split (it deals nothing afresh)."""
    return rule.kind == "by_attribute" and rule.attribute == REFERENCE_SPLIT_ATTRIBUTE


def check_split_mode(task: TaskSpec, raw: RawDataset) -> None:
    """Refuse a file imported to keep the reference's splits under a rule that re-deals it, and
    a reference-split rule on a file that has no reference split.

    Raises:
        DatasetFormatError: naming the dataset, the task's rule and what to do instead (the
            reference streams, the flag that re-imports a file for re-dealing, the import).
    """
    where = raw.metadata.get("file", "the dataset's file")
    if reads_reference_split(task.split):
        if REFERENCE_SPLIT_ATTRIBUTE not in raw.attributes:
            raise DatasetFormatError(
                f"Task {task.order} reads the reference's own split of each row "
                f"(attr.{REFERENCE_SPLIT_ATTRIBUTE}), which only `nevis data import-reference` writes; "
                f"dataset {task.dataset!r} ({where}) has none (converted from a download?). Import it from "
                "the reference's data folder, or prepare the parent stream, whose rule deals a download."
            )
        return
    if raw.metadata.get(SPLIT_MODE_FIELD) != KEEP_REFERENCE:
        return
    rule = task.split.text or task.split.kind
    raise DatasetFormatError(
        f"Dataset {task.dataset!r} ({where}) was imported from "
        "the reference keeping the reference's own split of every row, but task "
        f"{task.order} of this stream deals its rows by another rule ({rule}). Prepare a stream "
        f"that reads the reference's splits ({' or '.join(REFERENCE_STREAMS)}), or import it again "
        f"with `nevis data import-reference --force {REDEAL_FLAG}` to let the stream's rule re-deal the rows."
    )


__all__ = [
    "KEEP_REFERENCE",
    "REDEAL",
    "REDEAL_FLAG",
    "REFERENCE_RULE",
    "REFERENCE_SPLIT_ATTRIBUTE",
    "REFERENCE_STREAMS",
    "SPLIT_MODES",
    "SPLIT_MODE_FIELD",
    "check_split_mode",
    "reads_reference_split",
]
