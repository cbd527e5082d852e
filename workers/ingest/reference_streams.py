"""The ``nevis22-*-reference`` streams: NEVIS'22 with the reference's own split of every row.

``nevis data import-reference`` keeps the split the reference (dm_nevis) gave each row of the
datasets it prepared (``attr.reference_split``); these variants read it, so the paper's exact
train, dev, dev-test and test sets are one ``nevis data prepare`` away, with no hand-written
manifest.

Only sources the reference prepares itself, by a handler of ``dm_nevis/datasets_storage``
(catalogue ``source_kind`` ``handler``), exist in its data folder and can be imported. The
sources it reads through TensorFlow Datasets (``tfds``) or its own TFDS builders
(``tfds_custom_builder``: COIL-100, smallNORB, DomainNet) are built from the TFDS download at
run time and never written there: their tasks keep the parent stream's rule, the reference's
rule over the same TFDS splits (exact where it draws nothing; where it draws, other examples,
docs/fidelity.md S9), and their data come from ``nevis data fetch`` and ``convert``.

Every other field of every task is the parent's, so a run on a variant compares with a run on
its parent task by task. ``scripts/build_reference_streams.py`` writes the shipped files; a
test checks they are current.
"""

from __future__ import annotations

import json
from dataclasses import replace

from workers.stream.imported_splits import REFERENCE_RULE
from workers.stream.manifest import StreamManifest, TaskSpec, manifest_to_dict, parse_manifest
from workers.stream.manifest_files import manifest_sha256
from workers.stream.sources.catalogue import Catalogue, Source

IMPORTABLE_KIND = "handler"  # written to the reference's data folder by a datasets_storage handler
SUFFIX = "-reference"
PARENTS = ("nevis22-full", "nevis22-short")


def importable(source: Source) -> bool:
    """Whether the reference writes ``source`` to its data folder (so it can be imported)."""
    return source.source_kind == IMPORTABLE_KIND


def not_importable(catalogue: Catalogue) -> list[Source]:
    """The sources the reference reads from TFDS and never writes to its data folder."""
    return [s for s in catalogue.sources if not importable(s)]


def _task(task: TaskSpec, catalogue: Catalogue) -> TaskSpec:
    source = catalogue.find(task.dataset)
    if not importable(source):
        note = f"{source.source_kind} source, not in the reference's data folder: the parent's rule"
        return replace(task, notes=f"{task.notes}; {note}" if task.notes else note)
    note = f"the reference's split of each row (parent's rule: {task.split.text or task.split.kind})"
    return replace(task, split=REFERENCE_RULE, notes=f"{task.notes}; {note}" if task.notes else note)


def reference_variant(parent: StreamManifest, catalogue: Catalogue) -> StreamManifest:
    """``parent`` with every importable source's tasks reading the reference's own splits.

    Raises:
        DatasetNotFoundError: a task's dataset is no source of the catalogue.
    """
    tasks = tuple(_task(t, catalogue) for t in parent.tasks)
    kept = sum(t.split == REFERENCE_RULE for t in tasks)
    variant = replace(
        parent,
        name=parent.name + SUFFIX,
        description=(
            f"{parent.description} Variant with the reference's own splits: {kept} of the "
            f"{len(tasks)} tasks read the split the reference gave each row of the data "
            "`nevis data import-reference` imported from its data folder; the other "
            f"{len(tasks) - kept}, whose sources the reference reads from TFDS, keep the parent's "
            "rule (data from `nevis data fetch` and `convert`)."
        ),
        source=(
            f"Derived by scripts/build_reference_streams.py from {parent.name} {parent.version} "
            f"(sha256 {manifest_sha256(parent)}) and the source kinds of "
            "workers/stream/sources/catalogue.json."
        ),
        tasks=tasks,
    )
    # through the parser, so the shipped file is exactly a manifest's canonical form
    return parse_manifest(manifest_to_dict(variant), origin=f"{variant.name} (derived)")


def render(manifest: StreamManifest) -> str:
    """The manifest as the shipped files are written (indented JSON, one final newline)."""
    return json.dumps(manifest_to_dict(manifest), indent=2, ensure_ascii=False) + "\n"


__all__ = ["IMPORTABLE_KIND", "PARENTS", "SUFFIX", "importable", "not_importable", "reference_variant", "render"]
