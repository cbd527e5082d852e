"""Stream manifests: the ordered tasks of a stream version, as frozen values.

A manifest is a JSON document shipped in ``workers/stream/manifests/`` (see
:mod:`workers.stream.manifest_files`), or a user's own file in the same format::

    {"format": 1, "name": "...", "version": "1.0", "description": "...", "source": "...",
     "meta_test_from_year": 2019, "image_size": 32,            # image_size is optional
     "tasks": [{"order": 1, "year": 1998, "dataset": "sklearn:digits", "title": "...",
                "domain": "ocr", "kind": "single", "num_classes": 10, "num_examples": 1797,
                "split": {"kind": "random", "seed": 0, "text": "...",
                          "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}},
                "phase": "meta_train", "notes": ""}]}

:func:`parse_manifest` is the only way in: it checks every field (unknown fields are errors)
and raises :class:`~services.core.errors.ManifestError` naming the file, the task and the
field at fault. A task's phase always follows from its year; a stated ``phase`` is checked.

A manifest written by ``nevis streams derive`` (:mod:`workers.stream.derive`) also carries
``"derived_from": {"name", "version", "sha256", "mode", "seed"}``: the parent stream, its
content hash and the shuffle that made it, so an ordering-ablation result can be traced back.
Years must never go back in a hand-written manifest (a decreasing year is a typo); a derived
one may reorder years within a phase (the ``all`` shuffle), but in every manifest the
meta-train tasks come before the meta-test tasks, as the protocol needs.

``"private": true`` marks an operator's private stream (docs/isolation.md, "Private streams"):
its manifest and data are held by the operator, never published, and its runs are ranked on a
board of their own. Absent (the default) for every public stream, so their hashes are unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from services.core.errors import ManifestError
from workers.stream.manifest_checks import (
    DATASET_KEY_RE,
    IMAGE_SIZE_RANGE,
    STREAM_NAME_RE,
    VERSION_RE,
    YEAR_RANGE,
    Where,
    check_choice,
    check_fields,
    check_int,
    check_object,
    check_optional_int,
    check_str,
)
from workers.stream.split_rule import SPLITS, SplitKind, SplitRule, parse_split_rule, split_rule_to_dict

Phase = Literal["meta_train", "meta_test"]
TaskKind = Literal["single", "multi"]
MANIFEST_FORMAT = 1
# How a derived manifest reorders its parent's tasks (see workers.stream.derive).
SHUFFLE_MODES: tuple[str, ...] = ("within-years", "all")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class TaskSpec:
    """One task of a stream: a dataset at a point in time."""

    order: int  # 1-based position in the stream
    year: int
    dataset: str  # "<source>:<name>", e.g. "nevis:mnist", "offline:coil20", "sklearn:digits"
    title: str
    domain: str | None
    kind: TaskKind
    num_classes: int | None  # None where the source does not say
    split: SplitRule
    phase: Phase
    notes: str = ""
    num_examples: int | None = None  # size of the dataset where known, for planning

    @property
    def key(self) -> str:
        """Stable task identifier inside a stream, e.g. ``"007-offline-mnist"``."""
        return f"{self.order:03d}-{self.dataset.replace(':', '-')}"

    @property
    def source(self) -> str:
        return self.dataset.split(":", 1)[0]

    @property
    def dataset_name(self) -> str:
        return self.dataset.split(":", 1)[1]


@dataclass(frozen=True)
class Derivation:
    """Where a derived manifest comes from: its parent stream and the shuffle applied."""

    name: str  # the parent stream's name
    version: str  # the parent stream's version
    sha256: str  # the parent's manifest_sha256, so the exact parent content is pinned
    mode: str  # one of SHUFFLE_MODES
    seed: int


@dataclass(frozen=True)
class StreamManifest:
    """A named, versioned, ordered list of tasks."""

    name: str
    version: str
    description: str
    source: str  # where the task list comes from (citation)
    meta_test_from_year: int  # tasks of this year and later form the meta-test phase
    tasks: tuple[TaskSpec, ...]
    image_size: int | None = None  # stored resolution override (default: settings)
    derived_from: Derivation | None = None  # set on manifests written by `streams derive`
    private: bool = False  # an operator's private stream: never published, ranked on its own board

    @property
    def meta_train(self) -> tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.phase == "meta_train")

    @property
    def meta_test(self) -> tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.phase == "meta_test")

    @property
    def datasets(self) -> tuple[str, ...]:
        """Distinct dataset keys, in order of first appearance."""
        return tuple(dict.fromkeys(t.dataset for t in self.tasks))

    def tasks_of_phase(self, phase: str) -> tuple[TaskSpec, ...]:
        """The tasks a run of ``phase`` goes through: meta-test runs the whole stream,
        meta-train the meta-train tasks only."""
        if phase == "meta_test":
            return self.tasks
        if phase == "meta_train":
            return self.meta_train
        raise ManifestError(f"Unknown phase {phase!r}: use 'meta_train' or 'meta_test'.")


def eval_split(phase: str) -> str:
    """The split a run of ``phase`` is scored on: test (meta-test) or dev-test (meta-train)."""
    return "test" if phase == "meta_test" else "dev_test"


# The format, field by field. A field not listed here is an error, so typos never pass.
_TOP_REQUIRED = ("format", "name", "version", "description", "source", "meta_test_from_year", "tasks")
_TOP_OPTIONAL = ("image_size", "derived_from", "private")
_DERIVED_FIELDS = ("name", "version", "sha256", "mode", "seed")
_TASK_REQUIRED = ("order", "year", "dataset", "title", "kind", "split")
_TASK_OPTIONAL = ("domain", "num_classes", "num_examples", "phase", "notes")
_DATASET_HINT = "'<source>:<name>' in lower case, e.g. 'offline:mnist'"


def phase_of(year: int, meta_test_from_year: int) -> Phase:
    """The protocol phase of a task: meta-test from ``meta_test_from_year`` on."""
    return "meta_test" if year >= meta_test_from_year else "meta_train"


def parse_manifest(doc: Mapping[str, Any], *, origin: str = "<manifest>") -> StreamManifest:
    """Validate a manifest document and build the frozen value.

    Args:
        doc: the decoded JSON document.
        origin: where it came from (a file name), used in every error message.

    Returns:
        The manifest, with each task's phase derived from its year.

    Raises:
        ManifestError: naming ``origin``, the task and the field at fault.
    """
    where = Where(origin)
    doc = check_object(doc, where, "<document>")
    check_fields(doc, where, required=_TOP_REQUIRED, optional=_TOP_OPTIONAL)
    fmt = doc["format"]
    if isinstance(fmt, bool) or fmt != MANIFEST_FORMAT:
        raise where.error("format", f"must be {MANIFEST_FORMAT} (the only format read here)", fmt)
    name = check_str(doc["name"], where, "name", pattern=STREAM_NAME_RE, hint="a slug such as 'my-stream'")
    version = check_str(doc["version"], where, "version", pattern=VERSION_RE, hint="a version such as '1.0'")
    description = check_str(doc["description"], where, "description")
    source = check_str(doc["source"], where, "source")
    cutoff = check_int(doc["meta_test_from_year"], where, "meta_test_from_year", lo=YEAR_RANGE[0], hi=YEAR_RANGE[1])
    lo, hi = IMAGE_SIZE_RANGE
    image_size = check_optional_int(doc.get("image_size"), where, "image_size", lo=lo, hi=hi)
    private = doc.get("private", False)
    if not isinstance(private, bool):
        raise where.error("private", "must be true (an operator's private stream) or false", private)
    derived_from = None
    if "derived_from" in doc:
        derived_from = _parse_derivation(doc["derived_from"], where)
    raw_tasks = doc["tasks"]
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise where.error("tasks", "must be a non-empty list of task objects", raw_tasks)
    tasks: list[TaskSpec] = []
    for position, raw in enumerate(raw_tasks, start=1):
        # A derived manifest may reorder years within a phase; the phase order still holds.
        previous_year = tasks[-1].year if tasks and derived_from is None else None
        tasks.append(_parse_task(raw, where.at_task(position), position, previous_year, cutoff))
        _check_phase_order(tasks, where.at_task(position), cutoff)
    return StreamManifest(
        name=name,
        version=version,
        description=description,
        source=source,
        meta_test_from_year=cutoff,
        tasks=tuple(tasks),
        image_size=image_size,
        derived_from=derived_from,
        private=private,
    )


def _parse_derivation(raw: Any, where: Where) -> Derivation:
    obj = check_object(raw, where, "derived_from")
    check_fields(obj, where, required=_DERIVED_FIELDS, prefix="derived_from.")
    return Derivation(
        name=check_str(
            obj["name"],
            where,
            "derived_from.name",
            pattern=STREAM_NAME_RE,
            hint="the parent stream's name, a slug such as 'nevis22-short'",
        ),
        version=check_str(
            obj["version"],
            where,
            "derived_from.version",
            pattern=VERSION_RE,
            hint="the parent stream's version, such as '1.0'",
        ),
        sha256=check_str(
            obj["sha256"],
            where,
            "derived_from.sha256",
            pattern=_SHA256_RE,
            hint="64 lower-case hex digits (the parent's manifest sha256)",
        ),
        mode=check_choice(obj["mode"], where, "derived_from.mode", SHUFFLE_MODES),
        seed=check_int(obj["seed"], where, "derived_from.seed", lo=0, hi=2**32 - 1),
    )


def _check_phase_order(tasks: list[TaskSpec], where: Where, cutoff: int) -> None:
    """A meta-train task never follows a meta-test task (true of any year-sorted stream)."""
    if len(tasks) > 1 and tasks[-2].phase == "meta_test" and tasks[-1].phase == "meta_train":
        raise where.error(
            "year", f"must be {cutoff} or later: a meta-train task cannot follow a meta-test task", tasks[-1].year
        )


def _parse_task(raw: Any, where: Where, position: int, previous_year: int | None, cutoff: int) -> TaskSpec:
    task = check_object(raw, where, "tasks[]")
    check_fields(task, where, required=_TASK_REQUIRED, optional=_TASK_OPTIONAL)
    order = check_int(task["order"], where, "order", lo=1)
    if order != position:
        raise where.error("order", f"must be {position}: tasks are numbered 1..n in list order", order)
    year = check_int(task["year"], where, "year", lo=YEAR_RANGE[0], hi=YEAR_RANGE[1])
    if previous_year is not None and year < previous_year:
        raise where.error("year", f"must not be before the previous task's year ({previous_year})", year)
    phase = phase_of(year, cutoff)
    if "phase" in task:
        stated = check_choice(task["phase"], where, "phase", ("meta_train", "meta_test"))
        if stated != phase:
            raise where.error("phase", f"must be {phase!r} for year {year} (meta-test starts in {cutoff})", stated)
    domain = task.get("domain")
    return TaskSpec(
        order=order,
        year=year,
        dataset=check_str(task["dataset"], where, "dataset", pattern=DATASET_KEY_RE, hint=_DATASET_HINT),
        title=check_str(task["title"], where, "title"),
        domain=None if domain is None else check_str(domain, where, "domain"),
        kind=cast(TaskKind, check_choice(task["kind"], where, "kind", ("single", "multi"))),
        num_classes=check_optional_int(task.get("num_classes"), where, "num_classes", lo=1),
        split=parse_split_rule(task["split"], where),
        phase=phase,
        notes=check_str(task.get("notes", ""), where, "notes", allow_empty=True),
        num_examples=check_optional_int(task.get("num_examples"), where, "num_examples", lo=1),
    )


def manifest_to_dict(manifest: StreamManifest) -> dict[str, Any]:
    """The document form of a manifest: ``parse_manifest(manifest_to_dict(m)) == m``.

    Every task field is written (``null`` where unknown) and each task carries its derived
    phase, so the JSON reads on its own.
    """
    doc: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "name": manifest.name,
        "version": manifest.version,
        "description": manifest.description,
        "source": manifest.source,
        "meta_test_from_year": manifest.meta_test_from_year,
    }
    if manifest.image_size is not None:
        doc["image_size"] = manifest.image_size
    if manifest.derived_from is not None:  # absent otherwise, so older hashes are unchanged
        d = manifest.derived_from
        doc["derived_from"] = {"name": d.name, "version": d.version, "sha256": d.sha256, "mode": d.mode, "seed": d.seed}
    if manifest.private:  # absent otherwise, so public streams' hashes are unchanged
        doc["private"] = True
    doc["tasks"] = [_task_to_dict(t) for t in manifest.tasks]
    return doc


def _task_to_dict(task: TaskSpec) -> dict[str, Any]:
    split = split_rule_to_dict(task.split)
    return {
        "order": task.order,
        "year": task.year,
        "phase": task.phase,
        "dataset": task.dataset,
        "title": task.title,
        "domain": task.domain,
        "kind": task.kind,
        "num_classes": task.num_classes,
        "num_examples": task.num_examples,
        "split": split,
        "notes": task.notes,
    }


__all__ = [
    "MANIFEST_FORMAT",
    "SHUFFLE_MODES",
    "SPLITS",
    "Derivation",
    "Phase",
    "SplitKind",
    "SplitRule",
    "StreamManifest",
    "TaskKind",
    "TaskSpec",
    "eval_split",
    "manifest_to_dict",
    "parse_manifest",
    "phase_of",
]
